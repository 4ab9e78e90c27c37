"""The HTTP guards of the running gateway: text UTF-8 cannot hold is 422, a body that never arrives is 408."""

from __future__ import annotations

import asyncio
import contextlib
import json
from urllib.parse import urlsplit

import pytest

from tests.conftest import TOKEN, Stack

pytestmark = pytest.mark.integration

JSON = {"Content-Type": "application/json"}


async def test_an_org_name_with_a_lone_surrogate_is_422(stack: Stack) -> None:
    raw = b'{"org_id": "o", "name": "\\ud800"}'  # the JSON escape a client sends; it decodes to a lone surrogate
    async with stack.http() as http:
        response = await http.post("/api/workspace/orgs", content=raw, headers=JSON)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "name"]
    assert "lone surrogate" in error["msg"]


async def test_memory_content_with_a_lone_surrogate_is_422(stack: Stack) -> None:
    raw = b'{"content": "Prefer short answers.\\n\\ud800 and more"}'
    async with stack.http() as http:
        response = await http.put("/api/workspace/agents/x/memory", content=raw, headers=JSON)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "content"]
    assert "lone surrogate" in error["msg"]


async def test_a_body_shorter_than_its_content_length_is_408_and_closed(stack: Stack) -> None:
    url = urlsplit(stack.gateway_url)
    assert url.hostname is not None and url.port is not None
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        writer.write(
            b"POST /api/workspace/orgs HTTP/1.1\r\n"
            + f"Host: {url.netloc}\r\nAuthorization: Bearer {TOKEN}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            + b'{"org_id":'  # 10 of the 100 bytes promised, and no more
        )
        await writer.drain()
        async with asyncio.timeout(20):
            answer = await reader.read()  # until the gateway closes the connection
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n", 1)[0].split()[1] == b"408", answer
    assert b"connection: close" in head.lower()
    assert "did not arrive" in json.loads(body)["detail"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/workspace/agents/%3F%3F%3E"),
        ("GET", "/api/workspace/agents/a%2Fb/memory"),
        ("DELETE", "/api/workspace/orgs/%3F%3F%3E/note?path=org/x.md"),
        ("GET", "/api/workspace/guilds/%23frag"),
        ("GET", "/api/agents/%3Fq%3D1/proposals"),
    ],
)
async def test_an_id_with_url_syntax_is_forwarded_as_one_segment(stack: Stack, method: str, path: str) -> None:
    """An id holding ``?``, ``#`` or ``/`` reaches the owner as one path segment (percent-encoded), and its
    answer (no such entity) comes back as a client error, never as a server error."""
    async with stack.http() as http:
        response = await http.request(method, path)
    assert response.status_code == 404, response.text
    assert response.json()["detail"]
