"""The edits service's use cases. Each takes a message (or command) and its dependencies, runs one
transaction, and writes the events it causes to the outbox in that same transaction.

Every consumer-facing handler claims the message's envelope id in the inbox first, so a redelivered
message changes nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from assent.contracts import (
    Card,
    DecisionMade,
    EditBase,
    EditTarget,
    LineCounts,
    ProposalOutcome,
    ProposalProposed,
    SessionClosed,
    SessionOpened,
    StudioEditRequest,
    ToolCall,
    ToolError,
    ToolResult,
)
from assent.db import session_lock
from assent.faults import crash_point
from assent.hashing import content_hash
from assent.inbox import claim
from assent.outbox import Outbox
from assent.sessions import record_session_event
from assent.topics import PROPOSALS_APPLIED, PROPOSALS_PROPOSED, TOOL_RESULTS

from .adapters import repository as repo
from .adapters import tables as t
from .domain import memory
from .domain.model import Refusal, Session
from .settings import EditsSettings

KINDS = frozenset({"memory"})
"""The proposal kinds this service owns (it ignores decisions on other kinds)."""


@dataclass(frozen=True)
class Deps:
    engine: AsyncEngine
    outbox: Outbox
    settings: EditsSettings


# --- sessions ---------------------------------------------------------------------------------------


async def on_session_event(message: SessionOpened | SessionClosed, deps: Deps) -> None:
    async with deps.outbox.transaction(deps.engine) as conn:
        if await claim(conn, t.inbox, "edits.sessions", message.id):
            await record_session_event(conn, t.sessions, message)


class _SessionNotOpenYet(Exception):
    pass


# --- tool calls -------------------------------------------------------------------------------------


async def on_tool_call(call: ToolCall, deps: Deps) -> None:
    """Answer one tool call with exactly one ``ToolResult``; a reviewed edit also records a request."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deps.settings.session_wait_seconds
    while True:
        try:
            await _on_tool_call(call, deps, wait_for_session=loop.time() < deadline)
            return
        except _SessionNotOpenYet:
            # SessionOpened travels on another topic than the tool call, so it may land a moment later.
            await asyncio.sleep(0.02)


async def _on_tool_call(call: ToolCall, deps: Deps, *, wait_for_session: bool) -> None:
    async with deps.outbox.transaction(deps.engine) as conn:
        if not await claim(conn, t.inbox, "edits.tool-calls", call.id):
            return
        session = await repo.get_session(conn, call.session_id)
        if session is None and wait_for_session:
            raise _SessionNotOpenYet
        if session is None:
            answer: Refusal | ToolResult = Refusal(404, "unknown_session", f"session {call.session_id!r} is not open")
        elif session.closed:
            answer = Refusal(409, "session_closed", f"session {call.session_id!r} is closed")
        else:
            answer = await _answer(conn, call, session, deps)
        if isinstance(answer, Refusal):
            answer = ToolResult(
                session_id=call.session_id,
                seq=call.seq,
                tool_call_id=call.tool_call_id,
                tool=call.tool,
                ok=False,
                error=ToolError(status=answer.status, code=answer.code, message=answer.message),
                causation_id=call.id,
                correlation_id=call.id,
            )
        await deps.outbox.put(conn, TOOL_RESULTS, call.session_id, answer)


async def _answer(conn: AsyncConnection, call: ToolCall, session: Session, deps: Deps) -> Refusal | ToolResult:
    if call.tool == "studio_read_memory":
        return await _read_memory(conn, call, session)
    if call.tool == "studio_edit_memory":
        return await _propose_memory_edit(conn, call, session, deps)
    return Refusal(422, "unsupported_tool", f"{call.tool} is not handled by the edits service yet")


async def _read_memory(conn: AsyncConnection, call: ToolCall, session: Session) -> Refusal | ToolResult:
    try:
        args = memory.ReadMemory.model_validate(call.arguments)
    except ValidationError as exc:
        return memory.invalid_arguments(call.tool, exc)
    agent, live = await repo.get_agent_memory(conn, args.agent_id)
    refusal = memory.check_reach(session, agent, args.agent_id)
    if refusal is not None:
        return refusal
    assert live is not None
    return ToolResult(
        session_id=call.session_id,
        seq=call.seq,
        tool_call_id=call.tool_call_id,
        tool=call.tool,
        ok=True,
        output={
            "agent_id": live.agent_id,
            "content": live.content,
            "version": live.version,
            "hash": live.hash,
        },
        causation_id=call.id,
        correlation_id=call.id,
    )


async def _propose_memory_edit(
    conn: AsyncConnection, call: ToolCall, session: Session, deps: Deps
) -> Refusal | ToolResult:
    clash = await repo.request_clashing(conn, call.session_id, call.seq, call.tool_call_id)
    if clash is not None and clash.tool_call_id == call.tool_call_id:
        return Refusal(409, "duplicate_tool_call", f"tool call {call.tool_call_id!r} was already answered")
    if clash is not None:
        return Refusal(409, "seq_taken", f"session {call.session_id!r} already holds a request at seq {call.seq}")
    try:
        args = memory.EditMemory.model_validate(call.arguments)
    except ValidationError as exc:
        return memory.invalid_arguments(call.tool, exc)
    agent, live = await repo.get_agent_memory(conn, args.agent_id)
    reviewed = memory.review_edit(session, agent, live, args, deps.settings.memory_max_bytes)
    if isinstance(reviewed, Refusal):
        return reviewed

    proposal_id = "prop_" + uuid.uuid5(uuid.NAMESPACE_URL, f"{call.session_id}/{call.tool_call_id}").hex
    await conn.execute(
        t.requests.insert().values(
            proposal_id=proposal_id,
            session_id=call.session_id,
            seq=call.seq,
            turn_id=call.turn_id,
            tool_call_id=call.tool_call_id,
            tool=call.tool,
            arguments=call.arguments,
            kind="memory",
            agent_id=reviewed.agent_id,
            base_version=reviewed.base_version,
            base_hash=reviewed.base_hash,
            proposed_hash=reviewed.proposed_hash,
        )
    )
    target = EditTarget(kind="memory", agent_id=reviewed.agent_id, label=f"Memory of {reviewed.agent_name}")
    base = EditBase(version=reviewed.base_version, hash=reviewed.base_hash)
    lines = LineCounts(added=reviewed.added, removed=reviewed.removed)
    await deps.outbox.put(
        conn,
        PROPOSALS_PROPOSED,
        call.session_id,
        ProposalProposed(
            proposal_id=proposal_id,
            session_id=call.session_id,
            seq=call.seq,
            turn_id=call.turn_id,
            step=call.step,
            tool_call_id=call.tool_call_id,
            tool=call.tool,
            kind="memory",
            action="edit",
            section="Agents",
            agent_id=reviewed.agent_id,
            target=target,
            base=base,
            proposed_hash=reviewed.proposed_hash,
            lines=lines,
            reason=reviewed.reason,
            card=Card(title=target.label, apply_label="Apply edit", before=reviewed.before, after=reviewed.after),
            causation_id=call.id,
            correlation_id=call.id,
        ),
    )
    return ToolResult(
        session_id=call.session_id,
        seq=call.seq,
        tool_call_id=call.tool_call_id,
        tool=call.tool,
        ok=True,
        widget=StudioEditRequest(
            proposal_id=proposal_id,
            kind="memory",
            action="edit",
            target=target,
            base=base,
            proposed_hash=reviewed.proposed_hash,
            lines=lines,
        ),
        causation_id=call.id,
        correlation_id=call.id,
    )


# --- decisions --------------------------------------------------------------------------------------


async def on_decision(decision: DecisionMade, deps: Deps) -> None:
    """Resolve a request once: apply (re-checking the live Memory) or decline; one outcome per decision."""
    if decision.kind not in KINDS:
        return
    async with deps.outbox.transaction(deps.engine) as conn:
        if not await claim(conn, t.inbox, "edits.decisions", decision.id):
            return
        await session_lock(conn, "edits", decision.session_id)
        outcome = await _decide(conn, decision)
        await deps.outbox.put(conn, PROPOSALS_APPLIED, decision.session_id, outcome)
        crash_point("edits.decision.before_commit")
    crash_point("edits.decision.after_commit")


async def _decide(conn: AsyncConnection, decision: DecisionMade) -> ProposalOutcome:
    def outcome(outcome: str, status: int, detail: str, **fields: object) -> ProposalOutcome:
        return ProposalOutcome(
            decision_id=decision.decision_id,
            proposal_id=decision.proposal_id,
            session_id=decision.session_id,
            seq=decision.seq,
            kind=decision.kind,
            outcome=outcome,  # type: ignore[arg-type]
            status=status,
            detail=detail,
            causation_id=decision.id,
            correlation_id=decision.correlation_id or decision.id,
            **fields,  # type: ignore[arg-type]
        )

    request, live = await repo.get_request_for_decision(conn, decision.proposal_id)
    if request is None or request.session_id != decision.session_id:
        return outcome("refused", 404, f"no request {decision.proposal_id!r} in session {decision.session_id!r}")
    assert request.agent_id is not None
    verdict = memory.decide(request, decision.decision, live)
    if verdict == "already_resolved":
        return outcome(
            "refused",
            422,
            f"this request was already {request.edit_status} by {request.resolved_by_user_id} "
            f"at {request.edit_resolved_at:%Y-%m-%d %H:%M:%S} UTC",
        )
    if verdict == "wrong_decision":
        return outcome("refused", 422, f"a memory edit is applied or declined, not {decision.decision!r}")
    now = datetime.now(UTC)
    where = t.requests.c.proposal_id == request.proposal_id
    if verdict == "decline":
        await conn.execute(
            t.requests.update()
            .where(where)
            .values(edit_status="declined", edit_resolved_at=now, resolved_by_user_id=decision.actor)
        )
        return outcome("declined", 200, "declined; Memory is unchanged", resolved_by=decision.actor, resolved_at=now)
    assert live is not None
    if verdict == "stale":
        await conn.execute(t.requests.update().where(where).values(stale=True))
        return outcome(
            "stale",
            409,
            f"the Memory changed since the coach read it (base version {request.base_version}, live version "
            f"{live.version}); the request stays pending",
            effects={"live_version": live.version, "live_hash": live.hash},
        )
    version = await repo.write_memory(
        conn,
        request.agent_id,
        request.content,
        expected_version=live.version,
        actor=decision.actor,
        tool_call_id=request.tool_call_id,
        tool_name=request.tool,
        studio_session_id=request.session_id,
        studio_seq=request.seq,
    )
    assert version is not None  # the row is locked FOR UPDATE at live.version
    await conn.execute(
        t.requests.update()
        .where(where)
        .values(
            edit_status="applied",
            edit_resolved_at=now,
            resolved_by_user_id=decision.actor,
            edit_version=version,
            stale=False,
        )
    )
    return outcome(
        "applied",
        200,
        f"applied; Memory is now version {version}",
        resolved_by=decision.actor,
        resolved_at=now,
        effects={"version": version, "hash": content_hash(request.content)},
    )
