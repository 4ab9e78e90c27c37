"""The gateway's use cases: keep the projection of requests, turns and decisions from the topics, settle
paused turns, and carry an operator's decision to the owning service and its outcome back.

Projection handlers get a unit of work from the runtime (which claimed the envelope id in the inbox, so a
redelivery changes nothing, and took the session's lock) and settle the session's turns in the same
transaction; what they announce live follows once it has committed. The continuation of a turn is written
to the outbox in the transaction that marks the turn continued: exactly one per pause. The gateway knows no
kind: which decisions a request takes comes from the kind registry.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from opentelemetry import trace
from sqlalchemy import func, select

from assent.contracts import (
    DecisionMade,
    ProposalOutcome,
    ProposalProposed,
    SessionClosed,
    SessionOpened,
    StepEnded,
    ToolResult,
    TurnContinuation,
)
from assent.db import column_arrays, driver_connection, json_param, update_rows
from assent.domain import Agent
from assent.kinds import KINDS, RESOLVED_OUTCOMES
from assent.runtime import Received, ServiceRuntime, UnitOfWork, batch_span
from assent.runtime.uow import SqlUnitOfWork
from assent.telemetry import attach_carrier, current_carrier, detach
from assent.topics import PROPOSALS_DECIDED, STUDIO_CONTINUATIONS

from .adapters import tables as t
from .adapters.notify import EventFeed
from .domain.turns import RefusedCall, RequestState, continuation_text, settle
from .settings import GatewaySettings

tracer = trace.get_tracer("assent.gateway")


@dataclass(frozen=True)
class Deps:
    runtime: ServiceRuntime
    settings: GatewaySettings
    events: EventFeed

    @property
    def engine(self) -> Any:
        return self.runtime.engine


class NotFound(LookupError):
    pass


class Refused(Exception):
    """A client mistake the gateway can tell without asking the owner (HTTP 422 or 409)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class OutcomePending(Exception):
    """The decision was sent but its outcome did not arrive in time; it still stands."""

    def __init__(self, decision_id: str) -> None:
        super().__init__(decision_id)
        self.decision_id = decision_id


# --- projection ---------------------------------------------------------------------------------------


class Projection:
    """The projection handlers (one per topic) and what each announces once its batch has committed.

    The runtime hands each handler a batch of new messages of its topic and a unit of work that already holds the
    lock of every session they name. Each statement serves the whole batch (one round trip to the database for
    many messages under load). The requests of a batch of proposals are one statement that the runtime runs with
    the batch's claim, without a transaction around it (:meth:`proposed_requests`). A handler that can complete
    what a paused turn waits on (an outcome, a refusal, the step's end) settles those sessions' turns in the same
    transaction: the continuation is written to the outbox in the transaction that marks its turn continued,
    exactly one per pause, and nothing is lost between two commits. The live events (``request.proposed``,
    ``turn.step_ended``, ``request.decided``) are announced after commit for every delivery, a redelivery too:
    they are hints (a client re-reads) and a deciding request waits for ``request.decided``.
    """

    def __init__(self, events: EventFeed) -> None:
        self.events = events

    async def on_session_event(self, message: SessionOpened | SessionClosed, uow: UnitOfWork) -> None:
        await uow.sessions.record(message)

    def proposed_requests(self, batch: Sequence[Received], n: int) -> tuple[str, list[Any]]:
        """The requests of a batch of ``ProposalProposed``, as one statement (parameters from ``$n``) that the runtime
        runs with the batch's claim (:meth:`ServiceRuntime.consume_in_one_statement`): it reads nothing, and a new
        request cannot complete the turn that waits on it, so there is nothing to settle."""
        columns: list[list[Any]] = [[] for _ in _REQUEST_COLUMNS]
        for item in batch:
            message: ProposalProposed = item.message  # type: ignore[assignment]
            with item.span():  # the request keeps the trace its decision will continue
                carrier = current_carrier()
            row = (
                message.id,
                message.session_id,
                message.seq,
                message.proposal_id,
                message.tool_call_id,
                message.turn_id,
                message.step,
                message.tool,
                message.kind,
                message.action,
                message.section,
                message.agent_id,
                json_param(message.target.model_dump(mode="json")),
                json_param(message.base.model_dump(mode="json")),
                message.proposed_hash,
                json_param(message.lines.model_dump(mode="json")),
                message.widens,
                message.reason,
                json_param(message.card.model_dump(mode="json")),
                json_param(carrier),
            )
            for column, value in zip(columns, row, strict=True):
                column.append(value)
        return _insert_claimed_requests(n), columns

    async def on_tool_result(self, message: ToolResult, uow: UnitOfWork) -> None:
        if message.ok:
            return  # requests arrive as ProposalProposed; plain outputs are the coach's business
        assert message.error is not None
        await (await _driver(uow)).execute(
            _INSERT_REFUSED_CALL,
            message.tool_call_id,
            message.session_id,
            message.seq,
            message.tool,
            json_param(message.error.model_dump(mode="json")),
        )
        await self.settle(uow, message.session_id)

    async def on_step_ended(self, batch: Sequence[Received], uow: UnitOfWork) -> None:
        now = datetime.now(UTC)
        rows = []
        for item in batch:
            message: StepEnded = item.message  # type: ignore[assignment]
            rows.append(
                (
                    message.session_id,
                    message.turn_id,
                    message.step,
                    json_param(list(message.tool_call_ids)),
                    # A step that made no request does not pause the turn: nothing to continue.
                    None if message.tool_call_ids else now,
                )
            )
        with batch_span(batch):
            conn = await _driver(uow)
            await conn.executemany(_INSERT_TURN, rows)
            sessions = _sessions_of(batch)
            await self._settle(uow, batch, await conn.fetch(_PAUSED, sessions))

    async def on_outcome(self, batch: Sequence[Received], uow: UnitOfWork) -> None:
        conn = await _driver(uow)
        now = datetime.now(UTC)
        resolving = []
        for item in batch:
            message: ProposalOutcome = item.message  # type: ignore[assignment]
            if message.outcome in RESOLVED_OUTCOMES:
                resolving.append(item)
                continue
            # The decision's outcome and its request's new state go in one statement. (Whether these run before
            # or after the batch's resolutions changes nothing: each changes only a request still pending, and a
            # resolution clears the stale flag.)
            outcome = json_param(message.model_dump(mode="json"))
            with item.span():
                if message.outcome == "stale":
                    await conn.execute(_MARK_REQUEST_STALE, message.proposal_id, outcome, now, message.decision_id)
                else:
                    await conn.execute(_RECORD_OUTCOME, message.decision_id, outcome, now)
        if not resolving:
            return
        # Resolve the requests and read their sessions' paused turns in one statement. The read sees the tables
        # as they were before the update, so each request is taken as resolved here when it was still pending (no
        # other transaction resolves it meanwhile: they all hold the sessions' locks). Of two outcomes that
        # resolve one request, the first counts, as if they had come one after the other.
        resolved: dict[str, tuple[str, str | None]] = {}
        for item in resolving:
            message = item.message  # type: ignore[assignment]
            resolved.setdefault(message.proposal_id, (message.outcome, message.resolved_by))
        messages: list[ProposalOutcome] = [item.message for item in resolving]  # type: ignore[misc]
        with batch_span(resolving):
            paused = await conn.fetch(
                _RESOLVE_REQUESTS_THEN_PAUSED,
                [m.proposal_id for m in messages],
                [m.outcome for m in messages],
                [m.resolved_by for m in messages],
                [m.resolved_at for m in messages],
                [json_param(m.model_dump(mode="json")) for m in messages],
                [m.decision_id for m in messages],
                now,
                _sessions_of(resolving),
            )
            await self._settle(uow, resolving, paused, resolved)

    async def settle(self, uow: UnitOfWork, session_id: str) -> None:
        """Continue every paused turn of the session whose requests are all decided (under the session lock,
        which the runtime took for this message), and announce it once the transaction commits."""
        await uow.lock_session(session_id)
        conn = await _driver(uow)
        events, continued = await _settle_turns(_sql(uow), session_id, await conn.fetch(_PAUSED, [session_id]))
        if continued:
            await conn.executemany(_CONTINUE_TURN, continued)
        self._announce(uow, events)

    async def _settle(
        self,
        uow: UnitOfWork,
        batch: Sequence[Received],
        paused: Sequence[asyncpg.Record],
        resolved: dict[str, tuple[str, str | None]] | None = None,
    ) -> None:
        """Settle the paused turns of the sessions of ``batch`` from ``paused`` (rows of :data:`_PAUSED`), each
        session's continuation in the trace of its last message of the batch, and announce them after commit."""
        rows_of: dict[str, list[asyncpg.Record]] = {}
        for row in paused:
            rows_of.setdefault(row["session_id"], []).append(row)
        last = {item.message.session_id: item for item in batch}  # type: ignore[attr-defined]
        events: list[dict[str, Any]] = []
        continued: list[tuple[Any, ...]] = []
        for session_id, rows in rows_of.items():
            with last[session_id].span():
                settled, turns = await _settle_turns(_sql(uow), session_id, rows, resolved)
            events += settled
            continued += turns
        if continued:
            # The batch's last write (nothing reads the turns after it): it goes with the continuations' outbox rows.
            rows = column_arrays([(*turn, 1) for turn in continued])
            await _sql(uow).outbox.write_last(_sql(uow).conn, _CONTINUE_TURNS, rows)
        self._announce(uow, events)

    def _announce(self, uow: UnitOfWork, events: list[dict[str, Any]]) -> None:
        """Announce ``events`` once the transaction commits."""
        if events:

            async def announce() -> None:
                await self.events.publish(events)

            uow.on_commit(announce)

    # What each handler announces after commit.

    async def proposed(self, message: ProposalProposed) -> None:
        await self.events.publish([_event("request.proposed", message.session_id, seq=message.seq, kind=message.kind)])

    async def step_ended(self, message: StepEnded) -> None:
        ended = _event("turn.step_ended", message.session_id, turn_id=message.turn_id, step=message.step)
        await self.events.publish([ended])

    async def outcome(self, message: ProposalOutcome) -> None:
        # The deciding HTTP request is answered once the projection holds the outcome.
        decided = _event(
            "request.decided", message.session_id, seq=message.seq, outcome=message.model_dump(mode="json")
        )
        await self.events.publish([decided])


def _sql(uow: UnitOfWork) -> SqlUnitOfWork:
    assert isinstance(uow, SqlUnitOfWork)
    return uow


async def _driver(uow: UnitOfWork) -> asyncpg.Connection:
    return await driver_connection(_sql(uow).conn)


def _event(name: str, session_id: str, **fields: Any) -> dict[str, Any]:
    return {"event": name, "session_id": session_id, **fields}


# The projection's statements run on every round: on the asyncpg connection inside the unit of work's transaction
# (assent.db.driver_connection), as fixed texts prepared once per connection. JSONB values go as JSON text.

_REQUEST_COLUMNS = (
    ("message_id", "uuid"),
    ("session_id", "text"),
    ("seq", "integer"),
    ("proposal_id", "text"),
    ("tool_call_id", "text"),
    ("turn_id", "text"),
    ("step", "integer"),
    ("tool", "text"),
    ("kind", "text"),
    ("action", "text"),
    ("section", "text"),
    ("agent_id", "text"),
    ("target", "jsonb"),
    ("base", "jsonb"),
    ("proposed_hash", "text"),
    ("lines", "jsonb"),
    ("widens", "boolean"),
    ("reason", "text"),
    ("card", "jsonb"),
    ("trace", "jsonb"),
)
"""A request's columns as :meth:`Projection.proposed_requests` passes them (one array each), the message's first."""


@functools.cache
def _insert_claimed_requests(n: int) -> str:
    """The requests of the messages that the batch's claim (``claimed``) took, from the arrays ``$n``… (one per column
    of :data:`_REQUEST_COLUMNS`)."""
    names = [name for name, _ in _REQUEST_COLUMNS]
    arrays = ", ".join(
        f"${n + i}::{'text' if kind == 'jsonb' else kind}[]" for i, (_, kind) in enumerate(_REQUEST_COLUMNS)
    )
    values = ", ".join(f"r.{name}::jsonb" if kind == "jsonb" else f"r.{name}" for name, kind in _REQUEST_COLUMNS[1:])
    return (
        f"INSERT INTO {t.requests.fullname} ({', '.join(names[1:])}) SELECT {values}"
        f" FROM unnest({arrays}) AS r({', '.join(names)})"
        " WHERE r.message_id IN (SELECT message_id FROM claimed) ON CONFLICT DO NOTHING"
    )


_INSERT_REFUSED_CALL = (
    f"INSERT INTO {t.refused_calls.fullname} (tool_call_id, session_id, seq, tool, error) VALUES ($1, $2, $3, $4, $5)"
    " ON CONFLICT DO NOTHING"
)

_INSERT_TURN = (
    f"INSERT INTO {t.turns.fullname} (session_id, turn_id, step, tool_call_ids, continued_at)"
    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"
)

_RECORD_OUTCOME = f"UPDATE {t.decisions.fullname} SET outcome = $2, outcome_at = $3 WHERE decision_id = $1"

_MARK_REQUEST_STALE = (
    f"WITH recorded AS (UPDATE {t.decisions.fullname} SET outcome = $2, outcome_at = $3 WHERE decision_id = $4)"
    f" UPDATE {t.requests.fullname} SET stale = true WHERE proposal_id = $1 AND status = 'pending'"
)
"""The decision's outcome recorded, and its request marked stale while it stays pending."""

_PAUSED = (
    "SELECT tu.session_id, tu.turn_id, tu.step, tu.tool_call_ids, awaited.value AS awaited, r.seq AS request_seq,"
    " r.proposal_id, r.kind, r.label, r.status, r.resolved_by, rc.seq AS refused_seq, rc.error_code"
    f" FROM {t.turns.fullname} AS tu"
    " JOIN LATERAL jsonb_array_elements_text(tu.tool_call_ids) AS awaited(value) ON true"
    " LEFT OUTER JOIN LATERAL (SELECT seq, proposal_id, kind, target ->> 'label' AS label, status, resolved_by"
    f" FROM {t.requests.fullname} WHERE tool_call_id = awaited.value LIMIT 1) AS r ON true"
    " LEFT OUTER JOIN LATERAL (SELECT seq, error ->> 'code' AS error_code"
    f" FROM {t.refused_calls.fullname} WHERE tool_call_id = awaited.value LIMIT 1) AS rc ON true"
    " WHERE tu.session_id = ANY($1::text[]) AND tu.continued_at IS NULL"
    " ORDER BY tu.session_id, tu.ended_at, tu.turn_id, tu.step"
)
"""The paused turns of the sessions ``$1``, one row per awaited call, with that call's request or refusal (if any).

Each awaited call is looked up on its own (a lateral subquery, so by index): the planner guesses a hundred calls
per turn, and with statistics from when the tables were small (a plan lasts as long as its connection, until the
next ANALYZE) a join would read every request of the table to find one or two.
"""

_RESOLVE_REQUESTS_THEN_PAUSED = (
    "WITH o AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::text[])"
    " WITH ORDINALITY AS o(proposal_id, outcome, resolved_by, resolved_at, result, decision_id, n)),"
    f" recorded AS (UPDATE {t.decisions.fullname} AS d SET outcome = o.result::jsonb, outcome_at = $7 FROM o"
    " WHERE d.decision_id = o.decision_id),"
    f" resolved AS (UPDATE {t.requests.fullname} AS r SET status = o.outcome, stale = false,"
    " resolved_by = o.resolved_by, resolved_at = o.resolved_at, result = o.result::jsonb"
    " FROM (SELECT DISTINCT ON (proposal_id) * FROM o ORDER BY proposal_id, n) AS o"
    " WHERE r.proposal_id = o.proposal_id AND r.status = 'pending') " + _PAUSED.replace("$1", "$8")
)
"""Each outcome (the arrays ``$1``..``$6``, one element each: proposal, outcome, by whom, when, the outcome as JSON,
decision) recorded on its decision and resolving its request (unless another decision resolved it first; of two
here, the first), then :data:`_PAUSED` of the sessions ``$8``, in one statement (the read sees the tables as they
were before the updates)."""

_CONTINUE_TURN = (
    f"UPDATE {t.turns.fullname} SET continued_at = $4, continuation = $5, sends = 1"
    " WHERE session_id = $1 AND turn_id = $2 AND step = $3"
)

_CONTINUE_TURNS = update_rows(t.turns, ("session_id", "turn_id", "step"), ("continued_at", "continuation", "sends"))
""":data:`_CONTINUE_TURN` of many turns at once: arrays of its arguments, and of ``sends`` (1)."""

_SESSION_ORG = f"SELECT org_id FROM {t.sessions.fullname} WHERE session_id = $1"

_PENDING = (
    "SELECT seq, proposal_id, turn_id, kind, action, section, agent_id, target, base, lines, widens, stale,"
    " card ->> 'apply_label' AS apply_label, reason, proposed_at"
    f" FROM {t.requests.fullname} WHERE session_id = $1 AND status = 'pending' ORDER BY seq"
)
"""A session's open requests, as ``GET …/pending`` lists them."""

_REQUEST_AT = (
    "SELECT "
    + ", ".join(f"r.{column.name}" for column in t.requests.c)
    + ", s.org_id AS session_org, a.owners, a.editors"
    f" FROM {t.requests.fullname} AS r"
    f" JOIN {t.sessions.fullname} AS s ON s.session_id = r.session_id"
    f" LEFT OUTER JOIN {t.agents.fullname} AS a ON a.agent_id = r.agent_id"
    " WHERE r.session_id = $1 AND r.seq = $2"
)
"""The request at a session's seq, with its session's organisation and its agent's owners and editors."""

_INSERT_DECISION = (
    f"INSERT INTO {t.decisions.fullname} (decision_id, session_id, seq, proposal_id, decision, actor, via, message_id)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
)


async def _settle_turns(
    uow: SqlUnitOfWork,
    session_id: str,
    paused: Sequence[asyncpg.Record],
    resolved: dict[str, tuple[str, str | None]] | None = None,
) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    """Settle the session's paused turns in ``uow`` (which holds the session lock): emits each continuation, and
    returns the live events to announce once its transaction commits and the arguments of :data:`_CONTINUE_TURN`
    for each turn continued (the caller runs them, for all its sessions at once).

    ``paused`` are the session's rows of :data:`_PAUSED` (each paused turn with what it waits on, each awaited
    call's request or refusal beside it). ``resolved`` (by proposal id: status, by whom) are requests this
    transaction resolved after those rows were read: a row that still shows one pending is taken as resolved so.
    """
    events: list[dict[str, Any]] = []
    continued: list[tuple[Any, ...]] = []
    turns: dict[tuple[str, int], tuple[list[str], dict[str, RequestState], dict[str, RefusedCall]]] = {}
    for row in paused:
        awaited = row["awaited"]
        waited, requests, refused = turns.setdefault(
            (row["turn_id"], row["step"]), (list(row["tool_call_ids"]), {}, {})
        )
        if row["request_seq"] is not None:
            status, resolved_by = row["status"], row["resolved_by"]
            if resolved is not None and status == "pending" and row["proposal_id"] in resolved:
                status, resolved_by = resolved[row["proposal_id"]]
            requests[awaited] = RequestState(
                awaited,
                row["request_seq"],
                row["proposal_id"],
                row["kind"],
                row["label"],
                status,
                resolved_by,
            )
        if row["refused_seq"] is not None:
            refused[awaited] = RefusedCall(awaited, row["refused_seq"], row["error_code"])
    for (turn_id, step), (waited, requests, refused) in turns.items():
        decisions = settle(waited, requests, refused)
        if decisions is None:
            continue
        continuation = TurnContinuation(
            session_id=session_id,
            turn_id=turn_id,
            step=step,
            decisions=tuple(decisions),
            text=continuation_text(decisions),
        )
        await uow.emit(STUDIO_CONTINUATIONS, session_id, continuation)
        continued.append(
            (session_id, turn_id, step, datetime.now(UTC), json_param(continuation.model_dump(mode="json")))
        )
        events.append(_event("turn.continued", session_id, turn_id=turn_id, step=step))
    return events, continued


def _sessions_of(batch: Sequence[Received]) -> list[str]:
    """The sessions ``batch``'s messages name, each once, in order."""
    return list(dict.fromkeys(item.message.session_id for item in batch))  # type: ignore[attr-defined]


# --- operator actions ---------------------------------------------------------------------------------


async def agent_copy(deps: Deps, agent_id: str) -> Agent | None:
    """The agent as the gateway's copy of the workspace holds it (from ``workspace.events``)."""
    async with deps.runtime.unit_of_work() as uow:
        return await uow.workspace.agent(agent_id)


async def check_session(deps: Deps, session_id: str, org_id: str) -> None:
    """The session must exist under ``org_id``; another organisation's session is :class:`NotFound` too.

    A session is projected under the organisation its ``SessionOpened`` names, and only there.
    """
    async with deps.engine.connect() as conn:
        owner = await (await driver_connection(conn)).fetchval(_SESSION_ORG, session_id)
    if owner != org_id:
        raise NotFound(f"session {session_id!r} does not exist")


async def request_at(deps: Deps, session_id: str, seq: int, org_id: str | None = None) -> dict[str, Any]:
    """The request at ``seq`` of a session, with its agent's ``owners`` and ``editors`` (from the workspace copy),
    in one read. With ``org_id``, another organisation's session is :class:`NotFound`, as a missing one is."""
    async with deps.engine.connect() as conn:
        row = await (await driver_connection(conn)).fetchrow(_REQUEST_AT, session_id, seq)
    if row is None or (org_id is not None and row["session_org"] != org_id):
        if org_id is not None:
            await check_session(deps, session_id, org_id)  # tell "no session" from "no request"
        raise NotFound(f"session {session_id!r} has no edit request at seq {seq}")
    request = dict(row)
    request["owners"], request["editors"] = tuple(row["owners"] or ()), tuple(row["editors"] or ())
    return request


async def decide(
    deps: Deps,
    request: dict[str, Any],
    decision: str,
    actor: str,
    via: str,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Send one decision on ``request`` (from :func:`request_at`) to its owner and return its outcome (a
    ``ProposalOutcome`` as JSON). ``options`` are the decision's choices (a source approval's branch and message).

    Raises :class:`Refused` (already resolved, or a decision that does not fit), or :class:`OutcomePending`
    when the owner has not answered within the configured time.
    """
    session_id, seq = request["session_id"], request["seq"]
    if request["status"] != "pending":
        raise Refused(
            422,
            f"this request was already {request['status']} by {request['resolved_by']} at "
            f"{request['resolved_at']:%Y-%m-%d %H:%M:%S} UTC",
        )
    spec = KINDS[request["kind"]]
    if decision not in spec.decisions:
        accepted = " or ".join(spec.decisions)
        raise Refused(422, f"a {spec.name} request is decided with {accepted}, not {decision!r}")
    decision_id = f"dec_{uuid.uuid4().hex}"
    answered = deps.events.expect(decision_id)
    try:
        # The decision continues the proposal's trace, so one trace spans tool call to outcome; the HTTP
        # request's own span is linked.
        http_span = trace.get_current_span().get_span_context()
        token = attach_carrier(request["trace"])
        try:
            with tracer.start_as_current_span(
                f"decide {request['kind']} {decision}", links=[trace.Link(http_span)] if http_span.is_valid else []
            ):
                message = DecisionMade(
                    decision_id=decision_id,
                    proposal_id=request["proposal_id"],
                    session_id=session_id,
                    seq=seq,
                    kind=request["kind"],
                    decision=decision,  # type: ignore[arg-type]
                    actor=actor,
                    via=via,
                    options=options or {},
                )
                # The decision and its message in one statement: no BEGIN or COMMIT round trip on the way.
                async with deps.engine.connect() as conn:
                    await deps.runtime.outbox.write_with(
                        conn,
                        _INSERT_DECISION,
                        (decision_id, session_id, seq, request["proposal_id"], decision, actor, via, message.id),
                        [(PROPOSALS_DECIDED, session_id, message)],
                    )
        finally:
            detach(token)
        return await _await_outcome(deps, decision_id, answered)
    finally:
        deps.events.forget(decision_id)


async def _await_outcome(
    deps: Deps, decision_id: str, answered: asyncio.Future[dict[str, Any] | None]
) -> dict[str, Any]:
    """The outcome of ``decision_id``: handed over by the event feed (``answered``), or read from the projection
    while the feed cannot be counted on. Raises :class:`OutcomePending` after the configured time."""
    within = asyncio.timeout(deps.settings.decision_timeout_seconds)
    try:
        async with within:
            # Awaited directly, so the hand-over resumes this request at once, ahead of what the same outcome
            # wakes besides (live streams, the publish to the other replicas).
            outcome = await answered if deps.events.reliable else None
            while outcome is None:  # the feed lost Redis (now or before): read the projection
                async with deps.engine.connect() as conn:
                    outcome = (
                        await conn.execute(
                            select(t.decisions.c.outcome).where(t.decisions.c.decision_id == decision_id)
                        )
                    ).scalar_one_or_none()
                if outcome is None:
                    await asyncio.sleep(PROJECTION_POLL_SECONDS)
            return outcome
    except TimeoutError:
        if within.expired():
            raise OutcomePending(decision_id) from None
        raise


PROJECTION_POLL_SECONDS = 0.25
"""How often a waiting decision reads the projection while the event feed cannot be counted on."""


async def pending_items(deps: Deps, session_id: str) -> list[dict[str, Any]]:
    """The session's open requests, in seq order (the caller has checked the session with :func:`check_session`)."""
    async with deps.engine.connect() as conn:
        rows = await (await driver_connection(conn)).fetch(_PENDING, session_id)
    return [dict(row) for row in rows]


async def resend_continuation(deps: Deps, session_id: str) -> dict[str, Any]:
    """Continue: publish the latest paused turn's continuation again (same envelope id)."""
    async with deps.runtime.unit_of_work() as uow:
        conn = uow.conn
        await uow.lock_session(session_id)
        turn = (
            await conn.execute(
                select(t.turns)
                .where(t.turns.c.session_id == session_id, func.jsonb_array_length(t.turns.c.tool_call_ids) > 0)
                .order_by(t.turns.c.ended_at.desc())
                .limit(1)
            )
        ).first()
        if turn is None:
            raise NotFound(f"session {session_id!r} has no paused turn")
        if turn.continuation is None:
            waiting = (
                await conn.execute(
                    select(t.requests.c.seq).where(
                        t.requests.c.tool_call_id.in_(list(turn.tool_call_ids)), t.requests.c.status != "pending"
                    )
                )
            ).all()
            left = len(turn.tool_call_ids) - len(waiting)
            raise Refused(409, f"the turn is still waiting on {left} decision{'s' if left != 1 else ''}")
        continuation = TurnContinuation.model_validate(turn.continuation)
        await uow.emit(STUDIO_CONTINUATIONS, session_id, continuation)
        await conn.execute(
            t.turns.update()
            .where(t.turns.c.session_id == session_id, t.turns.c.turn_id == turn.turn_id, t.turns.c.step == turn.step)
            .values(sends=t.turns.c.sends + 1)
        )
    return {**turn.continuation, "sends": turn.sends + 1}
