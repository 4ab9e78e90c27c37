"""The HTTP guards, against a real uvicorn server in this process: body timeout, outages, 500s and 422s as JSON."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
import sqlalchemy.exc
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from assent.contracts import Id, Text
from assent.http import database_unavailable, install_guards, json_safe

BODY_TIMEOUT = 0.5


class Named(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Id
    memory: Text = ""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def build_app() -> tuple[FastAPI, asyncio.Event]:
    app = FastAPI()
    install_guards(app, body_timeout_seconds=BODY_TIMEOUT)
    stream_ended = asyncio.Event()

    @app.post("/named")
    async def named(body: Named) -> Named:
        return body

    @app.put("/named")  # a second route of the same path: a method neither serves is 405 naming both
    async def rename(body: Named) -> Named:
        return body

    @app.get("/operational")
    async def operational() -> None:
        raise sqlalchemy.exc.OperationalError("SELECT 1", {}, ConnectionRefusedError(111, "refused"))

    @app.get("/refused")
    async def refused() -> None:
        engine = create_async_engine(f"postgresql+asyncpg://u:p@127.0.0.1:{_closed_port()}/x")
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        finally:
            await engine.dispose()

    @app.get("/integrity")
    async def integrity() -> None:
        raise sqlalchemy.exc.IntegrityError("INSERT", {}, Exception("duplicate key"))

    @app.get("/key")
    async def key() -> None:
        raise KeyError("missing")

    @app.post("/stream")
    async def stream(request: Request) -> StreamingResponse:
        received = await request.body()

        async def events() -> AsyncIterator[str]:
            # Outlive the body timeout many times over. Starlette stops the stream when ``receive`` says the
            # client left (the listener it runs beside the stream), else the loop sees it here.
            try:
                yield f"event: ready\ndata: {json.dumps({'bytes': len(received)})}\n\n"
                for n in range(200):
                    if await request.is_disconnected():
                        return
                    yield f"event: tick\ndata: {n}\n\n"
                    await asyncio.sleep(0.05)
            finally:
                stream_ended.set()

        return StreamingResponse(events(), media_type="text/event-stream")

    return app, stream_ended


@contextlib.asynccontextmanager
async def serving(app: FastAPI, http: str = "httptools") -> AsyncIterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", http=http, ws="none", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            while not server.started:  # noqa: ASYNC110 (uvicorn offers a flag, not an event)
                await asyncio.sleep(0.01)
        yield port
    finally:
        server.should_exit = True
        await task
        sock.close()


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[tuple[str, asyncio.Event]]:
    app, stream_ended = build_app()
    async with serving(app) as port:
        yield f"http://127.0.0.1:{port}", stream_ended


async def _raw_exchange(port: int, request: bytes, wait: float = 10.0) -> tuple[bytes, float]:
    """Send ``request`` and read until the server closes the connection; the answer and how long it took."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = asyncio.get_running_loop().time()
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(wait):
            answer = await reader.read()  # until EOF: the server must close the connection
        return answer, asyncio.get_running_loop().time() - started
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def _split(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_a_body_that_does_not_arrive_is_answered_408_and_closed(http: str) -> None:
    app, _ = build_app()
    async with serving(app, http) as port:
        request = (
            b"POST /named HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            b'{"name": "'  # 10 of the 100 bytes promised
        )
        answer, elapsed = await _raw_exchange(port, request)
    status, headers, body = _split(answer)
    assert status == 408, answer
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert "did not arrive" in json.loads(body)["detail"]
    assert BODY_TIMEOUT * 0.9 <= elapsed < 10


async def test_a_body_that_arrives_in_parts_within_the_timeout_is_served(
    server: tuple[str, asyncio.Event],
) -> None:
    port = int(server[0].rsplit(":", 1)[1])
    body = b'{"name": "ada"}'
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            b"POST /named HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:5]
        )
        await writer.drain()
        await asyncio.sleep(BODY_TIMEOUT / 3)
        writer.write(body[5:])
        await writer.drain()
        async with asyncio.timeout(10):
            answer = await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    status, _, response_body = _split(answer)
    assert status == 200, answer
    assert json.loads(response_body) == {"name": "ada", "memory": ""}


async def test_a_stream_outlives_the_body_timeout_and_still_sees_the_client_leave(
    server: tuple[str, asyncio.Event],
) -> None:
    url, stream_ended = server
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        async with client.stream("POST", "/stream", content=b"x" * 1000) as response:
            assert response.status_code == 200
            ticks = 0
            async for line in response.aiter_lines():
                if line.startswith("data: {"):
                    assert json.loads(line[len("data: ") :]) == {"bytes": 1000}
                if line.startswith("event: tick"):
                    ticks += 1
                if ticks == 25:  # 25 * 0.05 s: well past the body timeout
                    break
    async with asyncio.timeout(10):
        await stream_ended.wait()


@pytest.mark.parametrize("path", ["/operational", "/refused"])
async def test_an_unavailable_database_is_503_json_with_retry_after(
    server: tuple[str, asyncio.Event], path: str
) -> None:
    async with httpx.AsyncClient(base_url=server[0], timeout=10) as client:
        response = await client.get(path)
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"].isdigit()
    assert response.json()["retry"] is True
    assert "database is unavailable" in response.json()["detail"]


@pytest.mark.parametrize("path", ["/key", "/integrity"])
async def test_any_other_error_is_500_json_with_an_error_id_in_the_log(
    server: tuple[str, asyncio.Event], path: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="assent.http"):
        async with httpx.AsyncClient(base_url=server[0], timeout=10) as client:
            response = await client.get(path)
    assert response.status_code == 500, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["detail"] == "internal error"
    uuid.UUID(body["error_id"])
    logged = [r for r in caplog.records if r.name == "assent.http" and body["error_id"] in r.getMessage()]
    assert logged and logged[0].exc_info is not None


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b'{"name": "\\ud800"}', ["body", "name"]),
        (b'{"name": "ada", "memory": "a\\udfffb"}', ["body", "memory"]),
        (b'{"name": "ada", "\\ud800": 1}', ["body"]),  # pydantic cannot read the key at all
    ],
)
async def test_text_with_a_lone_surrogate_is_422_json(
    server: tuple[str, asyncio.Event], raw: bytes, where: list[str]
) -> None:
    async with httpx.AsyncClient(base_url=server[0], timeout=10) as client:
        response = await client.post("/named", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    assert [e["loc"] for e in errors] == [where]
    if where != ["body"]:
        assert "lone surrogate" in errors[0]["msg"]


async def test_a_non_finite_number_in_a_validation_error_is_422_json(server: tuple[str, asyncio.Event]) -> None:
    async with httpx.AsyncClient(base_url=server[0], timeout=10) as client:
        response = await client.post("/named", content=b'{"name": NaN}', headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["input"] == "nan"


async def test_a_method_the_path_does_not_serve_is_405_allowing_every_method_it_serves(
    server: tuple[str, asyncio.Event],
) -> None:
    async with httpx.AsyncClient(base_url=server[0], timeout=10) as client:
        response = await client.delete("/named")
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == "POST, PUT" and response.json() == {"detail": "Method Not Allowed"}


def test_database_unavailable_tells_outages_from_failed_queries() -> None:
    refused = ConnectionRefusedError(111, "refused")
    assert database_unavailable(sqlalchemy.exc.OperationalError("SELECT 1", {}, refused))
    assert database_unavailable(sqlalchemy.exc.InterfaceError("SELECT 1", {}, Exception("connection is closed")))
    assert database_unavailable(sqlalchemy.exc.TimeoutError("QueuePool limit of size 10 overflow 0 reached"))
    invalidated = sqlalchemy.exc.DBAPIError("SELECT 1", {}, Exception("gone"), connection_invalidated=True)
    assert database_unavailable(invalidated)
    assert database_unavailable(asyncpg.exceptions.CannotConnectNowError("the database system is starting up"))
    assert database_unavailable(asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed"))
    wrapped = sqlalchemy.exc.DBAPIError("SELECT 1", {}, Exception("x"))
    wrapped.__cause__ = asyncpg.exceptions.TooManyConnectionsError("too many clients")
    assert database_unavailable(wrapped)

    assert not database_unavailable(sqlalchemy.exc.IntegrityError("INSERT", {}, Exception("duplicate key")))
    assert not database_unavailable(asyncpg.exceptions.UniqueViolationError("duplicate key"))
    assert not database_unavailable(refused)  # not raised by a database driver
    assert not database_unavailable(TimeoutError())
    assert not database_unavailable(KeyError("x"))


def test_json_safe_makes_anything_encodable() -> None:
    nested: list[object] = []
    for _ in range(500):
        nested = [nested]
    safe = json_safe({"a\ud800": ["\udfff", float("inf"), b"bytes", ValueError("no"), nested], "n": (1, None)})
    encoded = json.dumps(safe, allow_nan=False).encode()
    assert json.loads(encoded)["a\ufffd"][:4] == ["\ufffd", "inf", "bytes", "no"]
