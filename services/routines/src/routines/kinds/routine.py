"""The ``routine`` kind: ``studio_list_routines`` and ``studio_edit_routine`` (create, edit, delete).

The proposal binds the routine's hash (agent, timing, description, instruction, pause; a create binds that there is
none). Apply reviews the routine again under its row lock and answers 409 when the hash moved; then it writes as the
operator with the proposal's provenance, plans the next wake-up from the apply, and publishes ``RoutinesChanged``
on the guild's stream.
"""

from __future__ import annotations

import uuid
from typing import Any

from assent.contracts import CardField, DecisionMade, ProposalBase, ProposalTarget
from assent.domain import Refusal, check_live_member
from assent.runtime import Applied, Call, LiveView, Output, Proposal, ProposalKind, Stale, StoredProposal, Tool
from assent.runtime.uow import UnitOfWork

from ..adapters.repository import RoutinesRepository
from ..changes import changed, planned
from ..domain.routine import EditRoutine, ListRoutines, Routine, Wanted, as_text, effects, refuse, wanted_routine
from ..domain.timing import Timing


def store(uow: UnitOfWork) -> RoutinesRepository:
    return uow.store(RoutinesRepository)


def new_schedule_id() -> str:
    return f"rtn_{uuid.uuid4().hex[:16]}"


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
        return Output(
            {
                "routines_on": await store(uow).routines_on(call.session.source_guild_id),
                "routines": [r.as_json() for r in routines],
            }
        )

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
            payload={
                "org_id": session.org_id,
                "guild_id": agent.guild_id,
                "agent_name": agent.name,
                "schedule_id": args.schedule_id,
                "description": wanted.description,
                "instruction": wanted.instruction,
                "cron": wanted.timing.cron,
                "window": wanted.timing.window,
                "timezone": wanted.timing.timezone,
                "paused": wanted.paused,
            },
        )

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        schedule_id = proposal.payload.get("schedule_id")  # None for a create: there is no routine to show yet
        live = None if schedule_id is None else await store(uow).get(schedule_id)
        name = proposal.payload["agent_name"]
        text = None if live is None else as_text(name, live.agent_id, live)
        after = None if proposal.action == "delete" else as_text(name, proposal.agent_id or "", _wanted(proposal))
        return LiveView(
            hash=None if live is None else live.hash,
            version=None if live is None else live.version,
            fields=(CardField(name="routine", before=text, after=after),),
        )

    async def apply(
        self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork
    ) -> Applied | Stale | Refusal:
        payload, repo = proposal.payload, store(uow)
        base_hash = proposal.base.get("hash")
        live = None if payload["schedule_id"] is None else await repo.get(payload["schedule_id"], for_update=True)
        if (None if live is None else live.hash) != base_hash:
            return Stale(
                "the routine changed since the coach read it; the request stays pending",
                {"live_version": None if live is None else live.version},
            )
        now = await repo.now()
        provenance: dict[str, Any] = {
            "actor": decision.actor,
            "session_id": proposal.session_id,
            "seq": proposal.seq,
        }
        if proposal.action == "delete":
            assert live is not None
            await repo.delete(live.schedule_id)
            await changed(uow, live, "deleted", None, **provenance)
            return Applied(f"deleted routine {live.schedule_id}", live.version, {"schedule_id": live.schedule_id})
        wanted = _wanted(proposal)
        agent = await uow.workspace.agent(wanted.agent_id)
        if agent is None or not agent.live or agent.guild_id != payload["guild_id"]:
            return refuse("agent_out_of_reach", f"agent {wanted.agent_id!r} is no longer a live member of its guild")
        # A change plans the next wake-up again from the apply; an edit that keeps timing and pause keeps its plan.
        keeps_plan = live is not None and live.timing == wanted.timing and live.paused == wanted.paused
        next_wake = live.next_wake_at if keeps_plan and live is not None else planned(wanted.timing, wanted.paused, now)
        routine = Routine(
            schedule_id=live.schedule_id if live is not None else new_schedule_id(),
            org_id=payload["org_id"],
            guild_id=payload["guild_id"],
            agent_id=wanted.agent_id,
            description=wanted.description,
            instruction=wanted.instruction,
            timing=wanted.timing,
            paused=wanted.paused,
            next_wake_at=next_wake,
            version=1 if live is None else live.version + 1,
        )
        if live is None:
            await repo.create(routine, actor=decision.actor, session_id=proposal.session_id, seq=proposal.seq)
        else:
            await repo.replace(routine, actor=decision.actor, session_id=proposal.session_id, seq=proposal.seq)
        await changed(uow, routine, "created" if live is None else "edited", next_wake, **provenance)
        return Applied(
            f"{'created' if live is None else 'changed'} routine {routine.schedule_id}",
            routine.version,
            {
                "schedule_id": routine.schedule_id,
                "next_wake_at": None if next_wake is None else next_wake.isoformat(),
            },
        )


def _wanted(proposal: StoredProposal) -> Wanted:
    p = proposal.payload
    return Wanted(
        proposal.agent_id or "",
        p["description"],
        p["instruction"],
        Timing(p["cron"], p["window"], p["timezone"]),
        p["paused"],
    )
