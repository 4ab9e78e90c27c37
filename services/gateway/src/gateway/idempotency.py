"""``Idempotency-Key`` on every decision route, Apply all and Decline all: a retried request gets the first answer
and changes nothing.

A person who sends a decision with an ``Idempotency-Key`` header (1 to 255 visible ASCII characters) claims that key
in PostgreSQL (per organisation, user and key) together with the request's fingerprint (method, path, query and
body, its JSON read as JSON, so spacing and key order do not count). The first request runs; its answer (status,
type and body) is stored with the key. Later requests with the key:

- the same request gets the stored answer again (same status and body, with ``Idempotent-Replayed: true``) and
  nothing runs;
- a different request is 422, naming the header;
- while the first is still being answered, 409 with ``retry`` (try again shortly).

A first answer of 5xx other than 504 (an outage: nothing was decided) is not kept: the key is released and a retry
runs again. A 504 (the decision was sent; its outcome was late) is kept, and a retry answers the outcome once it
has arrived (and keeps that). The answer is kept before the client reads it, so a retry sent the moment the first
answer arrived gets that answer. Keys are kept for :data:`KEEP_SECONDS`. A request without a valid bearer token passes
through untouched (the route answers 401).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from assent.api import Identity

from .auth import Unauthenticated

HEADER = "Idempotency-Key"
KEEP_SECONDS = 24 * 3600.0
"""How long a key and its first answer are kept; after that the key may be used again."""
ABANDONED_SECONDS = 600.0
"""A key whose request has not answered after this long (its gateway stopped meanwhile) may be claimed again."""
KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,255}$")

Late = Callable[[str], Awaitable[tuple[int, bytes] | None]]
"""Given the ``decision_id`` a kept 504 names, the decision's answer (status, JSON body) once its outcome has arrived,
else None."""


class Keys(Protocol):
    """Where keys and their first answers are kept (:class:`gateway.adapters.desk.KeyStore`)."""

    async def claim(
        self, who: tuple[str, str], key: str, fingerprint: str, keep_seconds: float, abandon_seconds: float
    ) -> bool: ...
    async def read(self, who: tuple[str, str], key: str) -> Any: ...
    async def answer(self, who: tuple[str, str], key: str, status: int, content_type: str, body: bytes) -> None: ...
    async def release(self, who: tuple[str, str], key: str) -> None: ...


class Identifies(Protocol):
    async def identify(self, token: str | None) -> Identity: ...


def fingerprint(method: str, path: str, query: bytes, body: bytes) -> str:
    """What makes two requests the same: method, path, query and body (JSON compared as JSON)."""
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode() if body else b""
    except ValueError:
        canonical = body
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode(), query, canonical):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


class Idempotency:
    """ASGI middleware: the rules above, on POST requests whose path matches one of ``routes``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Sequence[re.Pattern[str]],
        authenticator: Identifies,
        keys: Callable[[], AbstractAsyncContextManager[Keys]],
        late: Late,
    ) -> None:
        self.app = app
        self.routes = tuple(routes)
        self.authenticator = authenticator
        self.keys = keys  # the store, each use in a transaction of its own
        self.late = late

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Installed inside the gateway's guards (the body timeout, the outage and 500 answers), so the body it
        # reads arrives in time and an exception it passes on is answered as every other.
        if scope["type"] != "http" or scope["method"] != "POST" or not self._covers(scope["path"]):
            await self.app(scope, receive, send)
            return
        raw_key = _header(scope, _KEY_NAME)
        if raw_key is None:  # most decisions: passed on without reading another header
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value for name, value in scope["headers"]}
        key = raw_key.decode("latin-1")
        if not KEY_PATTERN.match(key):
            await _refuse(send, 422, f"the {HEADER} header must be 1 to 255 visible ASCII characters")
            return
        who = await self._person(headers.get("authorization"))
        if who is None:
            await self.app(scope, receive, send)
            return
        body, more = await _read_body(receive)
        if more is not None:  # the client went away
            return
        print_ = fingerprint(scope["method"], scope["path"], scope.get("query_string", b""), body)
        async with self.keys() as keys:
            claimed = await keys.claim(who, key, print_, KEEP_SECONDS, ABANDONED_SECONDS)
            held = None if claimed else await keys.read(who, key)
        if not claimed:
            await self._replay(send, who, key, print_, held)
            return
        await self._first(scope, body, receive, send, who, key)

    def _covers(self, path: str) -> bool:
        return any(route.match(path) for route in self.routes)

    async def _person(self, authorization: bytes | None) -> tuple[str, str] | None:
        scheme, _, token = (authorization or b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer":
            return None
        try:
            identity = await self.authenticator.identify(token.strip())
        except Unauthenticated:
            return None
        return identity.org_id, identity.user_id

    async def _first(
        self, scope: Scope, body: bytes, receive: Receive, send: Send, who: tuple[str, str], key: str
    ) -> None:
        """Run the request, pass its answer on, and keep it with the key (or release the key after an outage)."""
        sent_body = False

        async def replay_receive() -> Message:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # the body is read: what comes now is a disconnect

        status, content_type = 500, "application/json"
        chunks: list[bytes] = []
        start: Message | None = None
        kept = False

        async def keep() -> None:
            nonlocal kept
            async with self.keys() as keys:
                if status >= 500 and status != 504:
                    await keys.release(who, key)
                else:
                    await keys.answer(who, key, status, content_type, b"".join(chunks))
            kept = True

        async def capture(message: Message) -> None:
            # The answer is kept with the key before the client reads a byte of it: a client that retries the moment
            # it has the answer gets it again, never "still being answered".
            nonlocal status, content_type, start
            if message["type"] == "http.response.start":
                status, start = message["status"], message
                for name, value in message.get("headers", []):
                    if name.lower() == b"content-type":
                        content_type = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    await keep()
                    if start is not None:
                        await send(start)
                    await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": False})
            else:
                await send(message)

        try:
            await self.app(scope, replay_receive, capture)
        except BaseException:
            if not kept:
                async with self.keys() as keys:
                    await keys.release(who, key)
            raise
        if not kept:
            async with self.keys() as keys:
                await keys.release(who, key)

    async def _replay(self, send: Send, who: tuple[str, str], key: str, print_: str, held: Any) -> None:
        if held is None:  # released meanwhile (its request met an outage): the client may simply retry
            await _refuse(send, 409, f"the request with this {HEADER} did not finish; retry", retry=True)
            return
        if held["fingerprint"] != print_:
            await _refuse(send, 422, f"this {HEADER} was used for a different request")
            return
        if held["status"] is None:
            await _refuse(
                send,
                409,
                f"the request with this {HEADER} is still being answered; retry shortly",
                retry=True,
                headers=[(b"retry-after", b"1")],
            )
            return
        status, content_type, body = held["status"], held["content_type"], bytes(held["body"])
        decision_id = _decision_of(body) if status == 504 else None
        if decision_id is not None:
            arrived = await self.late(decision_id)
            if arrived is not None:
                status, body = arrived
                async with self.keys() as keys:
                    await keys.answer(who, key, status, "application/json", body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type.encode("latin-1")),
                    (b"content-length", str(len(body)).encode()),
                    (b"idempotent-replayed", b"true"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


_KEY_NAME = HEADER.lower().encode("latin-1")


def _header(scope: Scope, name: bytes) -> bytes | None:
    """The request's header ``name`` (lower case; the servers pass header names in lower case), or None."""
    for key, value in scope["headers"]:
        if key == name or key.lower() == name:
            return value  # type: ignore[no-any-return]  # the scope's headers are bytes pairs
    return None


async def _read_body(receive: Receive) -> tuple[bytes, Message | None]:
    """The request's whole body; with the message that ended it early when the client went away."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"", message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def _decision_of(body: bytes) -> str | None:
    """The ``decision_id`` a 504's body names (the decision was sent; its outcome was late)."""
    try:
        decision_id = json.loads(body).get("decision_id")
    except (ValueError, AttributeError):
        return None
    return decision_id if isinstance(decision_id, str) else None


async def _refuse(
    send: Send, status: int, detail: str, *, retry: bool = False, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """Answer with an :class:`~assent.api.Error` body (``retry``: trying again shortly may succeed)."""
    payload = json.dumps({"detail": detail, "retry": True} if retry else {"detail": detail}).encode()
    length = (b"content-length", str(len(payload)).encode())
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), length, *headers],
        }
    )
    await send({"type": "http.response.body", "body": payload})
