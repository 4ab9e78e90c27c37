"""The ``draft`` kind: ``studio_create_task_draft``, ``studio_read_task``, ``studio_list_task_drafts``.

Drafting stores the draft (version 1, the coach's) beside the request, in the call's transaction, so the operator
can edit it before deciding; a new draft of the same agent in the same turn replaces the waiting one (the kit
resolves that request as superseded, and the old draft is marked so). Publishing writes the newest version as the
agent's Task, as the operator, and announces the agent's new state on ``workspace.events``; discarding writes
nothing but who discarded it. The rules are :mod:`edits.domain.drafts`.
"""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict

from assent.contracts import CardField, DecisionMade, ProposalBase, ProposalTarget
from assent.domain import Agent, Refusal, check_live_member
from assent.runtime import Applied, Call, LiveView, Output, Proposal, ProposalKind, Stale, StoredProposal, Tool
from assent.runtime.kit import proposal_id_for
from assent.runtime.uow import UnitOfWork
from edits_contract.draft_widget import AgentRef, DraftWidgetFields

from ..adapters.drafts import DraftsRepository
from ..domain import drafts
from ..domain.notes import embedded_paths
from ..workspace import publish_agent
from .outcomes import Moved

COACH = "coach"
"""The author of a draft's first version."""


def repo(uow: UnitOfWork) -> DraftsRepository:
    return uow.store(DraftsRepository)


def draft_id_for(proposal_id: str) -> str:
    """The id a draft gets: the same for every delivery of the call that drafted it."""
    return "draft_" + uuid.uuid5(uuid.NAMESPACE_URL, proposal_id).hex


class DraftView(BaseModel):
    """A draft as the read tools and the routes show it: its newest version, what it binds, how it ended, and
    whether the Task moved since it was made (``stale``)."""

    model_config = ConfigDict(frozen=True)

    draft_id: str
    agent_id: str
    session_id: str
    created_message_seq: int
    status: str
    version: int
    content: str
    hash: str
    base_hash: str
    rationale: str
    replaced_by: str | None
    published_by_user_id: str | None
    discarded_by_user_id: str | None
    published_version: int | None
    stale: bool


def draft_view(draft: drafts.Draft, live_task: str) -> DraftView:
    """``draft`` beside the agent's Task now, ``live_task``."""
    return DraftView(
        draft_id=draft.draft_id,
        agent_id=draft.agent_id,
        session_id=draft.session_id,
        created_message_seq=draft.created_message_seq,
        status=draft.status,
        version=draft.newest.version,
        content=draft.newest.content,
        hash=draft.newest.hash,
        base_hash=draft.base_hash,
        rationale=draft.rationale,
        replaced_by=draft.replaced_by,
        published_by_user_id=draft.published_by_user_id,
        discarded_by_user_id=draft.discarded_by_user_id,
        published_version=draft.published_version,
        stale=draft.status == "pending" and drafts.moved(draft, live_task),
    )


class TaskRead(BaseModel):
    """``studio_read_task``'s answer: the agent's Task, and the hash a draft binds."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    name: str
    task: str
    hash: str
    binds: str


class DraftList(BaseModel):
    """``studio_list_task_drafts``'s answer: the agent's drafts beside its Task's hash now."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    task_hash: str
    drafts: list[DraftView]


class NewDraft(BaseModel):
    """The draft ``studio_create_task_draft`` made: version 1, and the draft it replaces, if any."""

    model_config = ConfigDict(frozen=True)

    draft_id: str
    agent_id: str
    version: int
    content: str
    base_hash: str
    replaces: str | None
    embeds_missing_notes: list[str]


class DraftCreated(BaseModel):
    """What ``studio_create_task_draft``'s result says beside its widget."""

    model_config = ConfigDict(frozen=True)

    draft: NewDraft


class DraftRef(BaseModel):
    """What publishing a draft reads (a draft request's ``payload``): the draft, its agent and organisation."""

    model_config = ConfigDict(frozen=True)

    draft_id: str
    agent_id: str
    org_id: str


class DraftPublished(BaseModel):
    """What publishing a draft wrote: which version of it became the Task, and who published it."""

    model_config = ConfigDict(frozen=True)

    draft_id: str
    draft_version: int
    hash: str
    published_by_user_id: str


async def missing(uow: UnitOfWork, org_id: str, content: str) -> list[str]:
    """The notes ``content`` embeds that do not exist in the organisation."""
    paths = embedded_paths(content)
    return drafts.missing_notes(content, await repo(uow).existing_notes(org_id, paths))


class DraftKind(ProposalKind):
    name = "draft"
    reads_proposals = True  # replacing reads the waiting draft's request

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes

    def tools(self) -> dict[str, Tool]:
        return {
            "studio_create_task_draft": Tool(drafts.CreateTaskDraft, self.propose),
            "studio_read_task": Tool(drafts.ReadTask, self.read_task),
            "studio_list_task_drafts": Tool(drafts.ListTaskDrafts, self.list_drafts),
        }

    # --- read tools ---------------------------------------------------------------------------------

    async def _member(self, call: Call, agent_id: str, uow: UnitOfWork) -> Agent | Refusal:
        """A live member of the session's source guild, as drafting needs."""
        agent = await uow.workspace.agent(agent_id)
        refusal = check_live_member(call.session, agent, agent_id)
        if refusal is not None:
            return refusal
        assert agent is not None
        return agent

    async def read_task(self, call: Call, args: drafts.ReadTask, uow: UnitOfWork) -> Output | Refusal:
        agent = await self._member(call, args.agent_id, uow)
        if isinstance(agent, Refusal):
            return agent
        return Output(
            TaskRead(
                agent_id=agent.agent_id,
                name=agent.name,
                task=agent.task,
                hash=drafts.task_hash(agent.task),
                binds="pass hash as base_hash to studio_create_task_draft",
            ).model_dump(mode="json")
        )

    async def list_drafts(self, call: Call, args: drafts.ListTaskDrafts, uow: UnitOfWork) -> Output | Refusal:
        agent = await self._member(call, args.agent_id, uow)
        if isinstance(agent, Refusal):
            return agent
        return Output(
            DraftList(
                agent_id=agent.agent_id,
                task_hash=drafts.task_hash(agent.task),
                drafts=[draft_view(d, agent.task) for d in await repo(uow).of_agent(agent.agent_id)],
            ).model_dump(mode="json")
        )

    # --- proposing ----------------------------------------------------------------------------------

    async def propose(self, call: Call, args: drafts.CreateTaskDraft, uow: UnitOfWork) -> Proposal | Refusal:
        session, message = call.session, call.message
        agent = await uow.workspace.agent(args.agent_id)
        reviewed = drafts.review_create(session, args, agent, self.max_bytes)
        if isinstance(reviewed, Refusal):
            return reviewed
        store = repo(uow)
        old = drafts.replaced(await store.waiting(message.session_id, reviewed.agent_id), message.turn_id)
        predecessor = None if old is None else await uow.proposals.get(old.proposal_id)
        proposal_id = proposal_id_for(message.session_id, message.tool_call_id)
        draft = drafts.Draft(
            draft_id=draft_id_for(proposal_id),
            org_id=session.org_id,
            agent_id=reviewed.agent_id,
            session_id=message.session_id,
            created_message_seq=message.seq,
            turn_id=message.turn_id,
            proposal_id=proposal_id,
            tool_call_id=message.tool_call_id,
            base_hash=reviewed.base_hash,
            rationale=reviewed.rationale,
            status="pending",
            newest=drafts.DraftVersion(1, args.content, reviewed.proposed_hash, COACH),
        )
        await store.create(draft)
        if old is not None and predecessor is not None and predecessor.status == "pending":
            await store.resolve(old.draft_id, "superseded", replaced_by=draft.draft_id)
        else:
            predecessor = None
        lacking = await missing(uow, session.org_id, args.content)
        notes = [f"Draft {draft.draft_id}, version 1, against the Task at revision {reviewed.base_version}"]
        if old is not None and predecessor is not None:
            notes.append(f"Replaces draft {old.draft_id} (seq {old.created_message_seq}), which needs no answer")
        line = drafts.missing_notes_line(lacking)
        if line is not None:
            notes.append(line)
        return Proposal(
            action="publish",
            target=ProposalTarget(
                kind="draft",
                label=f"Task of {reviewed.agent_name}",
                agent_id=reviewed.agent_id,
                guild_id=reviewed.guild_id,
                path=f"agent/{reviewed.agent_id}/{drafts.TASK_FIELD}",
                ref=draft.draft_id,
            ),
            base=ProposalBase(version=reviewed.base_version, hash=reviewed.base_hash),
            proposed_hash=reviewed.proposed_hash,
            reason=reviewed.rationale,
            before=reviewed.before,
            after=reviewed.after,
            fields=(CardField(name=drafts.TASK_FIELD, before=reviewed.before, after=reviewed.after),),
            notes=tuple(notes),
            payload=DraftRef(draft_id=draft.draft_id, agent_id=reviewed.agent_id, org_id=session.org_id).model_dump(
                mode="json"
            ),
            output=DraftCreated(
                draft=NewDraft(
                    draft_id=draft.draft_id,
                    agent_id=reviewed.agent_id,
                    version=1,
                    content=args.content,
                    base_hash=reviewed.base_hash,
                    replaces=None if old is None or predecessor is None else old.draft_id,
                    embeds_missing_notes=lacking,
                )
            ).model_dump(mode="json"),
            widget_fields=DraftWidgetFields(
                agent=AgentRef(id=reviewed.agent_id, name=reviewed.agent_name),
                draft_id=draft.draft_id,
                rationale=reviewed.rationale,
            ),
            supersedes=predecessor,
        )

    # --- the card and deciding ----------------------------------------------------------------------

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        store = repo(uow)
        ref = DraftRef.model_validate(proposal.payload)
        draft = await store.draft(ref.draft_id)
        agent = await store.agent(ref.agent_id)
        task = None if agent is None else agent.task
        after = None if draft is None else draft.newest.content
        notes: list[str] = []
        if draft is not None:
            notes.append(f"Draft {draft.draft_id}, version {draft.newest.version}, {draft.status}")
            line = drafts.missing_notes_line(await missing(uow, draft.org_id, draft.newest.content))
            if line is not None:
                notes.append(line)
        return LiveView(
            hash=None if task is None else drafts.task_hash(task),
            version=None if agent is None else agent.revision,
            fields=(CardField(name=drafts.TASK_FIELD, before=task, after=after),),
            notes=tuple(notes),
        )

    async def apply(
        self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork
    ) -> Applied | Stale | Refusal:
        store = repo(uow)
        ref = DraftRef.model_validate(proposal.payload)
        draft = await store.draft(ref.draft_id, for_update=True)
        if draft is None:
            return Refusal(404, "unknown_draft", f"draft {ref.draft_id!r} does not exist")
        refusal = drafts.check_editable(draft)
        if refusal is not None:
            return refusal
        agent = await store.agent(draft.agent_id, for_update=True)
        if agent is None or not agent.live:
            return Refusal(422, "agent_retired", f"agent {draft.agent_id!r} is retired; its Task takes no draft")
        if drafts.moved(draft, agent.task):
            return Stale(
                f"{agent.name}'s Task changed since the draft was made against it (revision "
                f"{proposal.base.get('version')}, now {agent.revision}); the request stays pending",
                Moved(live_version=agent.revision, live_hash=drafts.task_hash(agent.task)).model_dump(mode="json"),
            )
        refusal = drafts.missing_notes_refusal(await missing(uow, draft.org_id, draft.newest.content))
        if refusal is not None:
            return refusal
        revision = await store.set_task(agent.agent_id, draft.newest.content)
        await store.log_task_change(
            draft.org_id,
            agent.agent_id,
            revision,
            actor=decision.actor,
            tool_call_id=proposal.tool_call_id,
            tool_name=proposal.tool,
            studio_session_id=proposal.session_id,
            studio_seq=proposal.seq,
        )
        await store.resolve(
            draft.draft_id,
            "published",
            published_by_user_id=decision.actor,
            published_version=draft.newest.version,
        )
        changed = await uow.workspace.agent(agent.agent_id)
        assert changed is not None
        await publish_agent(uow, changed)
        return Applied(
            f"published; {agent.name}'s Task is version {draft.newest.version} of draft {draft.draft_id}",
            revision,
            DraftPublished(
                draft_id=draft.draft_id,
                draft_version=draft.newest.version,
                hash=draft.newest.hash,
                published_by_user_id=decision.actor,
            ).model_dump(mode="json"),
        )

    async def decline(self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork) -> None:
        ref = DraftRef.model_validate(proposal.payload)
        await repo(uow).resolve(ref.draft_id, "discarded", discarded_by_user_id=decision.actor)
