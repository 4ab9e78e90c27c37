"""The ``login`` kind: ``studio_request_connection_access`` asks for read access to one login, and
``studio_call_connection_tool`` reads through a login the session holds.

A request binds the login's server and account (what the card shows). Granting it (the gateway's
``POST …/logins/{seq}``, whose ``DecisionMade`` the kit applies here, or granting the login in the Logins popover,
:mod:`connections.api`) adds the login to the session's grants; a grant ends when the session closes, or, granted
with a ``lifetime`` (the grant's option, :class:`connections_contract.routes.LoginGrant`), once it lapses: a call
after that is refused as ``connection_grant_expired``, and the coach may ask again. A call goes
to the login's MCP server only for a granted, connected login, a tool listed on it that the read-only policy
(:mod:`connections.domain.policy`) lets through; its result is redacted against the login's stored credentials,
capped, and wrapped as untrusted evidence (:mod:`connections.domain.evidence`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict, ValidationError

from assent.contracts import (
    CardField,
    DecisionMade,
    ProposalBase,
    ProposalTarget,
    SessionClosed,
    SessionOpened,
    ToolCall,
)
from assent.domain import Refusal, Session, invalid_arguments
from assent.runtime import (
    Applied,
    Call,
    LiveView,
    Output,
    OwnerKit,
    Proposal,
    ProposalKind,
    Received,
    Stale,
    StoredProposal,
    Tool,
)
from assent.runtime.uow import UnitOfWork
from assent.telemetry import current_carrier
from assent.topics import TOOL_RESULTS
from connections_contract.routes import lifetime_of

from ..adapters.crypto import CredentialBox, UnreadableCredentials
from ..adapters.mcp import ConnectionFailed
from ..adapters.repository import LoginsRepository
from ..domain.evidence import RESULT_CAP_BYTES, CallOutcome, evidence, redact
from ..domain.grants import Grant, expiry
from ..domain.logins import CallTool, Credentials, Login, RequestAccess, check_reach, tool_names
from ..domain.policy import ToolSpec

log = logging.getLogger(__name__)


class ToolCaller(Protocol):
    """Calls a tool on a login's MCP server (:class:`connections.adapters.mcp.McpPool`); raises
    :class:`~connections.adapters.mcp.ConnectionFailed` when the server does not answer in time or at all."""

    async def call(
        self, login_id: str, url: str, headers: Mapping[str, str], tool: str, arguments: dict[str, Any]
    ) -> CallOutcome: ...


def store(uow: UnitOfWork) -> LoginsRepository:
    return uow.store(LoginsRepository)


async def reachable_login(session: Session, connection_id: str, uow: UnitOfWork) -> Login | Refusal:
    """The login, when the session reaches it (an agent login's agent is read from the workspace copy)."""
    login = await store(uow).get(connection_id)
    agent = None
    if login is not None and login.scope == "agent" and login.scope_id is not None:
        agent = await uow.workspace.agent(login.scope_id)
    refusal = check_reach(session, login, agent, connection_id)
    if refusal is not None:
        return refusal
    assert login is not None  # check_reach refuses a missing login
    return login


def clock() -> datetime:
    """The service's time: a grant's lifetime starts and ends by it (a test passes its own)."""
    return datetime.now(UTC)


def lifetime_option(options: Mapping[str, Any]) -> timedelta | Refusal | None:
    """The lifetime a grant's options give (None: until the session closes); a refusal for one that is not a
    lifetime (the gateway checks it first: only a decision sent around it gets here)."""
    text = options.get("lifetime")
    if text is None:
        return None
    if not isinstance(text, str):
        return Refusal(422, "invalid_lifetime", f"lifetime must be an ISO 8601 duration as text, not {text!r}")
    try:
        return lifetime_of(text)
    except ValueError as exc:
        return Refusal(422, "invalid_lifetime", f"lifetime {exc}")


def lapsed_grant(login: Login, grant: Grant) -> Refusal:
    """A call through a grant that lapsed: which login, when, and how to get it again."""
    assert grant.expires_at is not None
    return Refusal(
        403,
        "connection_grant_expired",
        f"the session's grant of connection {login.login_id!r} ({login.name}), given by {grant.granted_by}, lapsed at "
        f"{grant.expires_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC; ask the operator for it again with "
        "studio_request_connection_access",
    )


def not_connected(login: Login) -> Refusal:
    return Refusal(
        409,
        "connection_not_connected",
        f"connection {login.login_id!r} ({login.name}) is not connected; it must be connected in the workspace first",
    )


PROXIED = Output({"proxied": True})
"""What :meth:`LoginKind.call_tool` answers the kit for a call it admitted and recorded: no result yet (the call's
runner answers it, :class:`connections.calls.CallRunner`)."""


class AccessRequest(BaseModel):
    """What a login request holds (its ``payload``): the login asked for."""

    model_config = ConfigDict(frozen=True)

    connection_id: str


class Granted(AccessRequest):
    """What granting did (the outcome's ``effects``): the login the session holds now."""


class LoginMoved(BaseModel):
    """The server and account of a login that changed since it was asked for (a stale grant's ``effects``)."""

    model_config = ConfigDict(frozen=True)

    server_url: str
    account: str


@dataclass(frozen=True)
class PreparedCall:
    """One call to make on a login's MCP server, with the credentials it goes with."""

    login_id: str
    server_url: str
    credentials: Credentials
    tool: str
    arguments: dict[str, Any]


class LoginKind(ProposalKind):
    name = "login"
    reads_proposals = True  # a request is refused while another of the same login waits (the proposals table)

    def __init__(
        self,
        box: CredentialBox,
        caller: ToolCaller,
        *,
        result_max_bytes: int = RESULT_CAP_BYTES,
        now: Callable[[], datetime] = clock,
    ) -> None:
        self.box = box
        self.caller = caller
        self.result_max_bytes = result_max_bytes
        self.now = now

    def tools(self) -> dict[str, Tool]:
        return {
            "studio_request_connection_access": Tool(RequestAccess, self.request),
            "studio_call_connection_tool": Tool(CallTool, self.call_tool),
        }

    async def request(self, call: Call, args: RequestAccess, uow: UnitOfWork) -> Proposal | Refusal:
        found = await reachable_login(call.session, args.connection_id, uow)
        if isinstance(found, Refusal):
            return found
        login = found
        if not login.connected:
            return not_connected(login)
        grant = (await store(uow).grants_of(call.message.session_id)).get(login.login_id)
        if grant is not None and grant.held(self.now()):
            return Refusal(
                409,
                "already_granted",
                f"the session holds read access to {login.login_id!r} already; call its tools with "
                "studio_call_connection_tool",
            )
        if await store(uow).pending_proposals(call.message.session_id, login.login_id):
            return Refusal(
                409, "already_requested", f"a request for read access to {login.login_id!r} waits for the operator"
            )
        return Proposal(
            action="grant",
            target=ProposalTarget(kind="login", label=login.label, ref=login.login_id),
            base=ProposalBase(hash=login.card_hash),
            proposed_hash=login.card_hash,
            reason=args.reason,
            before="",
            after=login.card_text,
            payload=AccessRequest(connection_id=login.login_id).model_dump(mode="json"),
            # A grant changes no text: the card shows the login as it is (no lines added or removed).
            fields=(CardField(name="login", before=login.card_text, after=login.card_text),),
            notes=(f"Server: {login.server_url}", f"Account: {login.account}", *login.tool_notes()),
            effects=(
                "Lets the coach call this login's read-only tools until the session closes, or for the lifetime the "
                "grant gives",
            ),
        )

    async def call_tool(self, call: Call, args: CallTool, uow: UnitOfWork) -> Output | Refusal:
        """Admit the call under the session's lock and record it for its runner (:mod:`connections.calls`), which
        calls the server with no transaction and no lock held and answers it then: :data:`PROXIED`. A call the rules
        refuse is answered at once."""
        admitted = await self.admit(call, args, uow)
        if isinstance(admitted, Refusal):
            return admitted
        await store(uow).add_call(call.message.id, call.message.session_id, call.message, current_carrier())
        return PROXIED

    async def admit(self, call: Call, args: CallTool, uow: UnitOfWork) -> tuple[Login, ToolSpec] | Refusal:
        """The login and its tool, when the session may call it now: the login reachable, granted, neither revoked
        nor lapsed, connected, the tool listed on it and read-only by the policy. Checked as the call comes, and again
        as its answer goes (a revoke, a lapse, a close or a change meanwhile refuses it)."""
        found = await reachable_login(call.session, args.connection_id, uow)
        if isinstance(found, Refusal):
            return found
        login = found
        grant = (await store(uow).grants_of(call.message.session_id)).get(login.login_id)
        if grant is None:
            return Refusal(
                403,
                "not_granted",
                f"the session holds no grant of connection {login.login_id!r}; ask the operator for it with "
                "studio_request_connection_access",
            )
        state = grant.state(self.now())
        if state == "revoked":
            assert grant.revoked_at is not None
            return Refusal(
                403,
                "grant_revoked",
                f"the session's grant of connection {login.login_id!r} was revoked by {grant.revoked_by} at "
                f"{grant.revoked_at:%Y-%m-%d %H:%M:%S} UTC",
            )
        if state == "lapsed":
            return lapsed_grant(login, grant)
        if not login.connected:
            return not_connected(login)
        tool = login.tool(args.tool)
        if tool is None:
            return Refusal(
                404,
                "unknown_tool",
                f"{args.tool!r} is not listed on connection {login.login_id!r}; its tools: {tool_names(login.tools)}",
            )
        verdict = login.verdict(tool)
        if not verdict.readable:
            return Refusal(
                403, "tool_not_read_only", f"{tool.name} is not called through a login grant: {verdict.reason}"
            )
        return login, tool

    async def prepare(self, args: CallTool, uow: UnitOfWork) -> PreparedCall | Refusal:
        """What calling the server takes: its address and the login's credentials, read now (no lock needed)."""
        login = await store(uow).get(args.connection_id)
        if login is None:
            return Refusal(404, "unknown_connection", f"connection {args.connection_id!r} does not exist any more")
        try:
            credentials = await self.credentials_of(login.login_id, uow)
        except UnreadableCredentials as exc:
            return Refusal(503, "credentials_unreadable", f"connection {login.login_id!r}: {exc}")
        return PreparedCall(login.login_id, login.server_url, credentials, args.tool, args.arguments)

    async def invoke(self, prepared: PreparedCall) -> Output | Refusal:
        """Call the tool on the server (bounded by the pool's timeout) and make its result evidence: redacted
        against the credentials the call was made with, capped, marked untrusted. Runs with no transaction open."""
        secrets = prepared.credentials.secrets()
        try:
            outcome = await self.caller.call(
                prepared.login_id,
                prepared.server_url,
                prepared.credentials.http_headers(),
                prepared.tool,
                prepared.arguments,
            )
        except ConnectionFailed as failed:
            return Refusal(failed.status, failed.code, redact([failed.message], secrets)[0])
        except Exception as exc:  # never a runner that fails, and a turn that waits on a call never answered
            failure = type(exc).__name__
            log.warning("a call of %s on connection %s failed: %s", prepared.tool, prepared.login_id, failure)
            return Refusal(502, "connection_failed", f"the call of {prepared.tool} failed ({type(exc).__name__})")
        found = evidence(
            outcome, secrets, connection_id=prepared.login_id, tool=prepared.tool, limit=self.result_max_bytes
        )
        return Output(found.model_dump(mode="json"))

    async def credentials_of(self, login_id: str, uow: UnitOfWork) -> Credentials:
        stored = await store(uow).credentials(login_id)
        return Credentials() if stored is None else self.box.decrypt(stored.token)

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        login = await store(uow).get(AccessRequest.model_validate(proposal.payload).connection_id)
        if login is None:
            return LiveView(hash=None, version=None, fields=(CardField(name="login", before=None, after=None),))
        return LiveView(
            hash=login.card_hash,
            version=None,
            fields=(CardField(name="login", before=login.card_text, after=login.card_text),),
            notes=("connected" if login.connected else "not connected", *login.tool_notes()),
        )

    async def apply(
        self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork
    ) -> Applied | Stale | Refusal:
        session = await uow.sessions.get(proposal.session_id)
        if session is None or session.closed:
            return Refusal(409, "session_closed", f"session {proposal.session_id!r} is closed; its grants ended")
        found = await reachable_login(session, AccessRequest.model_validate(proposal.payload).connection_id, uow)
        if isinstance(found, Refusal):
            return found
        login = found
        if login.card_hash != proposal.base.get("hash"):
            return Stale(
                f"the server or account of connection {login.login_id!r} changed since the coach asked; the request "
                "stays pending",
                LoginMoved(server_url=login.server_url, account=login.account).model_dump(mode="json"),
            )
        if not login.connected:
            return not_connected(login)
        lifetime = lifetime_option(decision.options)
        if isinstance(lifetime, Refusal):
            return lifetime
        via = "popover" if decision.via == "popover" else "request"
        now = self.now()
        expires_at = expiry(now, lifetime)
        await store(uow).grant(proposal.session_id, login.login_id, decision.actor, via, proposal.seq, now, expires_at)
        held = (await store(uow).grants_of(proposal.session_id)).get(login.login_id)
        until = (
            "the session"
            if held is None or held.expires_at is None
            else f"the session, until {held.expires_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        )
        return Applied(
            f"granted read access to {login.name} for {until}",
            effects=Granted(connection_id=login.login_id).model_dump(mode="json"),
        )


CALL_TOOL = "studio_call_connection_tool"


class ConnectionsKit(OwnerKit):
    """The owner kit, with two turns of its own: a proxied call the login kind admits is answered by its runner once
    this transaction has committed (``start``, :class:`connections.calls.CallRunner`), not here under the session's
    lock; and a session's grants end when it closes. It keeps every session: the Logins popover of a session answers
    whether or not a call of it came here."""

    keeps_every_session = True

    def __init__(
        self,
        service: str,
        login: LoginKind,
        start: Callable[[UUID], None],
        *,
        max_result_bytes: int = 900_000,
    ) -> None:
        super().__init__(service, [login], max_result_bytes=max_result_bytes)
        self.login = login
        self.start = start

    async def on_tool_calls(self, batch: Sequence[Received], uow: UnitOfWork) -> None:
        """The kit's answers to every call but the proxied ones, which :meth:`proxy` admits (or refuses) one by one."""
        proxied = [item for item in batch if item.message.tool == CALL_TOOL]  # type: ignore[attr-defined]  # ToolCalls
        if len(proxied) < len(batch):
            await super().on_tool_calls([item for item in batch if item.message.tool != CALL_TOOL], uow)  # type: ignore[attr-defined]  # ToolCalls
        if not proxied:
            return
        calls: list[ToolCall] = [item.message for item in proxied]  # type: ignore[misc]  # the topic carries only these
        contexts = await uow.call_contexts([(call.session_id, call.seq, call.tool_call_id) for call in calls])
        for item, call, context in zip(proxied, calls, contexts, strict=True):
            with item.span():
                await self.proxy(call, context.session, uow)

    async def on_tool_call(self, call: ToolCall, uow: UnitOfWork) -> None:
        if call.tool != CALL_TOOL:
            await super().on_tool_call(call, uow)
            return
        [context] = await uow.call_contexts([(call.session_id, call.seq, call.tool_call_id)])
        await self.proxy(call, context.session, uow)

    async def proxy(self, call: ToolCall, session: Session | None, uow: UnitOfWork) -> None:
        """Admit a proxied call and have its runner answer it after commit; or refuse it now, as the kit would."""
        if session is None and call.session is not None:
            await uow.sessions.ensure(call.session_id, call.session)
            session = await uow.sessions.get(call.session_id)
        answer: Output | Refusal
        if session is None:
            answer = Refusal(404, "unknown_session", f"session {call.session_id!r} is not open")
        elif call.session is not None and (call.session.org_id, call.session.source_guild_id) != (
            session.org_id,
            session.source_guild_id,
        ):
            answer = Refusal(409, "session_mismatch", f"the call does not match session {call.session_id!r}")
        elif session.closed:
            answer = Refusal(409, "session_closed", f"session {call.session_id!r} is closed")
        else:
            try:
                args = CallTool.model_validate(call.arguments)
            except ValidationError as exc:
                answer = invalid_arguments(call.tool, exc)
            else:
                answer = await self.login.call_tool(Call(call, session), args, uow)
        if answer is PROXIED:
            call_id, start = call.id, self.start

            async def started() -> None:
                start(call_id)

            uow.on_commit(started)
            return
        assert isinstance(answer, Refusal)  # call_tool answers PROXIED or a refusal
        await uow.emit(TOOL_RESULTS, call.session_id, self._error(call, answer))

    async def on_session_event(self, message: SessionOpened | SessionClosed, uow: UnitOfWork) -> None:
        await super().on_session_event(message, uow)
        if isinstance(message, SessionClosed):
            await store(uow).end_grants(message.session_id)
