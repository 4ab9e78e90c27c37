"""Memory edit requests: ``studio_edit_memory`` and ``studio_read_memory``.

The coach proposes the complete new Memory of one agent, bound to the version it read. Reviewing writes
nothing; applying re-checks the live Memory and refuses when it moved since. The byte cap holds on every
write path, the operator's direct writes included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from assent.contracts import Id, Text
from assent.domain import Agent, Refusal, Session, check_live_member
from assent.hashing import content_hash

from .model import LiveMemory

Reason = Annotated[Text, StringConstraints(min_length=1, max_length=4000, strip_whitespace=True)]


class EditMemory(BaseModel):
    """Arguments of ``studio_edit_memory(agent_id, content, base_version, reason)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: Id
    content: Text
    base_version: int = Field(ge=0, le=2_147_483_647)
    reason: Reason


class ReadMemory(BaseModel):
    """Arguments of ``studio_read_memory(agent_id)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: Id


@dataclass(frozen=True)
class MemoryProposal:
    """A reviewed, acceptable memory edit: what the request binds and what its card shows."""

    agent_id: str
    agent_name: str
    base_version: int
    base_hash: str
    proposed_hash: str
    before: str
    after: str
    reason: str


def check_byte_cap(content: str, max_bytes: int, what: str = "the proposed Memory") -> Refusal | None:
    size = len(content.encode())
    if size > max_bytes:
        return Refusal(422, "content_too_large", f"{what} is {size} bytes; the cap is {max_bytes} bytes")
    return None


def review_edit(
    session: Session, agent: Agent | None, live: LiveMemory | None, args: EditMemory, max_bytes: int
) -> MemoryProposal | Refusal:
    """Check reach, the byte cap and the base version; write nothing."""
    refusal = check_live_member(session, agent, args.agent_id)
    if refusal is not None:
        return refusal
    assert agent is not None and live is not None
    refusal = check_byte_cap(args.content, max_bytes)
    if refusal is not None:
        return refusal
    if args.base_version != live.version:
        return Refusal(
            409,
            "stale_base_version",
            f"base_version {args.base_version} is not the live version {live.version} of agent "
            f"{args.agent_id!r}'s Memory; read it again and propose against the live text",
        )
    if args.content == live.content:
        return Refusal(422, "no_change", "the proposed Memory is the same as the live Memory")
    return MemoryProposal(
        agent_id=agent.agent_id,
        agent_name=agent.name,
        base_version=live.version,
        base_hash=live.hash,
        proposed_hash=content_hash(args.content),
        before=live.content,
        after=args.content,
        reason=args.reason,
    )
