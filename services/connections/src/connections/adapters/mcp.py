"""Calls to logins' MCP servers, through the official MCP Python SDK over streamable HTTP, with a pool of client
sessions per login.

An MCP client session lives inside the SDK's context managers (its transport's task group), which must be entered
and left by one task: each pooled session is held open by a task of its own (:class:`_Held`), and calls are made on
it from the caller's task. Up to ``idle_per_login`` sessions of a login wait between calls; one whose server went
away (a restart forgets its sessions) fails its next call, is dropped, and that call is made once more on a new
session: the pool survives a server restart. A login whose URL or credentials changed gets new sessions; the old
ones are closed. Every call is bounded by ``timeout`` seconds, the connection and the handshake included: a server
that does not answer in time is a :class:`ConnectionFailed` (504), never a call that waits on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, REQUEST_TIMEOUT

from ..domain.evidence import CallOutcome

log = logging.getLogger(__name__)


TRANSPORT_ERRORS = frozenset({CONNECTION_CLOSED, INVALID_REQUEST})
"""Errors of the session rather than of the call: the connection closed, or the server does not know the session
(``Session not found`` after it restarted)."""


class ConnectionFailed(Exception):
    """A call that got no answer from the server: ``status`` 504 when it did not answer in time, 502 when it could
    not be reached or broke off. The message names the server, never its credentials."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class _LateAnswers(logging.Filter):
    """Drops the SDK's report of an answer that arrived for a session already closed (its call timed out): expected
    here, and no failure of anything still running."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, anyio.BrokenResourceError | anyio.ClosedResourceError)


def quiet_sdk_logs() -> None:
    """The SDK's and its HTTP client's lines at warning and above (a line per request and per session is noise in a
    service's log), less the reports of late answers (:class:`_LateAnswers`)."""
    for name in ("httpx2", "httpcore2", "mcp.client.streamable_http"):
        logging.getLogger(name).setLevel(logging.WARNING)
    streams = logging.getLogger("mcp.client.streamable_http")
    if not any(isinstance(f, _LateAnswers) for f in streams.filters):
        streams.addFilter(_LateAnswers())


def outcome_of(result: mcp_types.CallToolResult) -> CallOutcome:
    """A tool's result as text: one part per content block; structured content as JSON when there is no block."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri} ({resource.mime_type or 'unknown type'}) not shown]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link: {block.uri}]")
        else:
            parts.append(f"[{block.type} content ({getattr(block, 'mime_type', None) or 'unknown type'}) not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return CallOutcome(tuple(parts), bool(result.is_error))


class _Held:
    """One client session, held open by a task of its own until :meth:`close`."""

    def __init__(self, url: str, headers: Mapping[str, str], timeout: float) -> None:
        self.url, self.headers, self.timeout = url, dict(headers), timeout
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        # Read the failure even when no call waits for it any more (one that timed out), so none goes unretrieved.
        self._ready.add_done_callback(lambda ready: ready.cancelled() or ready.exception())
        self._closing = asyncio.Event()
        self._task = asyncio.create_task(self._hold(), name=f"mcp-session {url}")

    async def _hold(self) -> None:
        try:
            http = httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(self.timeout))
            async with http, streamable_http_client(self.url, http_client=http) as streams:
                async with ClientSession(streams[0], streams[1], read_timeout_seconds=self.timeout) as session:
                    await session.initialize()
                    self._ready.set_result(session)
                    await self._closing.wait()
        except Exception as exc:  # a session that could not be opened, or broke off: the waiting call's failure
            if not self._ready.done():
                self._ready.set_exception(exc)
        except BaseException:
            if not self._ready.done():
                self._ready.set_exception(ConnectionError("the session was closed before it was ready"))
            raise

    async def session(self) -> ClientSession:
        return await asyncio.shield(self._ready)

    @property
    def alive(self) -> bool:
        return not self._task.done()

    async def close(self) -> None:
        self._closing.set()
        if not self._ready.done():
            self._task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(self._task), self.timeout)
        if not self._task.done():
            self._task.cancel()


class McpPool:
    """Client sessions per login, reused between calls."""

    def __init__(self, *, timeout: float, idle_per_login: int = 2) -> None:
        self.timeout = timeout
        self.idle_per_login = idle_per_login
        self._idle: dict[str, tuple[str, list[_Held]]] = {}
        """Per login: the fingerprint of its URL and headers, and its sessions waiting for a call."""

    @staticmethod
    def _fingerprint(url: str, headers: Mapping[str, str]) -> str:
        return hashlib.sha256(json.dumps([url, sorted(headers.items())]).encode()).hexdigest()

    def _take(self, login_id: str, fingerprint: str) -> tuple[_Held | None, list[_Held]]:
        """An idle session of the login for these settings, and the sessions to close (made with other ones)."""
        held_fingerprint, idle = self._idle.get(login_id, (fingerprint, []))
        if held_fingerprint != fingerprint:
            self._idle[login_id] = (fingerprint, [])
            return None, idle
        while idle:
            candidate = idle.pop()
            if candidate.alive:
                return candidate, []
        return None, []

    async def _give_back(self, login_id: str, fingerprint: str, held: _Held) -> None:
        held_fingerprint, idle = self._idle.setdefault(login_id, (fingerprint, []))
        if held_fingerprint == fingerprint and held.alive and len(idle) < self.idle_per_login:
            idle.append(held)
        else:
            await held.close()

    async def call(
        self, login_id: str, url: str, headers: Mapping[str, str], tool: str, arguments: dict[str, Any]
    ) -> CallOutcome:
        """Call ``tool`` on the login's server; :class:`ConnectionFailed` when it does not answer in time or at all."""
        fingerprint = self._fingerprint(url, headers)
        held, stale = self._take(login_id, fingerprint)
        for old in stale:
            await old.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        reused = held is not None
        while True:
            if held is None:
                held = _Held(url, headers, self.timeout)
            try:
                async with asyncio.timeout_at(deadline):
                    session = await held.session()
                    remaining = max(deadline - loop.time(), 0.001)
                    result = await session.call_tool(tool, arguments, read_timeout_seconds=remaining)
            except TimeoutError:
                await held.close()
                raise ConnectionFailed(
                    504, "connection_timeout", f"the MCP server {url} did not answer within {self.timeout:g} s"
                ) from None
            except MCPError as exc:
                if exc.code == REQUEST_TIMEOUT:
                    await held.close()
                    raise ConnectionFailed(
                        504, "connection_timeout", f"the MCP server {url} did not answer within {self.timeout:g} s"
                    ) from None
                if exc.code not in TRANSPORT_ERRORS:
                    # The server answered the call with an error: the coach reads it, as evidence like any answer.
                    await self._give_back(login_id, fingerprint, held)
                    return CallOutcome((f"the server answered with error {exc.code}: {exc.message}",), is_error=True)
                failure: Exception = exc
            except Exception as exc:  # the transport's own failures, however the SDK words them
                failure = exc
            else:
                await self._give_back(login_id, fingerprint, held)
                return outcome_of(result)
            await held.close()
            if reused and loop.time() < deadline:
                # A pooled session its server forgot (a restart) or dropped: once more, on a new session.
                held, reused = None, False
                continue
            raise ConnectionFailed(
                502, "connection_failed", f"the MCP server {url} could not be reached or broke off ({_why(failure)})"
            )

    async def close(self) -> None:
        """Close every pooled session (the service is stopping)."""
        idle, self._idle = self._idle, {}
        for _, sessions in idle.values():
            for held in sessions:
                await held.close()


def _why(exc: BaseException) -> str:
    """A failure in a few words, from the innermost exception of a group (the transport's task group raises one);
    the exception's type and text name the server at most, never a request header."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
