"""Memory edit requests: ``studio_edit_memory`` and ``studio_read_memory``.

The coach proposes the complete new Memory of one agent, bound to the version it read. Reviewing writes
nothing; applying re-checks the live Memory and refuses when it moved since.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from assent.contracts import Id, Text
from assent.hashing import content_hash, line_counts

from .model import Agent, LiveMemory, Refusal, Request, Session


class EditMemory(BaseModel):
    """Arguments of ``studio_edit_memory(agent_id, content, base_version, reason)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: Id
    content: Text
    base_version: int = Field(ge=0)
    reason: Annotated[Text, StringConstraints(min_length=1, max_length=4000, strip_whitespace=True)]


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
    added: int
    removed: int
    before: str
    after: str
    reason: str


def invalid_arguments(tool: str, exc: ValidationError) -> Refusal:
    problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors())
    return Refusal(422, "invalid_arguments", f"{tool}: {problems}")


def check_reach(session: Session, agent: Agent | None, agent_id: str) -> Refusal | None:
    """The agent must be a live member of the session's source guild."""
    if agent is None or agent.org_id != session.org_id:
        return Refusal(404, "unknown_agent", f"agent {agent_id!r} does not exist in this organisation")
    if agent.guild_id != session.source_guild_id or not agent.live:
        return Refusal(
            422,
            "agent_out_of_reach",
            f"agent {agent_id!r} is not a live member of the session's source guild {session.source_guild_id!r}",
        )
    return None


def review_edit(
    session: Session, agent: Agent | None, live: LiveMemory | None, args: EditMemory, max_bytes: int
) -> MemoryProposal | Refusal:
    """Check reach, the byte cap and the base version; write nothing."""
    refusal = check_reach(session, agent, args.agent_id)
    if refusal is not None:
        return refusal
    assert agent is not None and live is not None
    size = len(args.content.encode())
    if size > max_bytes:
        return Refusal(422, "content_too_large", f"the proposed Memory is {size} bytes; the cap is {max_bytes} bytes")
    if args.base_version != live.version:
        return Refusal(
            409,
            "stale_base_version",
            f"base_version {args.base_version} is not the live version {live.version} of agent "
            f"{args.agent_id!r}'s Memory; read it again and propose against the live text",
        )
    if args.content == live.content:
        return Refusal(422, "no_change", "the proposed Memory is the same as the live Memory")
    added, removed = line_counts(live.content, args.content)
    return MemoryProposal(
        agent_id=agent.agent_id,
        agent_name=agent.name,
        base_version=live.version,
        base_hash=live.hash,
        proposed_hash=content_hash(args.content),
        added=added,
        removed=removed,
        before=live.content,
        after=args.content,
        reason=args.reason,
    )


Verdict = Literal["apply", "decline", "stale", "already_resolved", "wrong_decision"]


def decide(request: Request, decision: str, live: LiveMemory | None) -> Verdict:
    """What a decision does to a request: resolve it once, and never over a Memory that moved."""
    if request.edit_status != "pending":
        return "already_resolved"
    if decision == "decline":
        return "decline"
    if decision != "apply":
        return "wrong_decision"
    if live is None or live.hash != request.base_hash:
        return "stale"
    return "apply"
