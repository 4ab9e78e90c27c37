"""The ``routine`` kind: ``studio_list_routines`` and ``studio_edit_routine`` (create, edit, delete).

The proposal binds the routine's hash (agent, timing, description, instruction, pause; a create binds that there is
none). Apply reviews the routine again under its row lock and answers 409 when the hash moved; then it writes as the
operator with the proposal's provenance, plans the next wake-up from the apply, and publishes ``RoutinesChanged``
on the guild's stream.
"""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict

from assent.contracts import CardField, DecisionMade, ProposalBase, ProposalTarget
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

from ..adapters.repository import RoutinesRepository
from ..changes import changed, planned
from ..domain.routine import (
    EditRoutine,
    ListRoutines,
    Provenance,
    Routine,
    Wanted,
    as_text,
    effects,
    refuse,
    wanted_routine,
)
from ..domain.timing import Timing


def store(uow: UnitOfWork) -> RoutinesRepository:
    return uow.store(RoutinesRepository)


def new_schedule_id() -> str:
    return f"rtn_{uuid.uuid4().hex[:16]}"


class ListedRoutine(BaseModel):
    """A routine as ``studio_list_routines`` lists it: its timing as given and in words, and its planned next wake-up
    (ISO 8601; None while paused)."""

    model_config = ConfigDict(frozen=True)

    schedule_id: str
    agent_id: str
    guild_id: str
    description: str
    instruction: str
    cron: str | None
    window: str | None
    timezone: str
    timing: str
    paused: bool
    next_wake_at: str | None
    version: int


def listed(routine: Routine) -> ListedRoutine:
    return ListedRoutine(
        schedule_id=routine.schedule_id,
        agent_id=routine.agent_id,
        guild_id=routine.guild_id,
        description=routine.description,
        instruction=routine.instruction,
        cron=routine.timing.cron,
        window=routine.timing.window,
        timezone=routine.timing.timezone,
        timing=routine.timing.in_words(),
        paused=routine.paused,
        next_wake_at=None if routine.next_wake_at is None else routine.next_wake_at.isoformat(),
        version=routine.version,
    )


class RoutineList(BaseModel):
    """``studio_list_routines``'s answer: the routines, and whether the source guild has its routines on."""

    model_config = ConfigDict(frozen=True)

    routines_on: bool
    routines: list[ListedRoutine]


class RoutineState(BaseModel):
    """A routine's text, timing and pause, as a request read it."""

    model_config = ConfigDict(frozen=True)

    description: str
    instruction: str
    cron: str | None
    window: str | None
    timezone: str
    paused: bool

    @classmethod
    def of(cls, routine: Routine) -> RoutineState:
        timing = routine.timing
        return cls(
            description=routine.description,
            instruction=routine.instruction,
            cron=timing.cron,
            window=timing.window,
            timezone=timing.timezone,
            paused=routine.paused,
        )

    def arguments(self) -> dict[str, object]:
        """As ``studio_edit_routine`` takes it (one timing: the one given)."""
        timing = {"cron": self.cron} if self.cron is not None else {"window": self.window}
        return {
            **timing,
            "timezone": self.timezone,
            "description": self.description,
            "instruction": self.instruction,
            "paused": self.paused,
        }


class RoutineEdit(BaseModel):
    """What applying a routine request writes (its ``payload``): the routine as wanted (``schedule_id`` None: a
    create), of which agent in which guild and organisation; and, for an edit or a delete, the routine as it read it
    (``before``: what it replaces once applied, since applying needs the routine as read; None in a request proposed
    before it was kept)."""

    model_config = ConfigDict(frozen=True)

    org_id: str
    guild_id: str
    agent_name: str
    schedule_id: str | None
    description: str
    instruction: str
    cron: str | None
    window: str | None
    timezone: str
    paused: bool
    before: RoutineState | None = None


class MovedTo(BaseModel):
    """A stale request's routine as it is now, by its version (None: there is none any more)."""

    model_config = ConfigDict(frozen=True)

    live_version: int | None


class RoutineDeleted(BaseModel):
    model_config = ConfigDict(frozen=True)

    schedule_id: str


class RoutineWritten(BaseModel):
    """What an applied create or edit wrote: the routine, and its next wake-up as planned (ISO 8601; None: paused)."""

    model_config = ConfigDict(frozen=True)

    schedule_id: str
    next_wake_at: str | None


class RoutineKind(ProposalKind):
    name = "routine"
    reads_proposals = False  # its rules read the routines, never the proposals table

    def tools(self) -> dict[str, Tool]:
        return {
            "studio_list_routines": Tool(ListRoutines, self.list),
            "studio_edit_routine": Tool(EditRoutine, self.propose),
        }

    async def list(self, call: Call, args: ListRoutines, uow: UnitOfWork) -> Output | Refusal:
        """The routines of the source guild's live agents (or of one of them), with the guild's switch."""
        if args.agent_id is not None:
            agent = await uow.workspace.agent(args.agent_id)
            refusal = check_live_member(call.session, agent, args.agent_id)
            if refusal is not None:
                return refusal
            agent_ids = [args.agent_id]
        else:
            agents = await uow.workspace.agents_of_guild(call.session.source_guild_id)
            agent_ids = [a.agent_id for a in agents if a.live and a.org_id == call.session.org_id]
        routines = await store(uow).of_agents(agent_ids)
        answer = RoutineList(
            routines_on=await store(uow).routines_on(call.session.source_guild_id),
            routines=[listed(r) for r in routines],
        )
        return Output(answer.model_dump(mode="json"))

    async def propose(self, call: Call, args: EditRoutine, uow: UnitOfWork) -> Proposal | Refusal:
        session = call.session
        live: Routine | None = None
        if args.action == "create":
            if args.agent_id is None:
                return refuse("missing_field", "a create needs agent_id")
            agent_id = args.agent_id
        else:
            if args.schedule_id is None:
                return refuse("missing_field", f"an {args.action} needs schedule_id, from studio_list_routines")
            live = await store(uow).get(args.schedule_id)
            if live is None or live.org_id != session.org_id:
                return refuse(
                    "unknown_routine", f"routine {args.schedule_id!r} does not exist in this organisation", 404
                )
            agent_id = live.agent_id
        agent = await uow.workspace.agent(agent_id)
        refusal = check_live_member(session, agent, agent_id)
        if refusal is not None:
            return refusal
        assert agent is not None
        wanted = wanted_routine(args, live)
        if isinstance(wanted, Refusal):
            return wanted
        routines_on = await store(uow).routines_on(agent.guild_id or "")
        now = await store(uow).now()
        before = as_text(agent.name, agent.agent_id, live)
        after = "" if args.action == "delete" else as_text(agent.name, agent.agent_id, wanted)
        label = f"Routine of {agent.name}: {wanted.description}"
        return Proposal(
            action=args.action,
            target=ProposalTarget(
                kind="routine", agent_id=agent.agent_id, guild_id=agent.guild_id, label=label, ref=args.schedule_id
            ),
            base=ProposalBase(version=None if live is None else live.version, hash=None if live is None else live.hash),
            proposed_hash="" if args.action == "delete" else wanted.hash,
            reason=args.reason,
            before=before,
            after=after,
            fields=(
                CardField(
                    name="routine",
                    before=None if live is None else before,
                    after=None if args.action == "delete" else after,
                ),
            ),
            effects=effects(args.action, agent.name, live, wanted, now, routines_on),
            payload=RoutineEdit(
                org_id=session.org_id,
                guild_id=session.source_guild_id,  # the agent's: it is a live member of the session's source guild
                agent_name=agent.name,
                schedule_id=args.schedule_id,
                description=wanted.description,
                instruction=wanted.instruction,
                cron=wanted.timing.cron,
                window=wanted.timing.window,
                timezone=wanted.timing.timezone,
                paused=wanted.paused,
                before=None if live is None else RoutineState.of(live),
            ).model_dump(mode="json"),
        )

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        edit = RoutineEdit.model_validate(proposal.payload)
        # schedule_id None: a create, with no routine to show yet
        live = None if edit.schedule_id is None else await store(uow).get(edit.schedule_id)
        name = edit.agent_name
        text = None if live is None else as_text(name, live.agent_id, live)
        after = None if proposal.action == "delete" else as_text(name, proposal.agent_id or "", _wanted(proposal, edit))
        return LiveView(
            hash=None if live is None else live.hash,
            version=None if live is None else live.version,
            fields=(CardField(name="routine", before=text, after=after),),
        )

    async def inverse(self, proposal: StoredProposal, uow: UnitOfWork) -> Inverse | Refusal:
        """A created routine is deleted; an edited one gets its text, timing and pause back (created again, with a new
        schedule id, when it was deleted since); a deleted one is created again (a new schedule id). Each proposed
        over the routine as it is now."""
        edit = RoutineEdit.model_validate(proposal.payload)
        schedule_id = edit.schedule_id or (proposal.resolution or {}).get("schedule_id")
        live = None if not isinstance(schedule_id, str) else await store(uow).get(schedule_id)
        if proposal.action == "create":
            if live is None:
                return refuse("already_reverted", "the routine it created does not exist any more", 409)
            return Inverse("studio_edit_routine", {"action": "delete", "schedule_id": live.schedule_id})
        if edit.before is None:
            return refuse("before_unknown", "the routine before this request is not kept", 409)
        if live is None:
            create = {"action": "create", "agent_id": proposal.agent_id, **edit.before.arguments()}
            return Inverse("studio_edit_routine", create)
        if RoutineState.of(live) == edit.before:
            return refuse("already_reverted", "the routine already reads as it did before this request", 409)
        return Inverse(
            "studio_edit_routine", {"action": "edit", "schedule_id": live.schedule_id, **edit.before.arguments()}
        )

    async def apply(
        self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork
    ) -> Applied | Stale | Refusal:
        edit, repo = RoutineEdit.model_validate(proposal.payload), store(uow)
        base_hash = proposal.base.get("hash")
        live = None if edit.schedule_id is None else await repo.get(edit.schedule_id, for_update=True)
        if (None if live is None else live.hash) != base_hash:
            return Stale(
                "the routine changed since the coach read it; the request stays pending",
                MovedTo(live_version=None if live is None else live.version).model_dump(mode="json"),
            )
        now = await repo.now()
        by = Provenance(decision.actor, proposal.session_id, proposal.seq)
        if proposal.action == "delete":
            assert live is not None
            await repo.delete(live.schedule_id)
            await changed(uow, live, "deleted", None, by)
            return Applied(
                f"deleted routine {live.schedule_id}",
                live.version,
                RoutineDeleted(schedule_id=live.schedule_id).model_dump(mode="json"),
            )
        wanted = _wanted(proposal, edit)
        agent = await uow.workspace.agent(wanted.agent_id)
        if agent is None or not agent.live or agent.guild_id != edit.guild_id:
            return refuse("agent_out_of_reach", f"agent {wanted.agent_id!r} is no longer a live member of its guild")
        # A change plans the next wake-up again from the apply; an edit that keeps timing and pause keeps its plan.
        keeps_plan = live is not None and live.timing == wanted.timing and live.paused == wanted.paused
        next_wake = live.next_wake_at if keeps_plan and live is not None else planned(wanted.timing, wanted.paused, now)
        routine = Routine(
            schedule_id=live.schedule_id if live is not None else new_schedule_id(),
            org_id=edit.org_id,
            guild_id=edit.guild_id,
            agent_id=wanted.agent_id,
            description=wanted.description,
            instruction=wanted.instruction,
            timing=wanted.timing,
            paused=wanted.paused,
            next_wake_at=next_wake,
            version=1 if live is None else live.version + 1,
        )
        if live is None:
            await repo.create(routine, by)
        else:
            await repo.replace(routine, by)
        await changed(uow, routine, "created" if live is None else "edited", next_wake, by)
        return Applied(
            f"{'created' if live is None else 'changed'} routine {routine.schedule_id}",
            routine.version,
            RoutineWritten(
                schedule_id=routine.schedule_id, next_wake_at=None if next_wake is None else next_wake.isoformat()
            ).model_dump(mode="json"),
        )


def _wanted(proposal: StoredProposal, edit: RoutineEdit) -> Wanted:
    return Wanted(
        proposal.agent_id or "",
        edit.description,
        edit.instruction,
        Timing(edit.cron, edit.window, edit.timezone),
        edit.paused,
    )
