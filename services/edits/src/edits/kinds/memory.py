"""The ``memory`` kind: ``studio_read_memory`` and ``studio_edit_memory``."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from assent.contracts import CardField, DecisionMade, ProposalBase, ProposalTarget, ToolCall
from assent.domain import Refusal, check_live_member
from assent.runtime import (
    Applied,
    Call,
    Inverse,
    LiveView,
    Output,
    Proposal,
    ProposalKind,
    Stale,
    StoredProposal,
    Tool,
)
from assent.runtime.uow import UnitOfWork

from ..adapters.repository import EditsRepository
from ..domain import memory
from ..workspace import memory_view
from .outcomes import Moved, Written

FILE = "memory.md"


class MemoryEdit(BaseModel):
    """What applying a Memory request writes (its ``payload``): the whole new text, in the agent's organisation."""

    model_config = ConfigDict(frozen=True)

    content: str
    org_id: str


def repo(uow: UnitOfWork) -> EditsRepository:
    return uow.store(EditsRepository)


class MemoryKind(ProposalKind):
    name = "memory"
    reads_proposals = False  # its rules read the targets, never the proposals table

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes

    def tools(self) -> dict[str, Tool]:
        return {
            "studio_read_memory": Tool(memory.ReadMemory, self.read),
            "studio_edit_memory": Tool(memory.EditMemory, self.propose),
        }

    async def read_ahead(self, calls: Sequence[ToolCall], uow: UnitOfWork) -> None:
        """Both tools read the agent of ``agent_id`` with its Memory: the batch's are read in one round trip."""
        agent_ids = {call.arguments.get("agent_id") for call in calls}
        await repo(uow).read_agent_memories(sorted(a for a in agent_ids if isinstance(a, str)))

    async def read(self, call: Call, args: memory.ReadMemory, uow: UnitOfWork) -> Output | Refusal:
        agent, live = await repo(uow).agent_memory(args.agent_id)
        refusal = check_live_member(call.session, agent, args.agent_id)
        if refusal is not None:
            return refusal
        assert live is not None  # every agent has a Memory from its creation
        return Output(memory_view(live).model_dump(mode="json"))

    async def propose(self, call: Call, args: memory.EditMemory, uow: UnitOfWork) -> Proposal | Refusal:
        agent, live = await repo(uow).agent_memory(args.agent_id)
        reviewed = memory.review_edit(call.session, agent, live, args, self.max_bytes)
        if isinstance(reviewed, Refusal):
            return reviewed
        return Proposal(
            action="edit",
            target=ProposalTarget(kind="memory", agent_id=reviewed.agent_id, label=f"Memory of {reviewed.agent_name}"),
            base=ProposalBase(version=reviewed.base_version, hash=reviewed.base_hash),
            proposed_hash=reviewed.proposed_hash,
            reason=reviewed.reason,
            before=reviewed.before,
            after=reviewed.after,
            fields=(CardField(name=FILE, before=reviewed.before, after=reviewed.after),),
            payload=MemoryEdit(content=args.content, org_id=call.session.org_id).model_dump(mode="json"),
        )

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        live = await repo(uow).memory(proposal.agent_id or "")
        edit = MemoryEdit.model_validate(proposal.payload)
        return LiveView(
            hash=None if live is None else live.hash,
            version=None if live is None else live.version,
            fields=(CardField(name=FILE, before=None if live is None else live.content, after=edit.content),),
        )

    async def inverse(self, proposal: StoredProposal, uow: UnitOfWork) -> Inverse | Refusal:
        """The Memory as it was before the request's version (the revision before it), proposed over the Memory as
        it is now: a change made since is never overwritten unseen, the card's diff shows it."""
        agent_id = proposal.agent_id or ""
        version = (proposal.resolution or {}).get("version")
        before = None if not isinstance(version, int) else await repo(uow).memory_content_at(agent_id, version - 1)
        live = await repo(uow).memory(agent_id)
        if before is None or live is None:
            return Refusal(409, "before_unknown", "the Memory before this request is not kept; nothing to revert to")
        if live.content == before:
            return Refusal(409, "already_reverted", "the Memory already reads as it did before this request")
        return Inverse("studio_edit_memory", {"agent_id": agent_id, "content": before, "base_version": live.version})

    async def apply(self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork) -> Applied | Stale:
        agent_id = proposal.agent_id or ""
        edit = MemoryEdit.model_validate(proposal.payload)
        base_hash = proposal.base["hash"]
        # One statement when the Memory is as the coach read it: the write checks the base hash on the row it
        # locks. Only when it moved is the live Memory read, to say how.
        version = None
        if base_hash is not None:  # a proposal without a base never applies
            version = await repo(uow).write_memory(
                edit.org_id,
                agent_id,
                edit.content,
                expected_hash=base_hash,
                actor=decision.actor,
                tool_call_id=proposal.tool_call_id,
                tool_name=proposal.tool,
                studio_session_id=proposal.session_id,
                studio_seq=proposal.seq,
            )
        if version is None:
            live = await repo(uow).memory(agent_id)
            return Stale(
                f"the Memory changed since the coach read it (base version {proposal.base['version']}, live version "
                f"{None if live is None else live.version}); the request stays pending",
                {} if live is None else Moved(live_version=live.version, live_hash=live.hash).model_dump(mode="json"),
            )
        return Applied(
            f"applied; Memory is now version {version}",
            version,
            Written(hash=proposal.proposed_hash).model_dump(mode="json"),
        )
