"""The gateway's use cases: keep the projection of proposals, turns and decisions from the topics, settle
paused turns, and carry an operator's decision to the owning service and its outcome back.

Projection handlers get a unit of work from the runtime (which claimed the envelope id in the inbox, so a
redelivery changes nothing, and took the session's lock) and settle the session's turns in the same
transaction; what they announce live follows once it has committed. The continuation of a turn is written
to the outbox in the transaction that marks the turn continued: exactly one per pause. The gateway knows no
kind: which decisions a proposal takes comes from the kind registry.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import asyncpg
from opentelemetry import trace
from sqlalchemy.ext.asyncio import AsyncEngine

from assent.contracts import (
    DecisionMade,
    DecisionSummary,
    ProposalOutcome,
    ProposalProposed,
    SessionClosed,
    SessionOpened,
    StepEnded,
    ToolResult,
    TurnContinuation,
    WorkspaceWritten,
)
from assent.db import column_arrays, json_param
from assent.domain import Agent
from assent.kinds import KINDS, PAGE_KINDS, RESOLVED_OUTCOMES
from assent.outbox import writes_stalled
from assent.policy import Policy, Require, approval_refusal, evaluate
from assent.runtime import Received, ServiceRuntime, UnitOfWork, batch_span
from assent.runtime.uow import SqlUnitOfWork
from assent.telemetry import attach_carrier, current_carrier, detach
from assent.topics import STUDIO_CONTINUATIONS

from .adapters.approvals import SqlApprovals, Tally
from .adapters.history import WrittenEntries
from .adapters.notify import EventFeed
from .adapters.policies import PolicyBook, PolicyStore
from .adapters.projection import (
    CONTINUE_TURNS,
    PROPOSAL_COLUMNS,
    ProjectionStore,
    SqlDecisions,
    insert_claimed_proposals,
)
from .adapters.rules import verdict_row
from .domain.checkpoints import HistoryKeys
from .domain.events import (
    LiveEvent,
    PageEvent,
    ProposalDecidedEvent,
    ProposalProposedEvent,
    StepEndedEvent,
    TurnContinuedEvent,
)
from .domain.history import History
from .domain.proposals import Proposal, proposed
from .domain.turns import ProposalState, RefusedCall, continuation_text, decided_so_far, settle
from .settings import GatewaySettings

tracer = trace.get_tracer("assent.gateway")


class Decisions(Protocol):
    """Where decisions are recorded and their outcomes read back (:class:`gateway.adapters.projection.SqlDecisions`)."""

    async def record(self, message: DecisionMade) -> None:
        """Record the decision and send ``message`` to its owner (through the outbox), together or not at all."""
        ...

    async def outcome(self, decision_id: str) -> ProposalOutcome | None:
        """The decision's outcome once the projection holds it, else None."""
        ...


class Approvals(Protocol):
    """Where approvals a ``require`` rule asks for are counted (:class:`gateway.adapters.approvals.SqlApprovals`)."""

    async def approve(self, message: DecisionMade, verdict: tuple[Any, ...], require: Require) -> Tally:
        """Count ``message``'s actor's approval; record and send ``message`` when it completes the count, in the same
        transaction."""
        ...


class Policies(Protocol):
    """The organisations' policies by version (:class:`gateway.adapters.policies.PolicyBook`)."""

    async def at(self, org_id: str, version: int) -> Policy: ...


class Relay(Protocol):
    """How long the gateway's oldest outbox row has waited for Kafka (:class:`assent.outbox.OutboxRelay`)."""

    def waited(self, now: float | None = None) -> float | None: ...


class OutcomeFeed(Protocol):
    """Where a deciding HTTP request hears its outcome (:class:`~gateway.adapters.notify.EventFeed`)."""

    @property
    def reliable(self) -> bool: ...
    def expect(self, decision_id: str) -> asyncio.Future[ProposalOutcome | None]: ...
    def forget(self, decision_id: str) -> None: ...


@dataclass(frozen=True)
class Deps:
    runtime: ServiceRuntime
    settings: GatewaySettings
    events: EventFeed
    decisions: Decisions | None = None
    """Where decisions go; by default the projection's (:class:`SqlDecisions`). Unit tests pass a fake."""
    approvals: Approvals | None = None
    """Where approvals are counted (:class:`SqlApprovals`); unit tests pass a fake."""
    policies: Policies | None = None
    """The policies (:class:`PolicyBook`); unit tests pass a fake."""
    relay: Relay | None = None
    """Whose backlog says whether Kafka takes the gateway's messages; by default the runtime's outbox relay (none
    without a runtime: unit tests on fakes never refuse)."""

    @property
    def engine(self) -> Any:
        return self.runtime.engine

    @functools.cached_property
    def decided(self) -> Decisions:
        if self.decisions is not None:
            return self.decisions
        return SqlDecisions(self.runtime.engine, self.runtime.outbox)

    @functools.cached_property
    def approved(self) -> Approvals:
        return self.approvals or SqlApprovals(self.runtime.engine, self.runtime.outbox)

    @functools.cached_property
    def policy_book(self) -> Policies:
        return self.policies or PolicyBook(PolicyStore(self.runtime.engine))

    @property
    def outbox_relay(self) -> Relay | None:
        if self.relay is not None:
            return self.relay
        return None if self.runtime is None else self.runtime.relay

    @functools.cached_property
    def history_keys(self) -> HistoryKeys:
        """The key that signs the history's checkpoints and those that verify them (refuses a key it cannot
        read, naming the variable)."""
        return HistoryKeys(self.settings.history_signing_key, self.settings.history_retired_keys)


class NotFound(LookupError):
    pass


class Refused(Exception):
    """A client mistake the gateway can tell without asking the owner (HTTP 422 or 409)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class NotCounted(Refused):
    """An approval that does not count (403: the session's own operator, or none of the people the rule names; 409:
    the same person again, or after the count was complete); nothing was recorded."""


class AwaitingApprovals(Exception):
    """An approval was counted, and the request waits for more (HTTP 202): ``detail`` says how many of how many, and
    whose are still needed."""

    def __init__(self, proposal: Proposal, decision: str, approvals: int, required: int, detail: str) -> None:
        super().__init__(detail)
        self.proposal = proposal
        self.decision = decision
        self.approvals = approvals
        self.required = required
        self.detail = detail


class KafkaStalled(Exception):
    """Kafka has taken none of the gateway's messages for longer than ``ASSENT_KAFKA_STALL_SECONDS``: a write that
    would send one is refused (HTTP 503 with ``retry`` and ``Retry-After``) before anything is recorded."""

    def __init__(self, waited: float) -> None:
        super().__init__(
            f"Kafka has not taken the gateway's messages for {waited:.0f} s (too few in-sync replicas, or no leader); "
            "nothing was recorded: try again shortly"
        )
        self.waited = waited


def check_kafka(deps: Deps) -> None:
    """Refuse a write that would send a message (:class:`KafkaStalled`) while Kafka takes none of the gateway's
    (:func:`assent.outbox.writes_stalled`); call it before anything of the write is recorded."""
    relay = deps.outbox_relay
    if relay is None:
        return
    waited = relay.waited()
    if writes_stalled(waited, deps.settings.kafka_stall_seconds):
        assert waited is not None
        raise KafkaStalled(waited)


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
    many messages under load). A batch of proposals is one statement that the runtime runs with the batch's claim,
    without a transaction around it (:meth:`on_proposed`). A handler that can complete what a paused turn waits on
    (an outcome, a refusal, the step's end) settles those sessions' turns in the same transaction: the continuation
    is written to the outbox in the transaction that marks its turn continued, exactly one per pause, and nothing is
    lost between two commits. The live events (``proposal.proposed``, ``turn.step_ended``, ``proposal.decided``;
    :mod:`gateway.domain.events`) are announced after commit for every delivery, a redelivery too: they are hints (a
    client re-reads) and a deciding HTTP request waits for ``proposal.decided``.
    """

    def __init__(self, events: EventFeed) -> None:
        self.events = events

    async def on_session_event(self, message: SessionOpened | SessionClosed, uow: UnitOfWork) -> None:
        await record_session_event(uow, message)

    def on_proposed(self, batch: Sequence[Received], n: int) -> tuple[str, list[Any]]:
        """The proposals of a batch of ``ProposalProposed``, as one statement (parameters from ``$n``) that the runtime
        runs with the batch's claim (:meth:`ServiceRuntime.consume_in_one_statement`): it reads nothing, and a new
        proposal cannot complete the turn that waits on it, so there is nothing to settle."""
        columns: list[list[Any]] = [[] for _ in PROPOSAL_COLUMNS]
        for item in batch:
            message: ProposalProposed = item.message  # type: ignore[assignment]  # the topic carries only this message type
            with item.span():  # the proposal keeps the trace its decision will continue
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
        return insert_claimed_proposals(n), columns

    async def on_tool_result(self, message: ToolResult, uow: UnitOfWork) -> None:
        if message.ok:
            return  # proposals arrive as ProposalProposed; plain outputs are the coach's business
        assert message.error is not None
        await (await _store(uow)).record_refused_call(
            message.tool_call_id,
            message.session_id,
            message.seq,
            message.tool,
            message.error.model_dump(mode="json"),
        )
        await self.settle(uow, message.session_id)

    async def on_step_ended(self, batch: Sequence[Received], uow: UnitOfWork) -> None:
        now = datetime.now(UTC)
        rows = []
        for item in batch:
            message: StepEnded = item.message  # type: ignore[assignment]  # the topic carries only this message type
            rows.append(
                (
                    message.session_id,
                    message.turn_id,
                    message.step,
                    json_param(list(message.tool_call_ids)),
                    # A step that proposed nothing does not pause the turn: nothing to continue.
                    None if message.tool_call_ids else now,
                )
            )
        with batch_span(batch):
            store = await _store(uow)
            await store.add_turns(rows)
            await self._settle(uow, batch, await store.paused(_sessions_of(batch)))

    async def on_outcome(self, batch: Sequence[Received], uow: UnitOfWork) -> None:
        store = await _store(uow)
        # The page of each agent whose proposal of a kind decided there got an outcome hears of it (the outcome
        # does not name the agent: its proposal does).
        outcomes = [item.message for item in batch]
        on_page = [m.proposal_id for m in outcomes if isinstance(m, ProposalOutcome) and m.kind in PAGE_KINDS]
        if on_page:
            pages = await store.agents_of(on_page)
            decided = [PageEvent(event="proposal.decided", agent_id=agent, proposal_id=p) for p, agent in pages]
            self._announce(uow, decided)
        now = datetime.now(UTC)
        resolving = []
        for item in batch:
            message: ProposalOutcome = item.message  # type: ignore[assignment]  # the topic carries only this message type
            if message.outcome in RESOLVED_OUTCOMES:
                resolving.append(item)
                continue
            # The decision's outcome and its proposal's new state go in one statement. (Whether these run before
            # or after the batch's resolutions changes nothing: each changes only a proposal still pending, and a
            # resolution clears the stale flag.)
            with item.span():
                await store.record_outcome(message, now)
        if not resolving:
            return
        # Resolve the proposals and read their sessions' paused turns in one statement. The read sees the tables
        # as they were before the update, so each proposal is taken as resolved here when it was still pending (no
        # other transaction resolves it meanwhile: they all hold the sessions' locks). Of two outcomes that
        # resolve one proposal, the first counts, as if they had come one after the other.
        resolved: dict[str, tuple[str, str | None]] = {}
        for item in resolving:
            message = item.message  # type: ignore[assignment]  # the topic carries only this message type
            resolved.setdefault(message.proposal_id, (message.outcome, message.resolved_by))
        messages: list[ProposalOutcome] = [item.message for item in resolving]  # type: ignore[misc]  # the topic carries only this message type
        with batch_span(resolving):
            paused = await store.resolve_then_paused(messages, now, _sessions_of(resolving))
            await self._settle(uow, resolving, paused, resolved)

    async def settle(self, uow: UnitOfWork, session_id: str) -> None:
        """Continue every paused turn of the session whose proposals are all decided (under the session lock,
        which the runtime took for this message), and announce it once the transaction commits."""
        await uow.lock_session(session_id)
        store = await _store(uow)
        events, continued = await _settle_turns(_sql(uow), session_id, await store.paused([session_id]))
        if continued:
            await store.continue_turns(continued)
        self._announce(uow, events)

    async def _settle(
        self,
        uow: UnitOfWork,
        batch: Sequence[Received],
        paused: Sequence[asyncpg.Record],
        resolved: dict[str, tuple[str, str | None]] | None = None,
    ) -> None:
        """Settle the paused turns of the sessions of ``batch`` from ``paused`` (rows of :data:`PAUSED`), each
        session's continuation in the trace of its last message of the batch, and announce them after commit."""
        rows_of: dict[str, list[asyncpg.Record]] = {}
        for row in paused:
            rows_of.setdefault(row["session_id"], []).append(row)
        last = {item.message.session_id: item for item in batch}  # type: ignore[attr-defined]  # the topic carries only this message type
        events: list[LiveEvent] = []
        continued: list[tuple[Any, ...]] = []
        for session_id, rows in rows_of.items():
            with last[session_id].span():
                settled, turns = await _settle_turns(_sql(uow), session_id, rows, resolved)
            events += settled
            continued += turns
        if continued:
            # The batch's last write (nothing reads the turns after it): it goes with the continuations' outbox rows.
            rows = column_arrays([(*turn, 1) for turn in continued])
            await _sql(uow).outbox.write_last(_sql(uow).conn, CONTINUE_TURNS, rows)
        self._announce(uow, events)

    def _announce(self, uow: UnitOfWork, events: Sequence[LiveEvent]) -> None:
        """Announce ``events`` once the transaction commits."""
        if events:

            async def announce() -> None:
                await self.events.publish(events)

            uow.on_commit(announce)

    # What each handler announces after commit.

    async def proposed(self, message: ProposalProposed) -> None:
        events: list[LiveEvent] = [
            ProposalProposedEvent(session_id=message.session_id, seq=message.seq, kind=message.kind)
        ]
        if message.kind in PAGE_KINDS and message.agent_id is not None:
            events.append(
                PageEvent(event="proposal.proposed", agent_id=message.agent_id, proposal_id=message.proposal_id)
            )
        await self.events.publish(events)

    async def step_ended(self, message: StepEnded) -> None:
        await self.events.publish(
            [StepEndedEvent(session_id=message.session_id, turn_id=message.turn_id, step=message.step)]
        )

    async def outcome(self, message: ProposalOutcome) -> None:
        # The deciding HTTP request is answered once the projection holds the outcome.
        await self.events.publish(
            [ProposalDecidedEvent(session_id=message.session_id, seq=message.seq, outcome=message)]
        )


def _sql(uow: UnitOfWork) -> SqlUnitOfWork:
    assert isinstance(uow, SqlUnitOfWork)
    return uow


async def record_session_event(uow: UnitOfWork, message: SessionOpened | SessionClosed) -> None:
    """Keep a session's opening or closing, and the coach its opening names, in ``uow``: where the projection
    consumes them, and where the gateway opens a session itself (a revert's), so that nothing reads the session
    without its coach meanwhile."""
    await uow.sessions.record(message)
    if isinstance(message, SessionOpened) and message.coach is not None:
        await (await _store(uow)).record_coach(message.session_id, message.coach)


async def _store(uow: UnitOfWork) -> ProjectionStore:
    return await ProjectionStore.over(_sql(uow).conn)


async def _settle_turns(
    uow: SqlUnitOfWork,
    session_id: str,
    paused: Sequence[asyncpg.Record],
    resolved: dict[str, tuple[str, str | None]] | None = None,
) -> tuple[list[LiveEvent], list[tuple[Any, ...]]]:
    """Settle the session's paused turns in ``uow`` (which holds the session lock): emits each continuation, and
    returns the live events to announce once its transaction commits and the arguments of :data:`CONTINUE_TURN`
    for each turn continued (the caller runs them, for all its sessions at once).

    ``paused`` are the session's rows of :data:`PAUSED` (each paused turn with what it waits on, each awaited
    call's proposal or refusal beside it). ``resolved`` (by proposal id: status, by whom) are proposals this
    transaction resolved after those rows were read: a row that still shows one pending is taken as resolved so.
    """
    events: list[LiveEvent] = []
    continued: list[tuple[Any, ...]] = []
    turns = paused_turns(paused, resolved)
    for (turn_id, step), (waited, proposals, refused) in turns.items():
        decisions = settle(waited, proposals, refused)
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
        events.append(TurnContinuedEvent(session_id=session_id, turn_id=turn_id, step=step))
    return events, continued


PausedTurns = dict[tuple[str, int], tuple[list[str], dict[str, ProposalState], dict[str, RefusedCall]]]


def paused_turns(
    paused: Sequence[asyncpg.Record], resolved: dict[str, tuple[str, str | None]] | None = None
) -> PausedTurns:
    """Rows of :data:`PAUSED` by ``(turn_id, step)``: the calls the step waits on, each one's proposal (with
    ``resolved``'s status where the row still shows it pending) or refusal."""
    turns: PausedTurns = {}
    for row in paused:
        awaited = row["awaited"]
        _, proposals, refused = turns.setdefault((row["turn_id"], row["step"]), (list(row["tool_call_ids"]), {}, {}))
        if row["proposal_seq"] is not None:
            status, resolved_by = row["status"], row["resolved_by"]
            if resolved is not None and status == "pending" and row["proposal_id"] in resolved:
                status, resolved_by = resolved[row["proposal_id"]]
            proposals[awaited] = ProposalState(
                awaited,
                row["proposal_seq"],
                row["proposal_id"],
                row["kind"],
                row["label"],
                status,
                resolved_by,
            )
        if row["refused_seq"] is not None:
            refused[awaited] = RefusedCall(awaited, row["refused_seq"], row["error_code"])
    return turns


async def decided_in_step(engine: AsyncEngine, session_id: str, turn_id: str, step: int) -> list[DecisionSummary]:
    """The decisions made so far of a session's paused step, in the order the step named its calls (none once
    the step has continued: its continuation holds them)."""
    async with engine.connect() as conn:
        rows = await (await ProjectionStore.over(conn)).paused([session_id])
    found = paused_turns(rows).get((turn_id, step))
    return [] if found is None else decided_so_far(*found)


def _sessions_of(batch: Sequence[Received]) -> list[str]:
    """The sessions ``batch``'s messages name, each once, in order."""
    return list(dict.fromkeys(item.message.session_id for item in batch))  # type: ignore[attr-defined]  # the topic carries only this message type


# --- direct writes ------------------------------------------------------------------------------------


class BeyondTheWall(Exception):
    """A direct write that names an agent or a guild the gateway's copy of the workspace holds in another
    organisation than the write's: it is not filed (an owner names the organisation of what it wrote, so this is a
    bug or a forgery), and after the failure policy's attempts the message goes to the dead-letter topic."""


async def file_writes(batch: Sequence[Received], uow: UnitOfWork) -> None:
    """File a batch of direct writes (``workspace.writes``) in their organisations' history, in order.

    Each owner emitted its write's message in the transaction of the write, for the organisation of what it wrote
    (read behind the caller's wall); only the owners produce on the topic. The gateway checks what it can against
    its own copy of the workspace: an agent or guild the write names belongs to the write's organisation (one not
    copied yet, a write that created it, passes). Agents and guilds never change organisation, so the check holds
    whenever it is made.
    """
    written: list[WorkspaceWritten] = []
    for item in batch:
        message: WorkspaceWritten = item.message  # type: ignore[assignment]  # the topic carries only this message type
        with item.span():
            agent = None if message.agent_id is None else await uow.workspace.agent(message.agent_id)
            guild = None if message.guild_id is None else await uow.workspace.guild(message.guild_id)
        for what, held in (("agent", agent), ("guild", guild)):
            if held is not None and held.org_id != message.org_id:
                raise BeyondTheWall(
                    f"{message.type} {message.id} names {what} {getattr(held, f'{what}_id')!r} of another organisation"
                    f" than its own ({message.org_id!r}); not filed"
                )
        written.append(message)
    await uow.store(WrittenEntries).file(written)


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
        owner = await (await ProjectionStore.over(conn)).session_org(session_id)
    if owner != org_id:
        raise NotFound(f"session {session_id!r} does not exist")


async def proposal_at(
    deps: Deps, session_id: str, seq: int, org_id: str | None = None, endpoint: str = "edits"
) -> Proposal:
    """The proposal at ``seq`` of a session decided at ``…/{endpoint}/{seq}``, with its agent's ``owners`` and
    ``editors`` (from the workspace copy), in one read. With ``org_id``, another organisation's session is
    :class:`NotFound`, as a missing one is; so is a proposal of a kind decided at another endpoint (a login request
    is not at ``…/edits/{seq}``, an edit not at ``…/logins/{seq}``)."""
    async with deps.engine.connect() as conn:
        found = await (await ProjectionStore.over(conn)).proposal_at(session_id, seq)
    if found is None or not _at(found[0], endpoint) or (org_id is not None and found[1] != org_id):
        if org_id is not None:
            await check_session(deps, session_id, org_id)  # tell "no session" from "no proposal"
        raise NotFound(f"session {session_id!r} has no request at seq {seq} decided at …/{endpoint}/{{seq}}")
    return found[0]


async def proposal_of(deps: Deps, agent_id: str, proposal_id: str, org_id: str, endpoint: str) -> Proposal:
    """Proposal ``proposal_id`` of agent ``agent_id`` decided at ``/api/agents/{agent_id}/{endpoint}/…``
    (:attr:`assent.kinds.KindSpec.addressed_by`), as :func:`proposal_at` reads it. Another organisation's, another
    agent's, or one of a kind decided at another endpoint is :class:`NotFound`, as a missing one is."""
    async with deps.engine.connect() as conn:
        found = await (await ProjectionStore.over(conn)).proposal_of(proposal_id)
    if found is None or found[1] != org_id or found[0].agent_id != agent_id or not _at(found[0], endpoint):
        raise NotFound(f"agent {agent_id!r} has no proposal {proposal_id!r}")
    return found[0]


async def history(deps: Deps, proposal: Proposal) -> History:
    """What became of ``proposal`` (from :func:`proposal_at`), in one read: the outcome's reason, every decision taken
    on it, and what its coach was told."""
    async with deps.engine.connect() as conn:
        return await (await ProjectionStore.over(conn)).history(proposal.proposal_id)


async def decided_in(deps: Deps, org_id: str, answer: dict[str, Any]) -> tuple[Proposal, History] | None:
    """The proposal an owner's answer reads (by its ``proposal_id``, else its ``session_id`` and ``seq``), with its
    history, when it is ``org_id``'s and no longer pending; else None."""
    proposal_id, session_id, seq = answer.get("proposal_id"), answer.get("session_id"), answer.get("seq")
    async with deps.engine.connect() as conn:
        store = await ProjectionStore.over(conn)
        if isinstance(proposal_id, str):
            found = await store.proposal_of(proposal_id)
        elif isinstance(session_id, str) and isinstance(seq, int):
            found = await store.proposal_at(session_id, seq)
        else:
            return None
        if found is None or found[1] != org_id or found[0].status == "pending":
            return None
        return found[0], await store.history(found[0].proposal_id)


def _at(proposal: Proposal, endpoint: str) -> bool:
    return KINDS[proposal.kind].endpoint == endpoint


async def decide(
    deps: Deps,
    proposal: Proposal,
    decision: str,
    actor: str,
    via: str,
    options: dict[str, Any] | None = None,
    roles: frozenset[str] = frozenset(),
) -> ProposalOutcome:
    """Send one decision on ``proposal`` (from :func:`proposal_at`) to its owner and return its outcome.
    ``options`` are the decision's choices (:attr:`assent.kinds.KindSpec.options`), as JSON; ``roles`` the actor's.

    Where the organisation's policy in force when it was proposed has a ``require`` rule for it, a decision other than
    its decline is one approval (:func:`approval`): counted, and sent to the owner only with the last one needed.

    Raises :class:`Refused` (already resolved: the status its kind's :attr:`~assent.kinds.Answer.answered` says; a
    decision that does not fit: 422; an approval that does not count: 403, or 409 for the same person twice),
    :class:`AwaitingApprovals` when the approval was counted and more are needed, :class:`KafkaStalled` when Kafka takes
    none of the gateway's messages (nothing recorded), or :class:`OutcomePending` when the owner has not answered
    within the configured time.
    """
    spec = KINDS[proposal.kind]
    if proposal.status != "pending":
        at = "" if proposal.resolved_at is None else f" at {proposal.resolved_at:%Y-%m-%d %H:%M:%S} UTC"
        raise Refused(spec.answer.answered, f"this request was already {proposal.status} by {proposal.resolved_by}{at}")
    if decision not in spec.decisions:
        accepted = " or ".join(spec.decisions)
        raise Refused(422, f"a {spec.name} request is decided with {accepted}, not {decision!r}")
    required = None if decision == spec.decline else await approval(deps, proposal)
    if required is not None:
        why = approval_refusal(required[0], actor, roles, proposal.operator)
        if why is not None:
            raise NotCounted(403, why)
    check_kafka(deps)
    decision_id = f"dec_{uuid.uuid4().hex}"
    feed: OutcomeFeed = deps.events
    answered = feed.expect(decision_id)
    try:
        # The decision continues the proposal's trace, so one trace spans tool call to outcome; the HTTP
        # request's own span is linked.
        http_span = trace.get_current_span().get_span_context()
        token = attach_carrier(proposal.trace)
        try:
            with tracer.start_as_current_span(
                f"decide {proposal.kind} {decision}", links=[trace.Link(http_span)] if http_span.is_valid else []
            ):
                message = DecisionMade(
                    decision_id=decision_id,
                    proposal_id=proposal.proposal_id,
                    session_id=proposal.session_id,
                    seq=proposal.seq,
                    kind=proposal.kind,
                    decision=decision,
                    actor=actor,
                    via=via,
                    options=options or {},
                )
                if required is None:
                    await deps.decided.record(message)
                else:
                    require, verdict = required
                    tally = await deps.approved.approve(message, verdict, require)
                    if not tally.counted:
                        why = (
                            "you approved this request already"
                            if tally.approvals < require.approvals
                            else ("its approvals are complete and its decision was sent")
                        )
                        raise NotCounted(409, f"{why}; {tally.detail}")
                    if not tally.decided:
                        raise AwaitingApprovals(proposal, decision, tally.approvals, require.approvals, tally.detail)
        finally:
            detach(token)
        return await _await_outcome(deps.decided, feed, deps.settings.decision_timeout_seconds, decision_id, answered)
    finally:
        feed.forget(decision_id)


async def approval(deps: Deps, proposal: Proposal) -> tuple[Require, tuple[Any, ...]] | None:
    """What the policy in force when ``proposal`` was proposed requires of an apply (its ``require`` rule), with the
    verdict's columns to write if the rule worker has not yet; None: one person's decision decides."""
    if proposal.policy_version is None or proposal.org_id is None:
        return None
    policy = await deps.policy_book.at(proposal.org_id, proposal.policy_version)
    verdict = evaluate(policy, proposal.policy_version, proposed(proposal))
    if verdict.required is None:
        return None
    return verdict.required, verdict_row(verdict, proposal.proposal_id, proposal.org_id, proposal.proposed_at)


async def _await_outcome(
    decisions: Decisions,
    feed: OutcomeFeed,
    timeout: float,
    decision_id: str,
    answered: asyncio.Future[ProposalOutcome | None],
) -> ProposalOutcome:
    """The outcome of ``decision_id``: handed over by the event feed (``answered``), or read from the projection
    while the feed cannot be counted on. Raises :class:`OutcomePending` after ``timeout`` seconds."""
    within = asyncio.timeout(timeout)
    try:
        async with within:
            # Awaited directly, so the hand-over resumes this HTTP request at once, ahead of what the same outcome
            # wakes besides (live streams, the publish to the other replicas).
            outcome = await answered if feed.reliable else None
            while outcome is None:  # the feed lost Redis (now or before): read the projection
                outcome = await decisions.outcome(decision_id)
                if outcome is None:
                    await asyncio.sleep(PROJECTION_POLL_SECONDS)
            return outcome
    except TimeoutError:
        if within.expired():
            raise OutcomePending(decision_id) from None
        raise


PROJECTION_POLL_SECONDS = 0.25
"""How often a waiting decision reads the projection while the event feed cannot be counted on."""


async def resend_continuation(deps: Deps, session_id: str) -> tuple[TurnContinuation, int]:
    """Continue: publish the latest paused turn's continuation again (same envelope id). Returns it, and how often
    it was sent now."""
    check_kafka(deps)
    async with deps.runtime.unit_of_work() as uow:
        await uow.lock_session(session_id)
        store = await ProjectionStore.over(uow.conn)
        turn = await store.latest_paused_turn(session_id)
        if turn is None:
            raise NotFound(f"session {session_id!r} has no paused turn")
        if turn["continuation"] is None:
            awaited = list(turn["tool_call_ids"])
            left = len(awaited) - await store.decided_of(awaited)
            raise Refused(409, f"the turn is still waiting on {left} decision{'s' if left != 1 else ''}")
        continuation = TurnContinuation.model_validate(turn["continuation"])
        await uow.emit(STUDIO_CONTINUATIONS, session_id, continuation)
        await store.count_send(session_id, turn["turn_id"], turn["step"])
    return continuation, turn["sends"] + 1
