"""``Idempotency-Key`` as the middleware keeps it, on a small app and an in-memory store of keys: a retry gets the first
answer and runs nothing, another request with the key is 422, a running one 409, an outage releases the key, a late
decision's retry answers its outcome; other people, paths, methods and requests without a key or token pass."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from assent.api import Identity
from gateway.auth import Unauthenticated
from gateway.idempotency import Idempotency, fingerprint


class People:
    async def identify(self, token: str | None) -> Identity:
        if token in ("olga", "ivan"):
            return Identity(token, "acme", frozenset({"admin"}))
        raise Unauthenticated("the token is not valid")


class MemoryKeys:
    """Keys as :class:`gateway.adapters.desk.KeyStore` keeps them, in a dict."""

    def __init__(self) -> None:
        self.rows: dict[tuple[tuple[str, str], str], dict[str, Any]] = {}

    async def claim(self, who: tuple[str, str], key: str, print_: str, keep: float, abandon: float) -> bool:
        if (who, key) in self.rows:
            return False
        self.rows[who, key] = {"fingerprint": print_, "status": None, "content_type": None, "body": None}
        return True

    async def read(self, who: tuple[str, str], key: str) -> dict[str, Any] | None:
        return self.rows.get((who, key))

    async def answer(self, who: tuple[str, str], key: str, status: int, content_type: str, body: bytes) -> None:
        self.rows[who, key].update(status=status, content_type=content_type, body=body)

    async def release(self, who: tuple[str, str], key: str) -> None:
        self.rows.pop((who, key), None)


class World:
    def __init__(self) -> None:
        self.keys = MemoryKeys()
        self.runs = 0
        self.answer: tuple[int, dict[str, Any]] = (200, {"outcome": "applied"})
        self.arrived: tuple[int, bytes] | None = None
        app = FastAPI()

        @app.post("/api/studio/sessions/{sid}/edits/{seq}")
        async def decide(sid: str, seq: int, request: Request) -> JSONResponse:
            self.runs += 1
            if self.answer[0] == 599:
                raise RuntimeError("the handler failed")
            status, body = self.answer
            return JSONResponse({**body, "run": self.runs, "sent": await request.json()}, status_code=status)

        @app.post("/elsewhere")
        async def elsewhere() -> dict[str, int]:
            self.runs += 1
            return {"run": self.runs}

        @contextlib.asynccontextmanager
        async def keys() -> AsyncIterator[MemoryKeys]:
            yield self.keys

        async def late(decision_id: str) -> tuple[int, bytes] | None:
            assert decision_id == "dec_1"
            return self.arrived

        routes = [re.compile(r"^/api/studio/sessions/[^/]+/edits/[^/]+$")]
        self.app = Idempotency(app, routes=routes, authenticator=People(), keys=keys, late=late)

    def client(self, token: str | None = "olga") -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app, raise_app_exceptions=False),
            base_url="http://gateway",
            headers=headers,
        )


URL = "/api/studio/sessions/s1/edits/3"
KEY = {"Idempotency-Key": "k-1"}


async def test_a_retry_gets_the_first_answer_and_runs_nothing() -> None:
    world = World()
    async with world.client() as http:
        first = await http.post(URL, json={"decision": "apply", "via": "card"}, headers=KEY)
        again = await http.post(URL, content=b'{ "via": "card",  "decision": "apply" }', headers=KEY)
    assert (first.status_code, first.json()["run"], "idempotent-replayed" in first.headers) == (200, 1, False)
    assert (again.status_code, again.json(), again.headers["idempotent-replayed"]) == (200, first.json(), "true")
    assert world.runs == 1


async def test_a_first_refusal_is_the_answer_too() -> None:
    world = World()
    world.answer = (409, {"outcome": "stale"})
    async with world.client() as http:
        first = await http.post(URL, json={"decision": "apply"}, headers=KEY)
        world.answer = (200, {"outcome": "applied"})
        again = await http.post(URL, json={"decision": "apply"}, headers=KEY)
    assert (first.status_code, again.status_code, again.json()) == (409, 409, first.json())
    assert world.runs == 1


@pytest.mark.parametrize(
    ("path", "body"),
    [(URL, {"decision": "decline"}), ("/api/studio/sessions/s1/edits/4", {"decision": "apply"})],
)
async def test_the_key_with_another_request_is_422(path: str, body: dict[str, str]) -> None:
    world = World()
    async with world.client() as http:
        assert (await http.post(URL, json={"decision": "apply"}, headers=KEY)).status_code == 200
        other = await http.post(path, json=body, headers=KEY)
    assert other.status_code == 422 and "Idempotency-Key" in other.json()["detail"]
    assert world.runs == 1


async def test_while_the_first_runs_a_retry_is_409_to_try_again() -> None:
    world = World()
    print_ = fingerprint("POST", URL, b"", b'{"decision":"apply"}')
    await world.keys.claim(("acme", "olga"), "k-1", print_, 0, 0)
    async with world.client() as http:
        running = await http.post(URL, json={"decision": "apply"}, headers=KEY)
    assert (running.status_code, running.json()["retry"], running.headers["retry-after"]) == (409, True, "1")
    assert world.runs == 0


@pytest.mark.parametrize("status", [503, 599])
async def test_an_outage_or_a_failure_releases_the_key_and_a_retry_runs(status: int) -> None:
    world = World()
    world.answer = (status, {"detail": "down"})
    async with world.client() as http:
        failed = await http.post(URL, json={"decision": "apply"}, headers=KEY)
        assert failed.status_code == (status if status < 599 else 500)
        assert world.keys.rows == {}
        world.answer = (200, {"outcome": "applied"})
        retried = await http.post(URL, json={"decision": "apply"}, headers=KEY)
    assert (retried.status_code, retried.json()["run"]) == (200, 2)


async def test_a_late_decisions_retry_answers_its_outcome_once_it_arrived() -> None:
    world = World()
    world.answer = (504, {"detail": "late", "decision_id": "dec_1"})
    async with world.client() as http:
        assert (await http.post(URL, json={"decision": "apply"}, headers=KEY)).status_code == 504
        still = await http.post(URL, json={"decision": "apply"}, headers=KEY)
        assert (still.status_code, still.json()["decision_id"]) == (504, "dec_1")
        world.arrived = (200, json.dumps({"outcome": "applied", "decision_id": "dec_1"}).encode())
        arrived = await http.post(URL, json={"decision": "apply"}, headers=KEY)
        world.arrived = None
        kept = await http.post(URL, json={"decision": "apply"}, headers=KEY)
    assert (arrived.status_code, arrived.json()["outcome"]) == (200, "applied")
    assert (kept.status_code, kept.json()) == (200, arrived.json())
    assert world.runs == 1


async def test_keys_are_each_persons_own() -> None:
    world = World()
    async with world.client("olga") as olga, world.client("ivan") as ivan:
        assert (await olga.post(URL, json={"decision": "apply"}, headers=KEY)).json()["run"] == 1
        assert (await ivan.post(URL, json={"decision": "decline"}, headers=KEY)).json()["run"] == 2


@pytest.mark.parametrize("key", [b"", b"has space", "é".encode(), b"x" * 256])
async def test_a_key_that_is_not_visible_ascii_is_422(key: bytes) -> None:
    world = World()
    async with world.client() as http:
        bad = await http.post(URL, json={"decision": "apply"}, headers={"Idempotency-Key": key})
    assert bad.status_code == 422 and "Idempotency-Key" in bad.json()["detail"]
    assert world.runs == 0


@pytest.mark.parametrize(
    ("token", "path", "headers"),
    [
        ("olga", URL, {}),  # no key
        (None, URL, KEY),  # no token: the route answers 401 itself
        ("nope", URL, KEY),
        ("olga", "/elsewhere", KEY),  # not a decision route
    ],
)
async def test_what_the_middleware_does_not_cover_runs_every_time(
    token: str | None, path: str, headers: dict[str, str]
) -> None:
    world = World()
    async with world.client(token) as http:
        for _ in range(2):
            await http.post(path, json={"decision": "apply"}, headers=headers)
    assert world.runs == 2 and world.keys.rows == {}


def test_the_fingerprint_reads_json_as_json() -> None:
    same = fingerprint("POST", URL, b"", b'{"a": 1, "b": [1, 2]}')
    assert same == fingerprint("POST", URL, b"", b'{"b":[1,2],"a":1}')
    assert same != fingerprint("POST", URL, b"", b'{"a": 2, "b": [1, 2]}')
    assert same != fingerprint("POST", URL, b"x=1", b'{"a": 1, "b": [1, 2]}')
    assert fingerprint("POST", URL, b"", b"not json") != fingerprint("POST", URL, b"", b"not  json")


async def test_the_answer_is_kept_before_the_client_reads_it() -> None:
    """A client that retries the moment the first answer arrives must get that answer, not "still being answered": the
    key holds the answer by the time the response starts."""
    world = World()
    seen: list[Any] = []

    async def client_send(message: Any) -> None:
        if message["type"] == "http.response.start":
            seen.append(dict(world.keys.rows[("acme", "olga"), "k-1"]))

    body = json.dumps({"decision": "apply", "via": "card"}).encode()
    received = iter([{"type": "http.request", "body": body, "more_body": False}])

    async def client_receive() -> Any:
        return next(received, {"type": "http.disconnect"})

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": URL,
        "raw_path": URL.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"authorization", b"Bearer olga"),
            (b"idempotency-key", b"k-1"),
            (b"content-type", b"application/json"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("gateway", 80),
    }
    await world.app(scope, client_receive, client_send)
    assert len(seen) == 1 and seen[0]["status"] == 200 and json.loads(seen[0]["body"])["run"] == 1
