"""The proposal kit: what every owner service does for every kind, written once.

A kind is a plug-in (:class:`ProposalKind`): its tools with their argument models, and three rules —
*propose* (each proposing tool's handler: reach, caps, the binding to what was read; a :class:`Proposal`, an
:class:`Output` or a :class:`~assent.domain.Refusal` with the reason), *live view* (the card's live side
now, by the owner's own rule) and *apply* / *decline* (inside the runtime's transaction, under the session
lock, as the operator). :class:`OwnerKit` does the rest for all of an owner's kinds:

- answers every tool call with exactly one ``ToolResult``, through a dispatch table from tool name to
  handler; a refused call becomes an error result, an accepted proposal is recorded (bound to its base) and
  announced as ``ProposalProposed`` beside its widget (of its kind's ``widget`` type: ``studio_edit_request``,
  ``studio_connection_access``); a proposal whose action its kind does not declare is refused with the reason
  (``undeclared_action``), as a call is;
- replaces: a proposal that names the waiting one it supersedes (``Proposal.supersedes``, for a kind that declares
  superseding in the registry) resolves that one as ``superseded`` through the usual ``ProposalOutcome``, in the
  same transaction; a turn needs no answer to it;
- a call re-sent with the same ``tool_call_id`` gets the very result it got the first time (same envelope
  id), never a second request and never an error that would settle the turn;
- resolves each request once: a second decision is refused (422) and changes nothing; a stale apply (409)
  leaves it pending and marked stale; every resolution records who, when and what was written;
- keeps the session copy from ``studio.sessions`` and from the calls themselves;
- serves the live side of any of its cards to the gateway (``GET /internal/proposals/{id}/live``);
- reverts an applied request of a kind that declares it (:attr:`~assent.kinds.KindSpec.revertible`): the kind
  computes the inverse (:meth:`ProposalKind.inverse`, a call of its own proposing tool bound to the target as it is
  now) and the kit files it, for the person who asked, as the first request of a session opened for them
  (:meth:`OwnerKit.revert`, ``POST /internal/proposals/{id}/revert``): a new request, decided as any other.
"""

from __future__ import annotations

import abc
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .. import topics
from ..contracts import (
    Card,
    CardField,
    DecisionMade,
    LineCounts,
    ProposalBase,
    ProposalOutcome,
    ProposalProposed,
    ProposalTarget,
    ProposalWidget,
    SessionClosed,
    SessionContext,
    SessionOpened,
    ToolCall,
    ToolError,
    ToolResult,
    lines_of,
)
from ..contracts.envelope import Id, Seq
from ..domain import Refusal, Session, invalid_arguments
from ..faults import crash_point, fail_point
from ..kinds import EXPIRE, EXPIRED, SUPERSEDED, KindSpec
from ..kinds import kind as spec_of
from .consumer import Received
from .uow import CallContext, StoredProposal, UnitOfWork


@dataclass(frozen=True)
class Call:
    """What a tool handler knows of the call it answers."""

    message: ToolCall
    session: Session


@dataclass(frozen=True)
class Proposal:
    """An accepted proposal: what it binds, what its card shows, and what apply needs (``payload``).

    ``before``/``after`` are the whole target as text when proposed; ``fields`` are the card's fields as the kind's
    :meth:`~ProposalKind.live_view` gives them while the target is as read (one diff each), and its line counts come
    from them (:attr:`lines`); ``notes`` are the card's other lines (who reads a new note, ...), and ``origin`` where
    it was asked for (one of its kind's :attr:`~assent.kinds.KindSpec.origins`; None for a kind that declares none).
    """

    action: str
    target: ProposalTarget
    base: ProposalBase
    proposed_hash: str
    reason: str
    before: str
    after: str
    payload: dict[str, Any]
    fields: tuple[CardField, ...] = ()
    notes: tuple[str, ...] = ()
    origin: str | None = None
    effects: tuple[str, ...] = ()
    widens: bool = False
    widget_fields: BaseModel | None = None
    """The fields the kind's widget carries beside every kind's (an access request's ``edit``; a Task draft's
    ``agent``, ``draft_id`` and ``rationale``), as its contract declares them: a subclass of
    :class:`~assent.contracts.ProposalWidget` reads them back. None: the kind adds none."""
    output: dict[str, Any] | None = None
    """What the tool result says beside the widget (files a proposal left out, ...); None: nothing."""
    supersedes: StoredProposal | None = None
    """The waiting proposal this one replaces, as the kind's rule read it under the session's lock (the kind must
    declare superseding: :attr:`assent.kinds.KindSpec.supersedes`). The kit resolves it as superseded."""

    @property
    def lines(self) -> LineCounts:
        """The lines it adds and removes: its fields' (:func:`~assent.contracts.lines_of`), as its card counts them."""
        return lines_of(self.fields)


@dataclass(frozen=True)
class Output:
    """A plain answer to a read tool."""

    data: dict[str, Any]


@dataclass(frozen=True)
class Applied:
    detail: str
    version: int | None = None
    effects: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Stale:
    """The target moved since the proposal read it: 409, and the request stays pending, marked stale."""

    detail: str
    effects: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LiveView:
    """The live side of a card now. ``hash`` None: the target does not exist (yet, or any more).

    ``fields`` holds each field's live text (``before``) beside the proposal (``after``).
    """

    hash: str | None
    version: int | None
    fields: tuple[CardField, ...]
    notes: tuple[str, ...] = ()


class LiveCard(BaseModel):
    """The owner's answer to ``GET /internal/proposals/{id}/live``: the card's live side, stale flag included."""

    model_config = ConfigDict(frozen=True)

    proposal_id: str
    kind: str
    action: str
    status: str
    stale: bool
    live_hash: str | None
    live_version: int | None
    fields: tuple[CardField, ...]
    notes: tuple[str, ...] = ()
    resolution: dict[str, Any] | None = None


@dataclass(frozen=True)
class Inverse:
    """What undoes an applied request: a call of its kind's proposing ``tool`` with ``arguments`` bound to the target
    as it is now (its current version), without ``reason``, which the kit writes (``Revert of request #N of session
    …``)."""

    tool: str
    arguments: dict[str, Any]


class RevertRequest(BaseModel):
    """The body of ``POST /internal/proposals/{id}/revert``: where the new request goes (a session the gateway opened
    for the person who asked, and its seq)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: Id
    seq: Seq


class Reverted(BaseModel):
    """The answer of ``POST /internal/proposals/{id}/revert``: the new request, and what it reverts."""

    model_config = ConfigDict(frozen=True)

    proposal_id: str
    session_id: str
    seq: int
    kind: str
    source_guild_id: str
    reverts: str
    """The proposal id of the request it reverts."""


def revert_reason(session_id: str, seq: int) -> str:
    """The reason a revert request gives, as the history and the cards read it."""
    return f"Revert of request #{seq} of session {session_id}"


ToolHandler = Callable[[Call, Any, UnitOfWork], Awaitable[Proposal | Output | Refusal]]


@dataclass(frozen=True)
class Tool:
    """One tool of a kind: the model its arguments must fit, and its handler."""

    arguments: type[BaseModel]
    handler: ToolHandler


class ProposalKind(abc.ABC):
    """A kind's plug-in. Subclasses name the kind (a row of :data:`assent.kinds.KINDS`) and give its tools."""

    name: ClassVar[str]
    reads_proposals: ClassVar[bool] = True
    """Whether the kind's rules read the proposals table (through ``uow.proposals`` or queries of their own). The
    kit writes a batch's proposals (the new ones, and what its decisions change) in one round trip at the end of
    the batch, and before each rule of a kind that reads them: such a rule sees every earlier message's write.
    A kind that never reads them says False, and its batches write once."""

    @property
    def spec(self) -> KindSpec:
        return spec_of(self.name)

    @abc.abstractmethod
    def tools(self) -> dict[str, Tool]:
        """Every tool of :attr:`spec` (proposing and reading), by name.

        It names each tool's argument model and handler and reads nothing else of the instance: ``make contracts``
        (``contracts/export.py``) calls it on an instance made without ``__init__`` to publish the arguments' JSON
        Schemas."""

    @abc.abstractmethod
    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        """The live side of the card now; the kit compares its hash with the base to tell staleness."""

    @abc.abstractmethod
    async def apply(
        self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork
    ) -> Applied | Stale | Refusal:
        """Re-read the live target (locked) and write the proposal as ``decision.actor``, or say why not."""

    async def inverse(self, proposal: StoredProposal, uow: UnitOfWork) -> Inverse | Refusal:
        """The call of the kind's proposing tool that undoes ``proposal`` (an applied request of this kind), bound to
        the target's current version; or why it cannot be undone now (409: the target is already as it was before,
        or what it was before is not kept). A kind whose registry row is :attr:`~assent.kinds.KindSpec.revertible`
        overrides it; by default nothing of the kind is."""
        return Refusal(422, "not_revertible", f"a {self.name} request cannot be reverted")

    async def decline(self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork) -> None:  # noqa: B027
        """What declining (or discarding) does beyond resolving the request; nothing by default."""

    async def read_ahead(self, calls: Sequence[ToolCall], uow: UnitOfWork) -> None:  # noqa: B027
        """Before a batch's calls are answered, read at once what this kind's tools will read for ``calls`` (the
        batch's calls of this kind, in order, their arguments not yet checked), so that the kind's store answers
        each tool from what was read: one round trip per batch instead of one per call. Nothing by default.

        What is read ahead is what each call would have read at the start of its batch: no tool writes its
        target (applying does, in decisions' units of work), and a store that writes forgets what it read.
        """


@dataclass
class _Writes:
    """The proposal writes a batch holds back, to send in one round trip (see :attr:`ProposalKind.reads_proposals`)."""

    adds: list[StoredProposal] = field(default_factory=list)
    updates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def flush(self, uow: UnitOfWork, *, last: bool = False) -> None:
        """Write what is held; ``last``: at the end of the batch, with its outbox rows (nothing reads them after)."""
        if self.adds:
            adds, self.adds = self.adds, []
            await uow.proposals.add_many(adds, last=last and not self.updates)
        if self.updates:
            updates, self.updates = self.updates, []
            await uow.proposals.update_many(updates, last=last)


def proposal_id_for(session_id: str, tool_call_id: str) -> str:
    """The id a proposal gets: the same for every delivery of the same call."""
    return "prop_" + uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{tool_call_id}").hex


class OwnerKit:
    """The handlers of one owner service, over all of its kinds."""

    keeps_every_session: bool = False
    """Whether the owner keeps every session that opens, rather than only those whose calls reach it: an owner
    that answers the operator about sessions its kinds were never called in (the Logins popover of any session)."""

    def __init__(self, service: str, kinds: Sequence[ProposalKind], *, max_result_bytes: int = 900_000) -> None:
        self.service = service
        self.kinds = {kind.name: kind for kind in kinds}
        self.max_result_bytes = max_result_bytes
        self.dispatch: dict[str, tuple[ProposalKind, Tool]] = {}
        for kind in kinds:
            spec = kind.spec
            if spec.owner != service:
                raise ValueError(f"kind {kind.name!r} belongs to {spec.owner!r}, not {service!r}")
            tools = kind.tools()
            declared = {*spec.tools, *spec.read_tools}
            if set(tools) != declared:
                raise ValueError(
                    f"kind {kind.name!r} implements {sorted(tools)}; the registry names {sorted(declared)}"
                )
            for name, tool in tools.items():
                self.dispatch[name] = (kind, tool)

    # --- sessions ---------------------------------------------------------------------------------

    async def on_session_event(self, message: SessionOpened | SessionClosed, uow: UnitOfWork) -> None:
        await uow.sessions.record(message)

    # --- tool calls -------------------------------------------------------------------------------

    async def on_tool_calls(self, batch: Sequence[Received], uow: UnitOfWork) -> None:
        """Answer each call of ``batch`` (a fetch's new ``ToolCall`` messages, in order) as :meth:`on_tool_call`
        does, with what they are checked against read for the whole batch at once."""
        calls: list[ToolCall] = [item.message for item in batch]  # type: ignore[misc]  # the topic carries only these (its registry row)
        contexts = await uow.call_contexts([(call.session_id, call.seq, call.tool_call_id) for call in calls])
        if len(calls) > 1:  # a lone call reads what it needs itself, no more
            await self._read_ahead(calls, uow)
        recorded: list[StoredProposal] = []
        writes = _Writes()
        for item, call, context in zip(batch, calls, contexts, strict=True):
            with item.span():
                await self._on_tool_call(call, context, recorded, writes, uow)
        await writes.flush(uow, last=True)

    async def _read_ahead(self, calls: Sequence[ToolCall], uow: UnitOfWork) -> None:
        """Each kind's :meth:`ProposalKind.read_ahead` of its calls in ``calls``, in the order the kinds come."""
        of_kind: dict[str, list[ToolCall]] = {}
        for call in calls:
            routed = self.dispatch.get(call.tool)
            if routed is not None:
                of_kind.setdefault(routed[0].name, []).append(call)
        for name, its_calls in of_kind.items():
            await self.kinds[name].read_ahead(its_calls, uow)

    async def on_tool_call(self, call: ToolCall, uow: UnitOfWork) -> None:
        """Answer ``call`` with exactly one ``ToolResult`` (a replay of the first one for a re-sent call)."""
        [context] = await uow.call_contexts([(call.session_id, call.seq, call.tool_call_id)])
        writes = _Writes()
        await self._on_tool_call(call, context, [], writes, uow)
        await writes.flush(uow, last=True)

    async def _on_tool_call(
        self,
        call: ToolCall,
        context: CallContext,
        recorded: list[StoredProposal],
        writes: _Writes,
        uow: UnitOfWork,
    ) -> None:
        """``context`` was read before the proposals of ``recorded`` (this batch's, to which this call's is added;
        ``writes`` holds those not yet written)."""
        fail_point(f"{self.service}.tool_call.{call.tool}")
        clashing = context.clashing + [
            held
            for held in recorded
            if held.tool_call_id == call.tool_call_id or (held.session_id == call.session_id and held.seq == call.seq)
        ]
        earlier = next((held for held in clashing if held.tool_call_id == call.tool_call_id), None)
        if earlier is not None and earlier.session_id == call.session_id:
            await uow.emit(topics.TOOL_RESULTS, call.session_id, ToolResult.model_validate(earlier.result))
            return
        answer = await self._answer(
            call, earlier, context.session, seq_taken=bool(clashing) and earlier is None, writes=writes, uow=uow
        )
        if isinstance(answer, Refusal):
            await uow.emit(topics.TOOL_RESULTS, call.session_id, self._error(call, answer))
            return
        result = self._result(call, answer if isinstance(answer, Output) else None)
        if isinstance(answer, Proposal):
            kind, _ = self.dispatch[call.tool]
            result = await self._record(call, kind, answer, recorded, writes, uow)
        if len(result.to_bytes()) > self.max_result_bytes:
            result = self._error(
                call,
                Refusal(
                    413,
                    "result_too_large",
                    f"the result of {call.tool} is {len(result.to_bytes())} bytes; results are capped at "
                    f"{self.max_result_bytes} bytes",
                ),
            )
        await uow.emit(topics.TOOL_RESULTS, call.session_id, result)

    async def _answer(
        self,
        call: ToolCall,
        earlier: StoredProposal | None,
        session: Session | None,
        *,
        seq_taken: bool,
        writes: _Writes,
        uow: UnitOfWork,
    ) -> Proposal | Output | Refusal:
        if earlier is not None:
            return Refusal(409, "duplicate_tool_call", f"tool call {call.tool_call_id!r} belongs to another session")
        if session is None and call.session is not None:
            await uow.sessions.ensure(call.session_id, call.session)
            session = await uow.sessions.get(call.session_id)
        if session is None:
            return Refusal(404, "unknown_session", f"session {call.session_id!r} is not open")
        if call.session is not None and (
            call.session.org_id,
            call.session.source_guild_id,
        ) != (session.org_id, session.source_guild_id):
            return Refusal(409, "session_mismatch", f"the call does not match session {call.session_id!r}")
        if session.closed:
            return Refusal(409, "session_closed", f"session {call.session_id!r} is closed")
        routed = self.dispatch.get(call.tool)
        if routed is None:
            return Refusal(422, "unsupported_tool", f"{call.tool} is not handled by the {self.service} service")
        kind, tool = routed
        if call.tool in kind.spec.tools and seq_taken:
            return Refusal(409, "seq_taken", f"session {call.session_id!r} already holds a request at seq {call.seq}")
        try:
            arguments = tool.arguments.model_validate(call.arguments)
        except ValidationError as exc:
            return invalid_arguments(call.tool, exc)
        if kind.reads_proposals:
            await writes.flush(uow)
        answer = await tool.handler(Call(call, session), arguments, uow)
        if not isinstance(answer, Proposal):
            return answer
        refusal = self._inadmissible(kind.spec, call, answer)
        if refusal is not None:
            return refusal
        if answer.supersedes is not None:
            await self._supersede(answer.supersedes, call, session, writes, uow)
        return answer

    @staticmethod
    def _inadmissible(spec: KindSpec, call: ToolCall, proposal: Proposal) -> Refusal | None:
        """Why the kind's ``proposal`` cannot be recorded (an action, an origin or a replacement its kind does not
        declare); None: it can."""
        if proposal.action not in spec.actions:
            return Refusal(
                422,
                "undeclared_action",
                f"{call.tool} proposed the action {proposal.action!r}, which a {spec.name} proposal does not take; "
                f"it takes {' or '.join(repr(action) for action in spec.actions)}",
            )
        origins = [origin.name for origin in spec.origins]
        if proposal.origin is not None and proposal.origin not in origins:
            declared = " or ".join(repr(origin) for origin in origins) if origins else "none"
            return Refusal(
                422,
                "undeclared_origin",
                f"{call.tool} proposed from the origin {proposal.origin!r}, which a {spec.name} proposal does not "
                f"name; it names {declared}",
            )
        old = proposal.supersedes
        if old is None:
            return None
        if spec.supersedes is None:
            why = f"a {spec.name} proposal replaces no other"
        elif (
            old.kind != spec.name
            or old.session_id != call.session_id
            or old.proposal_id == proposal_id_for(call.session_id, call.tool_call_id)
            or (spec.supersedes == "turn" and (old.turn_id != call.turn_id or old.agent_id != proposal.target.agent_id))
        ):
            scope = "the same chat" if spec.supersedes == "chat" else "the same agent in the same turn"
            why = f"a {spec.name} proposal replaces only a waiting one of {scope}"
        elif old.status != "pending":
            why = f"it was already {old.status}"
        else:
            return None
        return Refusal(
            409, "cannot_supersede", f"nothing was proposed: {call.tool} cannot replace {old.proposal_id}: {why}"
        )

    @staticmethod
    async def _supersede(
        old: StoredProposal, call: ToolCall, session: Session, writes: _Writes, uow: UnitOfWork
    ) -> None:
        """Resolve ``old`` as superseded by the proposal of ``call``, for the session's operator: its new state goes
        with the batch's writes and its outcome to the outbox, as a decision's would."""
        successor = proposal_id_for(call.session_id, call.tool_call_id)
        now = datetime.now(UTC)
        resolution = {"replaced_by": successor}
        writes.updates.append(
            (
                old.proposal_id,
                {
                    "status": SUPERSEDED,
                    "resolved_by": session.operator_user_id,
                    "resolved_at": now,
                    "stale": False,
                    "resolution": resolution,
                },
            )
        )
        await uow.emit(
            topics.PROPOSALS_OUTCOMES,
            old.session_id,
            ProposalOutcome(
                decision_id="dec_" + uuid.uuid5(uuid.NAMESPACE_URL, f"superseded/{old.proposal_id}").hex,
                proposal_id=old.proposal_id,
                session_id=old.session_id,
                seq=old.seq,
                kind=old.kind,
                outcome=SUPERSEDED,
                status=200,
                detail=f"superseded by {successor} (seq {call.seq}); it needs no answer and nothing was written",
                resolved_by=session.operator_user_id,
                resolved_at=now,
                effects=resolution,
                causation_id=call.id,
                correlation_id=call.id,
            ),
        )

    async def _record(
        self,
        call: ToolCall,
        kind: ProposalKind,
        proposal: Proposal,
        recorded: list[StoredProposal],
        writes: _Writes,
        uow: UnitOfWork,
    ) -> ToolResult:
        spec = kind.spec
        proposal_id = proposal_id_for(call.session_id, call.tool_call_id)
        lines = proposal.lines
        result = self._result(
            call,
            Output(proposal.output) if proposal.output is not None else None,
            widget=ProposalWidget(
                type=spec.widget,
                proposal_id=proposal_id,
                kind=spec.name,
                action=proposal.action,
                target=proposal.target,
                base=proposal.base,
                proposed_hash=proposal.proposed_hash,
                lines=lines,
                widens=proposal.widens,
                **(proposal.widget_fields.model_dump(mode="json") if proposal.widget_fields is not None else {}),
            ),
        )
        stored = StoredProposal(
            proposal_id=proposal_id,
            session_id=call.session_id,
            seq=call.seq,
            turn_id=call.turn_id,
            step=call.step,
            tool_call_id=call.tool_call_id,
            tool=call.tool,
            kind=spec.name,
            action=proposal.action,
            agent_id=proposal.target.agent_id,
            target=proposal.target.model_dump(mode="json"),
            base=proposal.base.model_dump(mode="json"),
            proposed_hash=proposal.proposed_hash,
            payload=proposal.payload,
            result=result.model_dump(mode="json"),
        )
        writes.adds.append(stored)
        recorded.append(stored)
        await uow.emit(
            topics.PROPOSALS_PROPOSED,
            call.session_id,
            ProposalProposed(
                proposal_id=proposal_id,
                session_id=call.session_id,
                seq=call.seq,
                turn_id=call.turn_id,
                step=call.step,
                tool_call_id=call.tool_call_id,
                tool=call.tool,
                kind=spec.name,
                action=proposal.action,
                section=spec.section,
                agent_id=proposal.target.agent_id,
                target=proposal.target,
                base=proposal.base,
                proposed_hash=proposal.proposed_hash,
                lines=lines,
                widens=proposal.widens,
                reason=proposal.reason,
                card=Card(
                    title=proposal.target.label,
                    apply_label=spec.actions[proposal.action],
                    before=proposal.before,
                    after=proposal.after,
                    effects=proposal.effects,
                    fields=proposal.fields,
                    notes=proposal.notes,
                    origin=proposal.origin,
                ),
                causation_id=call.id,
                correlation_id=call.id,
            ),
        )
        return result

    @staticmethod
    def _result(call: ToolCall, output: Output | None = None, widget: ProposalWidget | None = None) -> ToolResult:
        return ToolResult(
            session_id=call.session_id,
            seq=call.seq,
            tool_call_id=call.tool_call_id,
            tool=call.tool,
            ok=True,
            output=None if output is None else output.data,
            widget=widget,
            causation_id=call.id,
            correlation_id=call.id,
        )

    @staticmethod
    def _error(call: ToolCall, refusal: Refusal) -> ToolResult:
        return ToolResult(
            session_id=call.session_id,
            seq=call.seq,
            tool_call_id=call.tool_call_id,
            tool=call.tool,
            ok=False,
            error=ToolError(status=refusal.status, code=refusal.code, message=refusal.message),
            causation_id=call.id,
            correlation_id=call.id,
        )

    # --- reverting --------------------------------------------------------------------------------

    async def revert(
        self, proposal_id: str, request: RevertRequest, *, org: str, actor: str, uow: UnitOfWork
    ) -> Reverted | Refusal:
        """File the inverse of applied request ``proposal_id`` (of ``org``) for ``actor`` as request ``request.seq``
        of session ``request.session_id`` (opened for ``actor`` by the gateway; its copy here is made from the call,
        as any call's is): the kind's :meth:`ProposalKind.inverse`, checked and recorded as a call of its tool is, and
        announced as ``ProposalProposed``. Refused: another organisation's or an unknown request (404), a kind that
        is not revertible (422), a request that was not applied (409), or the kind's refusal of the inverse."""
        proposal = await uow.proposals.get(proposal_id)
        session = None if proposal is None else await uow.sessions.get(proposal.session_id)
        if proposal is None or proposal.kind not in self.kinds or session is None or session.org_id != org:
            return Refusal(404, "not_found", f"no request {proposal_id!r} here")
        kind = self.kinds[proposal.kind]
        spec = kind.spec
        if not spec.revertible:
            return Refusal(422, "not_revertible", f"a {spec.name} request cannot be reverted")
        if proposal.status not in spec.applied_outcomes:
            why = f"only an applied request can be reverted; this one is {proposal.status}"
            return Refusal(409, "not_applied", why)
        await uow.lock_session(request.session_id)
        inverse = await kind.inverse(proposal, uow)
        if isinstance(inverse, Refusal):
            return inverse
        call = ToolCall(
            session_id=request.session_id,
            seq=request.seq,
            turn_id=f"turn_{uuid.uuid4().hex}",
            step=0,
            tool_call_id=f"revert_{uuid.uuid4().hex}",
            tool=inverse.tool,
            arguments={**inverse.arguments, "reason": revert_reason(proposal.session_id, proposal.seq)},
            session=SessionContext(org_id=org, source_guild_id=session.source_guild_id, operator_user_id=actor),
        )
        writes = _Writes()
        answer = await self._answer(call, None, None, seq_taken=False, writes=writes, uow=uow)
        if isinstance(answer, Output):
            return Refusal(422, "not_revertible", f"{call.tool} proposes nothing")
        if isinstance(answer, Refusal):
            return answer
        result = await self._record(call, self.dispatch[call.tool][0], answer, [], writes, uow)
        await uow.emit(topics.TOOL_RESULTS, call.session_id, result)
        await writes.flush(uow, last=True)
        return Reverted(
            proposal_id=proposal_id_for(call.session_id, call.tool_call_id),
            session_id=call.session_id,
            seq=call.seq,
            kind=spec.name,
            source_guild_id=session.source_guild_id,
            reverts=proposal.proposal_id,
        )

    # --- decisions --------------------------------------------------------------------------------

    async def on_decisions(self, batch: Sequence[Received], uow: UnitOfWork) -> None:
        """Decide each of ``batch`` (a fetch's new ``DecisionMade`` messages, in order) as :meth:`on_decision`
        does, with the requests they decide read and locked for the whole batch at once."""
        decisions: list[DecisionMade] = [item.message for item in batch]  # type: ignore[misc]  # the topic carries only these (its registry row)
        held = await uow.proposals.get_many(
            sorted({d.proposal_id for d in decisions if d.kind in self.kinds}), for_update=True
        )
        writes = _Writes()
        for item, decision in zip(batch, decisions, strict=True):
            with item.span():
                await self._on_decision(decision, held, writes, uow)
        await writes.flush(uow, last=True)

    async def on_decision(self, decision: DecisionMade, uow: UnitOfWork) -> ProposalOutcome | None:
        """Resolve a request of one of this owner's kinds once; exactly one outcome per decision, which it returns
        (None: a decision on another owner's kind). An owner that takes a decision on a route of its own (a login
        grant) calls it with the ``DecisionMade`` it made, in the route's unit of work."""
        held = await uow.proposals.get_many([decision.proposal_id], for_update=True)
        writes = _Writes()
        outcome = await self._on_decision(decision, held, writes, uow)
        await writes.flush(uow, last=True)
        return outcome

    async def _on_decision(
        self, decision: DecisionMade, held: dict[str, StoredProposal], writes: _Writes, uow: UnitOfWork
    ) -> ProposalOutcome | None:
        """``held``: the requests decided, read (and locked) before; what this decision changes is changed there too,
        so the next decision of the batch sees it, and goes to ``writes``."""
        kind = self.kinds.get(decision.kind)
        if kind is None:
            return None  # another owner's decision
        await uow.lock_session(decision.session_id)
        outcome = await self._decide(kind, decision, held, writes, uow)
        await uow.emit(topics.PROPOSALS_OUTCOMES, decision.session_id, outcome)
        crash_point(f"{self.service}.decision.before_commit")
        return outcome

    async def _decide(
        self,
        kind: ProposalKind,
        decision: DecisionMade,
        held: dict[str, StoredProposal],
        writes: _Writes,
        uow: UnitOfWork,
    ) -> ProposalOutcome:
        def outcome(name: str, status: int, detail: str, **fields: Any) -> ProposalOutcome:
            return ProposalOutcome(
                decision_id=decision.decision_id,
                proposal_id=decision.proposal_id,
                session_id=decision.session_id,
                seq=decision.seq,
                kind=decision.kind,
                outcome=name,
                status=status,
                detail=detail,
                causation_id=decision.id,
                correlation_id=decision.correlation_id or decision.id,
                **fields,
            )

        async def update(**fields: Any) -> None:
            writes.updates.append((proposal.proposal_id, fields))
            held[proposal.proposal_id] = dataclasses.replace(proposal, **fields)

        found = held.get(decision.proposal_id)
        if found is None or found.session_id != decision.session_id or found.kind != decision.kind:
            return outcome("refused", 404, f"no request {decision.proposal_id!r} in session {decision.session_id!r}")
        proposal: StoredProposal = found
        if proposal.status != "pending":
            when = f" at {proposal.resolved_at:%Y-%m-%d %H:%M:%S} UTC" if proposal.resolved_at else ""
            return outcome(
                "refused", 422, f"this request was already {proposal.status} by {proposal.resolved_by}{when}"
            )
        spec = kind.spec
        now = datetime.now(UTC)
        if decision.decision == EXPIRE:  # a policy's deadline passed: resolved, nothing written, as a decline
            if kind.reads_proposals:
                await writes.flush(uow)
            await kind.decline(proposal, decision, uow)
            await update(status=EXPIRED, resolved_by=decision.actor, resolved_at=now, stale=False)
            why = decision.options.get("reason") or "it waited longer than its policy allows"
            return outcome(
                EXPIRED, 200, f"expired: {why}; nothing was written", resolved_by=decision.actor, resolved_at=now
            )
        resolved_as = spec.decisions.get(decision.decision)
        if resolved_as is None:
            accepted = " or ".join(spec.decisions)
            return outcome(
                "refused", 422, f"a {spec.name} request is decided with {accepted}, not {decision.decision!r}"
            )
        if kind.reads_proposals:
            await writes.flush(uow)
        if decision.decision == spec.decline:
            await kind.decline(proposal, decision, uow)
            await update(status=resolved_as, resolved_by=decision.actor, resolved_at=now, stale=False)
            return outcome(
                resolved_as, 200, f"{resolved_as}; nothing was written", resolved_by=decision.actor, resolved_at=now
            )
        verdict = await kind.apply(proposal, decision, uow)
        if isinstance(verdict, Refusal):  # the request stays pending: a rule refuses it now, perhaps not later
            return outcome("refused", verdict.status, verdict.message, effects={"code": verdict.code})
        if isinstance(verdict, Stale):
            await update(stale=True)
            return outcome("stale", 409, verdict.detail, effects=verdict.effects)
        await update(
            status=resolved_as,
            resolved_by=decision.actor,
            resolved_at=now,
            stale=False,
            resolution={"version": verdict.version, **verdict.effects},
        )
        effects = {**({"version": verdict.version} if verdict.version is not None else {}), **verdict.effects}
        return outcome(resolved_as, 200, verdict.detail, resolved_by=decision.actor, resolved_at=now, effects=effects)

    # --- the card's live side ---------------------------------------------------------------------

    async def live_card(self, proposal_id: str, uow: UnitOfWork, *, org: str | None = None) -> LiveCard | None:
        """The live side of a card; None when there is no such proposal here, or (``org`` given) it belongs to
        another organisation's session."""
        proposal = await uow.proposals.get(proposal_id)
        if proposal is None or proposal.kind not in self.kinds:
            return None
        if org is not None:
            session = await uow.sessions.get(proposal.session_id)
            if session is None or session.org_id != org:
                return None
        view = await self.kinds[proposal.kind].live_view(proposal, uow)
        moved = view.hash != proposal.base.get("hash")
        return LiveCard(
            proposal_id=proposal.proposal_id,
            kind=proposal.kind,
            action=proposal.action,
            status=proposal.status,
            stale=proposal.status == "pending" and (proposal.stale or moved),
            live_hash=view.hash,
            live_version=view.version,
            fields=view.fields,
            notes=view.notes,
            resolution=proposal.resolution,
        )
