"""Guards every Assent HTTP app gets, so that no request can hold a connection forever or earn a plain-text 500.

:func:`install_guards` adds them to a FastAPI app:

- a request whose body does not arrive within ``body_timeout_seconds`` is answered 408 and its connection closed
  (:class:`HttpGuard`, the one layer of ours every request passes, which also counts and times it and opens its
  server span);
- a database that does not answer (refused or lost connections, a full pool, a server shutting down) is 503
  with ``{"detail": ..., "retry": true}`` and a ``Retry-After`` header;
- a validation error is 422 with every string made JSON-safe, even when the input held a lone surrogate;
- any other unhandled exception is 500 ``{"detail": "internal error", "error_id": ...}``; the traceback is logged
  with that id;
- a method a path does not serve is 405 whose ``Allow`` lists every method the path serves (not only one
  route's).

And the field types of request models that keep a client's mistake a 422 naming the field: :data:`Omissible` (may
be left out, never null), :data:`NoNul` (text PostgreSQL and git can hold), :data:`OneLine` (one line of it),
:data:`Identifier` (an id a client chooses) and :data:`PathId` (an id in a URL's path).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from urllib.parse import parse_qsl, urlencode

import asyncpg.exceptions
import sqlalchemy.exc
from fastapi import FastAPI, Path, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from pydantic import BeforeValidator, GetCoreSchemaHandler, GetJsonSchemaHandler, StringConstraints
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .db import database_unavailable as database_unavailable
from .metrics import HTTP_METHODS as _METHODS
from .metrics import HTTP_REQUESTS, HTTP_SECONDS

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
"""What a 503 for an unavailable database asks the client to wait before trying again."""


def install_guards(
    app: FastAPI,
    *,
    body_timeout_seconds: float = 10.0,
    trail: Callable[[str, str, int, float], None] | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    untraced: Collection[str] = (),
) -> None:
    """Add the request guard (:class:`HttpGuard`: the body timeout, the request's metrics and its server span),
    the database-outage answer, the JSON-safe 422 and the JSON 500 to ``app``.

    Call it while building the app, before it serves (Starlette refuses middleware added later).
    """
    if not body_timeout_seconds > 0:
        raise ValueError("body_timeout_seconds must be positive")
    app.add_middleware(
        HttpGuard,
        timeout_seconds=body_timeout_seconds,
        trail=trail,
        tracer_provider=tracer_provider,
        untraced=untraced,
    )
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]  # Starlette types a handler as taking any Exception
    for database_error in _DATABASE_ERRORS:
        app.add_exception_handler(database_error, _database_error)
    app.add_exception_handler(Exception, _unhandled)
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]  # as above


_SENSITIVE_QUERY_PARAMETERS = frozenset(
    {"X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "sig", "X-Goog-Signature"}
)
"""Query parameters a span records as ``REDACTED`` (OpenTelemetry's HTTP conventions)."""

_TRACE_HEADERS = frozenset({b"traceparent", b"tracestate", b"baggage"})
"""The request headers the W3C trace context and baggage propagators read."""


class HttpGuard:
    """Pure ASGI middleware, the one layer of ours that every HTTP request passes: its body timeout, its metrics
    (and trail line) and its server span, in one frame.

    **Body timeout.** The request body must arrive within ``timeout_seconds`` of the app first asking for it.
    Only while the body is incomplete (until an ``http.request`` message without ``more_body``) does a deadline
    apply to ``receive``; after that ``receive`` is passed through, so a long-lived response (server-sent events)
    still learns of a disconnect. When the deadline passes before the response started, the client gets 408 with
    ``Connection: close``, and the app sees ``http.disconnect``; whatever it sends afterwards is dropped.

    **Metrics.** ``assent_http_requests_total`` and ``assent_http_request_seconds``
    (:mod:`assent.metrics`) by method, the route's template (read from the scope once the app has answered: the
    router writes the route it matched there; ``unmatched`` when none did) and status (``0`` when the request
    ended without a response: the client left); with ``trail``, the request is also logged through it. Each
    label set's series is looked up once, then kept.

    **Server span** (with ``tracer_provider``; not for the paths in ``untraced``: probes and scrapes). The
    request continues the trace of its ``traceparent`` (or starts one, sampled as the provider's sampler says),
    and its span is current while the app runs, so that what the request publishes carries the trace on. Only a
    recorded span gets attributes (OpenTelemetry's HTTP server conventions: method, scheme, path, query, server
    address, route, status, ``error.type``) and the name ``METHOD route``; a trace that is not recorded costs its
    context and nothing more.
    """

    def __init__(
        self,
        app: ASGIApp,
        timeout_seconds: float = 10.0,
        trail: Callable[[str, str, int, float], None] | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        untraced: Collection[str] = (),
    ) -> None:
        self.app = app
        self.timeout_seconds = timeout_seconds
        self.trail = trail
        tracer = tracer_provider.get_tracer("assent.http") if tracer_provider is not None else None
        self.tracer = None if tracer is None or isinstance(tracer, trace.NoOpTracer) else tracer
        self.untraced = frozenset(untraced)
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        body_complete = False
        timed_out = False
        answered = False
        deadline: float | None = None

        async def guarded_receive() -> Message:
            nonlocal body_complete, timed_out, answered, deadline, status
            if body_complete:
                return await receive()
            if timed_out:
                return {"type": "http.disconnect"}
            if deadline is None:
                deadline = asyncio.get_running_loop().time() + self.timeout_seconds
            timeout = asyncio.timeout_at(deadline)
            try:
                async with timeout:
                    message = await receive()
            except TimeoutError:
                if not timeout.expired():
                    raise
                timed_out = True
                log.info("%s %s: the request body did not arrive in time", scope.get("method"), scope.get("path"))
                if not status:
                    answered = True
                    status = 408
                    await _send_json(
                        send,
                        408,
                        {"detail": f"the request body did not arrive within {self.timeout_seconds:g} seconds"},
                        [(b"connection", b"close")],
                    )
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_complete = True
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal status
            if answered:
                return  # the 408 went out instead
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        span: Any = None
        token: object = None
        if self.tracer is not None and scope["path"] not in self.untraced:
            span, token = self._start_span(scope)
        error: BaseException | None = None
        try:
            await self.app(scope, guarded_receive, guarded_send)
        except BaseException as exc:
            status = status or 500
            error = exc
            raise
        finally:
            seconds = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = scope["method"]
            key = (method, route, status)
            series = self._series.get(key)
            if series is None:
                if method not in _METHODS:
                    method = "other"
                series = self._series[key] = (
                    HTTP_REQUESTS.labels(method, route, str(status)),
                    HTTP_SECONDS.labels(method, route),
                )
            elif method not in _METHODS:
                method = "other"
            series[0].inc()
            series[1].observe(seconds)
            if self.trail is not None:
                self.trail(method, route, status, seconds)
            if token is not None:
                otel_context.detach(token)  # type: ignore[arg-type]  # the token attach returned
                if span.is_recording():
                    _end_span(span, scope, status, error)

    def _start_span(self, scope: Scope) -> tuple[Any, object]:
        carrier: dict[str, str] | None = None
        for name, value in scope["headers"]:
            if name in _TRACE_HEADERS:
                if carrier is None:
                    carrier = {}
                key, text = name.decode("latin-1"), value.decode("latin-1")
                carrier[key] = f"{carrier[key]},{text}" if key in carrier else text
        parent = propagate.extract(carrier) if carrier is not None else otel_context.Context()
        method = scope["method"]
        assert self.tracer is not None
        span = self.tracer.start_span(
            method if method in _METHODS else "HTTP", context=parent, kind=trace.SpanKind.SERVER
        )
        if span.is_recording():
            span.set_attributes(_http_span_attributes(scope))
        return span, otel_context.attach(trace.set_span_in_context(span, parent))


def _http_span_attributes(scope: Scope) -> dict[str, Any]:
    method = scope["method"]
    attributes: dict[str, Any] = {
        "url.scheme": scope.get("scheme", "http"),
        "http.request.method": method if method in _METHODS else "_OTHER",
        "url.path": scope["path"],
    }
    if method not in _METHODS:
        attributes["http.request.method_original"] = method
    if scope.get("http_version"):
        attributes["network.protocol.version"] = scope["http_version"]
    if scope.get("query_string"):
        query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        attributes["url.query"] = urlencode(
            [(key, "REDACTED" if key in _SENSITIVE_QUERY_PARAMETERS else value) for key, value in query]
        )
    server = scope.get("server")
    if server and server[0] is not None:
        attributes["server.address"] = server[0]
        if server[1] is not None:
            attributes["server.port"] = server[1]
    return attributes


def _end_span(span: Any, scope: Scope, status: int, error: BaseException | None) -> None:
    route = getattr(scope.get("route"), "path", None)
    if route:
        span.set_attribute("http.route", route)
        span.update_name(f"{scope['method'] if scope['method'] in _METHODS else 'HTTP'} {route}")
    if status:
        span.set_attribute("http.response.status_code", status)
    if error is not None or status == 0 or status >= 500:
        kind = type(error) if error is not None else None
        span.set_attribute(
            "error.type",
            (kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}")
            if kind is not None
            else str(status or "incomplete_response"),
        )
        span.set_status(trace.StatusCode.ERROR)
    span.end()


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    content = json.dumps(body, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(content)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": content, "more_body": False})


# --- the database is unavailable -------------------------------------------------------------------------------

_DATABASE_ERRORS: tuple[type[Exception], ...] = (
    sqlalchemy.exc.DBAPIError,  # includes OperationalError and InterfaceError
    sqlalchemy.exc.TimeoutError,  # no pooled connection came free in time
    sqlalchemy.exc.EmulatedDBAPIException,  # the driver's errors as SQLAlchemy's adapter raises them, unwrapped
    OSError,  # a refused connect, raised as it is (a handler for Exception would answer, then log it again)
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.InterfaceError,
)
"""What a handler is registered for; :func:`database_unavailable` decides whether it means an outage."""


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    if not database_unavailable(exc):
        raise exc  # a failed query, not an outage: the 500 handler answers
    return _database_unavailable(request, exc)


def _database_unavailable(request: Request, exc: BaseException) -> JSONResponse:
    log.warning(
        "%s %s: the database is unavailable (%s: %s)", request.method, request.url.path, type(exc).__name__, exc
    )
    return JSONResponse(
        {"detail": "the database is unavailable; try again shortly", "retry": True},
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


# --- everything else ------------------------------------------------------------------------------------------


async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
    if database_unavailable(exc):  # e.g. a ConnectionRefusedError straight from asyncpg's connect
        return _database_unavailable(request, exc)
    error_id = str(uuid.uuid4())
    log.error(
        "%s %s: unhandled %s (error_id %s)",
        request.method,
        request.url.path,
        type(exc).__name__,
        error_id,
        exc_info=exc,
    )
    return JSONResponse({"detail": "internal error", "error_id": error_id}, status_code=500)


# --- a method the path does not serve ------------------------------------------------------------------------


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    if exc.status_code == 405:
        allowed = _methods_at(request.app, request.url.path)
        if allowed:
            exc.headers = {**(exc.headers or {}), "Allow": ", ".join(sorted(allowed))}
    return await http_exception_handler(request, exc)


def _methods_at(app: FastAPI, path: str) -> set[str]:
    """Every method the app's document names for ``path`` (each route is its own, so a 405 names only one's)."""
    table: list[tuple[re.Pattern[str], set[str]]] | None = getattr(app.state, "methods_by_path", None)
    if table is None:
        table = [
            (compile_path(template)[0], {method.upper() for method in item})
            for template, item in app.openapi().get("paths", {}).items()
        ]
        app.state.methods_by_path = table
    return {method for pattern, methods in table if pattern.match(path) for method in methods}


# --- validation errors ----------------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_DEPTH = 32


def json_safe(value: Any, _depth: int = 0) -> Any:
    """``value`` as plain JSON that encodes as UTF-8: lone surrogates become U+FFFD, non-finite floats strings,
    anything else its ``jsonable_encoder`` form or its ``str``; structures deeper than 32 levels are cut off."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if _depth >= _MAX_DEPTH:
        return "..."
    if isinstance(value, Mapping):
        return {json_safe(str(k)): json_safe(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(item, _depth + 1) for item in value]
    if isinstance(value, BaseException):
        return json_safe(str(value))
    try:
        encoded = jsonable_encoder(value)
    except Exception:
        return json_safe(str(value))
    if isinstance(encoded, Mapping | list | tuple):
        return json_safe(encoded, _depth + 1)
    return json_safe(encoded) if isinstance(encoded, str | int | float | bool | None) else json_safe(str(encoded))


async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    try:
        return JSONResponse({"detail": json_safe(exc.errors())}, status_code=422)
    except (ValueError, RecursionError):  # never seen; a 422 without the echoed input beats a 500
        errors = [{k: json_safe(e.get(k)) for k in ("type", "loc", "msg")} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)


# --- request fields -------------------------------------------------------------------------------------------

_T = TypeVar("_T")


def _not_null(value: Any) -> Any:
    if value is None:
        raise PydanticCustomError("not_null", "may be left out, but not null")
    return value


if TYPE_CHECKING:
    Omissible = Annotated[_T | None, BeforeValidator(_not_null)]
else:  # no union at run time: an error's loc names the field alone, and the JSON Schema is X's (no null)
    Omissible = Annotated[_T, BeforeValidator(_not_null)]
"""A request field that may be left out but, when sent, holds an X: ``field: Omissible[X] = None``. An explicit
``null`` is a 422 naming the field, instead of a None handed on to code (or a NOT NULL column) that expects an X;
its JSON Schema is X's alone (no null). A field whose null means something (no guild; the default target) is
``X | None``."""


@dataclass(frozen=True)
class _TextCheck:
    """A check of text that runs before the string's own (a 422 naming the field and the character), and the
    JSON Schema ``pattern`` that says it (unless the string has a stricter pattern of its own)."""

    allowed: str
    refused: re.Pattern[str]
    pattern: str

    def check(self, value: Any) -> Any:
        found = self.refused.search(value) if isinstance(value, str) else None
        if found is None:
            return value
        code = ord(found.group())
        what = (
            "a lone surrogate, which UTF-8 cannot encode"
            if code >= 0xD800
            else "a NUL character"
            if code == 0
            else "a control character"
        )
        raise PydanticCustomError(
            "text_refused",
            "must be {allowed}: it holds {what} (U+{code}) at position {at}",
            {"allowed": self.allowed, "what": what, "code": f"{code:04X}", "at": found.start()},
        )

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema.setdefault("pattern", self.pattern)
        return json_schema


NoNul = _TextCheck("text", re.compile("[\x00\ud800-\udfff]"), r"^[^\x00]*$")
"""Free text PostgreSQL's ``text`` and git can hold: valid UTF-8 with no NUL character. Put it after the field's
length limit (``Annotated[str, Field(max_length=...), NoNul]``): it runs before the string's own checks, so the
limit is still worded as a string's."""

OneLine = _TextCheck("one line of text", re.compile("[\x00-\x1f\x7f\ud800-\udfff]"), r"^[^\x00-\x1f\x7f]*$")
"""One line of text (a title, a URL, a branch, a setting): :data:`NoNul` without any other control character;
placed as :data:`NoNul` is."""

Line = Annotated[str, OneLine]
"""A string of :data:`OneLine`, of any length."""

SPACE = r"\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""The white space ``str.strip()`` removes besides control characters, as a regular expression's class body: the
patterns of the public API's schemas name it instead of ``\\s``, whose meaning differs between JSON Schema's regular
expressions (ECMA-262), Python's and pydantic's."""

Identifier = Annotated[
    str,
    StringConstraints(
        min_length=1,
        max_length=200,
        pattern=rf"^[^\x00-\x1f\x7f{SPACE}](?:[^\x00-\x1f\x7f]*[^\x00-\x1f\x7f{SPACE}])?$",
    ),
    OneLine,
]
"""An identifier a client chooses (an org, guild or agent id, a user id): one line of 1 to 200 characters that
neither starts nor ends with white space (its JSON Schema says so: nothing is trimmed behind the client's back)."""

PathId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
"""An id in a URL's path: 1 to 200 characters, no control character."""
