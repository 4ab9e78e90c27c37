"""The MCP face: the coach's tools over MCP's streamable HTTP transport, at ``/mcp``.

An MCP client (a desktop app, an IDE, an agent framework) is a coach here. Its bearer token is a person's, as
on the public API (a static token of ``ASSENT_API_TOKENS`` or an access token of the OpenID Connect issuer); one MCP
session is one Assent session, opened by the tool ``studio_open_session`` with the token's user as operator and
the token's organisation (a client cannot name another). Every other tool is a tool of the kind registry
(:data:`assent.topics.TOOL_ROUTES`), listed with the argument schema its contract publishes
(``contracts/schemas/tools/<tool>.json``) and published as the same ``ToolCall`` on its owner's topic
(:class:`assent.coach.CoachClient`); the owner's ``ToolResult`` is the answer: its output or widget, or its error as a
tool error. ``studio_wait_for_decisions`` ends the coach's step and waits (bounded) for the turn's continuation,
sending progress notifications meanwhile; when its time is up first, it returns the decisions made so far (the
gateway's projection of the step's requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from assent.api import Identity
from assent.coach import CoachClient, CoachSession, CoachTurn
from assent.contracts import DecisionSummary, ToolResult
from assent.topics import TOOL_ROUTES

from .auth import Authenticator, Unauthenticated
from .settings import GatewaySettings

log = logging.getLogger(__name__)

PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"
MAX_WAIT_SECONDS = 600
PROGRESS_SECONDS = 5.0
CALL_TIMEOUT_SECONDS = 30.0
IDLE_SECONDS = 3600.0
CONNECT_WAIT_SECONDS = 10.0
"""An MCP session unused this long is ended (the SDK's idle timeout) and its Assent session forgotten here."""
IDENTITY = "assent.identity"
"""Where the authenticated person rides in the request's ASGI scope."""

OPEN_SESSION = types.Tool(
    name="studio_open_session",
    description=(
        "Open the Assent session every other tool runs in: its organisation is your token's, its operator your user, "
        "and source_guild_id the guild whose agents it works on. Call it once, first."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "source_guild_id": {"type": "string", "minLength": 1, "description": "The source guild."},
            "channel": {
                "enum": ["studio", "api", "web", "builder"],
                "default": "studio",
                "description": "Where the session runs: studio (the default), or an agent's api, web or builder chat "
                "(where the source tools are offered).",
            },
        },
        "required": ["source_guild_id"],
        "additionalProperties": False,
    },
)
WAIT = types.Tool(
    name="studio_wait_for_decisions",
    description=(
        "End the step (the requests proposed so far wait for a person) and wait, at most timeout_seconds, for the "
        "person's decisions: returns them, and whether the turn continued (every request decided)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_WAIT_SECONDS, "default": 60}
        },
        "additionalProperties": False,
    },
)


def default_schemas() -> Path | None:
    """The contracts' tool schemas: in the package where it is installed from its wheel (``gateway/tool_schemas``,
    copied from the contracts as the wheel is built), else in the checkout it runs from
    (``contracts/schemas/tools``)."""
    packaged = Path(__file__).resolve().parent / "tool_schemas"
    if packaged.is_dir():
        return packaged
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "contracts" / "schemas" / "tools"
        if candidate.is_dir():
            return candidate
    return None


def registry_tools(schemas: Path | None) -> list[types.Tool]:
    """Every tool of the kind registry, with the argument schema its contract publishes (an object of any
    arguments where the published schemas are not at hand: the owner still checks them)."""
    tools = []
    for name in sorted(TOOL_ROUTES):
        path = None if schemas is None else schemas / f"{name}.json"
        schema: dict[str, Any] = {"type": "object"}
        description = f"The tool {name} of Assent, answered by its owner."
        if path is not None and path.is_file():
            schema = json.loads(path.read_text())
            description = str(schema.pop("description", description))
            for key in ("$schema", "$id", "title"):
                schema.pop(key, None)
            # MCP wants an object at the top; a union of argument models (oneOf objects) is one too.
            schema = {"type": "object", **schema}
        tools.append(types.Tool(name=name, description=description, input_schema=schema))
    return tools


class CoachUnavailable(RuntimeError):
    """The face's coach client is not connected (yet): a tool call is answered as an error to try again."""


@dataclass
class Bound:
    """An MCP session's Assent session, and whom it is bound to."""

    identity: Identity
    session: CoachSession
    turn: CoachTurn
    used: float = field(default_factory=time.monotonic)


def text(value: Any, *, error: bool = False) -> types.CallToolResult:
    body = value if isinstance(value, str) else json.dumps(value)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=body)],
        structured_content=None if isinstance(value, str) else value,
        is_error=error,
    )


def answer(result: ToolResult) -> types.CallToolResult:
    """The owner's ``ToolResult`` as MCP's: its output, its widget (a pending request), or its error."""
    if not result.ok:
        assert result.error is not None
        return text(result.error.model_dump(mode="json"), error=True)
    if result.widget is not None:
        widget = result.widget.model_dump(mode="json")
        return text({"pending": True, "session_id": result.session_id, "seq": result.seq, "widget": widget})
    return text(result.output or {})


DecisionsSoFar = Callable[[str, str, int], Awaitable[list[DecisionSummary]]]
"""The decisions made so far of a session's paused step: ``(session_id, turn_id, step)``."""


class McpFace:
    """The MCP server, its sessions' Assent sessions, and the ASGI endpoint that authenticates each request."""

    def __init__(
        self, settings: GatewaySettings, authenticator: Authenticator, decisions_so_far: DecisionsSoFar | None = None
    ) -> None:
        self.settings = settings
        self.authenticator = authenticator
        self.decisions_so_far = decisions_so_far
        self.tools = [OPEN_SESSION, WAIT, *registry_tools(default_schemas())]
        self.names = {tool.name for tool in self.tools}
        self._coach: CoachClient | None = None  # made in :meth:`running` (its Kafka clients need the event loop)
        self.bound: dict[str, Bound] = {}
        self.server: Server[Any] = Server(
            "Assent", on_list_tools=self._list_tools, on_call_tool=self._call_tool, version="1"
        )
        self.manager = StreamableHTTPSessionManager(app=self.server, session_idle_timeout=IDLE_SECONDS)
        self.endpoint = StreamableHTTPASGIApp(self.manager)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve MCP sessions; the coach client connects in the background (a Kafka that is not up yet delays the
        face's tool calls, never the gateway's start)."""
        connecting = asyncio.create_task(self._connect(), name="mcp-face-coach")
        try:
            async with self.manager.run():
                yield
        finally:
            connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await connecting
            coach, self._coach = self._coach, None
            if coach is not None:
                await coach.stop()

    async def _connect(self) -> None:
        settings, pause = self.settings, 0.5
        while True:
            coach = CoachClient(
                settings.kafka_bootstrap_servers,
                topic_prefix=settings.topic_prefix,
                idempotent=settings.kafka_idempotence,
                client_id=f"{settings.service_name}-mcp",
                security=settings.kafka_security(),
            )
            try:
                await coach.start()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure to connect is tried again
                log.warning("the MCP face's coach client could not connect (%s); trying again", type(exc).__name__)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 10.0)
                continue
            self._coach = coach
            return

    async def coach(self) -> CoachClient:
        """The connected coach client, waiting a little for it while it connects."""
        for _ in range(int(CONNECT_WAIT_SECONDS / 0.1)):
            if self._coach is not None:
                return self._coach
            await asyncio.sleep(0.1)
        raise CoachUnavailable("the gateway is not connected to Kafka yet")

    def routes(self) -> list[Route]:
        routes = [Route(PATH, endpoint=AsgiEndpoint(self), methods=["GET", "POST", "DELETE"])]
        if self.settings.oidc_issuer:
            routes.append(Route(METADATA_PATH, endpoint=self._metadata, methods=["GET"]))
            routes.append(Route(METADATA_PATH + PATH, endpoint=self._metadata, methods=["GET"]))
        return routes

    async def _metadata(self, request: Request) -> JSONResponse:
        """The protected resource's metadata (RFC 9728), which the MCP specification's authorization points
        clients to: the issuer that grants tokens for it."""
        resource = str(request.base_url).rstrip("/") + PATH
        return JSONResponse(
            {
                "resource": resource,
                "authorization_servers": [self.settings.oidc_issuer],
                "bearer_methods_supported": ["header"],
            }
        )

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else None
        try:
            identity = await self.authenticator.identify(token)
            if not identity.may_read():
                raise Unauthenticated("the token grants no role")
        except Unauthenticated as exc:
            challenge = 'Bearer error="invalid_token"'
            if self.settings.oidc_issuer:
                challenge += f', resource_metadata="{str(request.base_url).rstrip("/")}{METADATA_PATH}{PATH}"'
            response = JSONResponse({"detail": exc.reason}, status_code=401, headers={"WWW-Authenticate": challenge})
            await response(scope, receive, send)
            return
        scope[IDENTITY] = identity
        await self.endpoint(scope, receive, send)
        if request.method == "DELETE":  # the client ended its MCP session: its Assent session is left as it is
            self.bound.pop(request.headers.get("mcp-session-id", ""), None)

    async def _list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            return await self._answer(ctx, params)
        except CoachUnavailable as exc:
            return text({"code": "unavailable", "message": f"{exc}; try again"}, error=True)

    async def _answer(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        request: Request | None = ctx.request
        if request is None or not isinstance(request.scope.get(IDENTITY), Identity):
            return text("this server answers over HTTP with a bearer token only", error=True)
        identity: Identity = request.scope[IDENTITY]
        mcp_session = request.headers.get("mcp-session-id", "")
        arguments = dict(params.arguments or {})
        if params.name not in self.names:
            return text({"code": "unknown_tool", "message": f"no tool is named {params.name!r}"}, error=True)
        if params.name == OPEN_SESSION.name:
            return await self._open(mcp_session, identity, arguments)
        bound = self.bound.get(mcp_session)
        if bound is None:
            return text({"code": "no_session", "message": "call studio_open_session first"}, error=True)
        if (bound.identity.org_id, bound.identity.user_id) != (identity.org_id, identity.user_id):
            return text({"code": "forbidden", "message": "this MCP session belongs to someone else"}, error=True)
        bound.used = time.monotonic()
        if params.name == WAIT.name:
            return await self._wait(ctx, bound, arguments)
        try:
            result = await bound.turn.call(params.name, arguments, timeout=CALL_TIMEOUT_SECONDS)
        except TimeoutError:
            return text({"code": "owner_unavailable", "message": f"no answer to {params.name} in time"}, error=True)
        return answer(result)

    async def _open(self, mcp_session: str, identity: Identity, arguments: Mapping[str, Any]) -> types.CallToolResult:
        guild, channel = arguments.get("source_guild_id"), arguments.get("channel", "studio")
        if not isinstance(guild, str) or not guild or set(arguments) - {"source_guild_id", "channel"}:
            message = "source_guild_id (a string) is required, channel optional, and nothing else"
            return text({"code": "malformed_arguments", "message": message}, error=True)
        if channel not in ("studio", "api", "web", "builder"):
            message = "channel is one of studio, api, web, builder"
            return text({"code": "malformed_arguments", "message": message}, error=True)
        if mcp_session in self.bound:
            return text(
                {"code": "session_open", "message": "this MCP session has an Assent session already"}, error=True
            )
        session = await (await self.coach()).open_session(
            org_id=identity.org_id, source_guild_id=guild, operator_user_id=identity.user_id, channel=channel
        )
        self._forget_idle()
        self.bound[mcp_session] = Bound(identity, session, session.begin_turn())
        return text({"session_id": session.session_id, "org_id": identity.org_id, "source_guild_id": guild})

    def _forget_idle(self) -> None:
        """Forget the Assent sessions of MCP sessions the SDK has ended (idle for longer than its timeout)."""
        cutoff = time.monotonic() - IDLE_SECONDS
        for key in [key for key, bound in self.bound.items() if bound.used < cutoff]:
            del self.bound[key]

    async def _wait(self, ctx: Any, bound: Bound, arguments: Mapping[str, Any]) -> types.CallToolResult:
        timeout = arguments.get("timeout_seconds", 60)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 < timeout <= MAX_WAIT_SECONDS:
            message = f"timeout_seconds is a number above 0 and at most {MAX_WAIT_SECONDS}"
            return text({"code": "malformed_arguments", "message": message}, error=True)
        turn = bound.turn
        if turn.paused_step is None or turn.paused_step in turn.continuations:
            if not turn.awaiting_operator():
                return text(
                    {"continued": True, "waiting": False, "decisions": [], "text": "nothing waits for a person"}
                )
            await turn.end_step()
        step = turn.paused_step
        assert step is not None
        deadline = time.monotonic() + float(timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                # The continuation comes once every request of the step is decided; until then, the projection
                # says which are.
                so_far: list[DecisionSummary] = []
                if self.decisions_so_far is not None:
                    so_far = await self.decisions_so_far(bound.session.session_id, turn.turn_id, step)
                decided = [decision.model_dump(mode="json") for decision in so_far]
                return text({"continued": False, "waiting": True, "step": step, "decisions": decided})
            try:
                continuation = await turn.continuation(step=step, timeout=min(left, PROGRESS_SECONDS))
                break
            except TimeoutError:
                waited = float(timeout) - max(0.0, deadline - time.monotonic())
                with contextlib.suppress(Exception):
                    await ctx.session.report_progress(waited, float(timeout), "waiting for a person's decisions")
        decided = [decision.model_dump(mode="json") for decision in continuation.decisions]
        return text(
            {"continued": True, "waiting": False, "step": step, "text": continuation.text, "decisions": decided}
        )


class AsgiEndpoint:
    """The face as an ASGI app (a route takes a bound method for a request handler, not for an ASGI app)."""

    def __init__(self, face: McpFace) -> None:
        self.face = face

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.face.serve(scope, receive, send)
