"""The MCP face (``/mcp`` on the gateway), driven by the MCP SDK's own client: a whole turn, and its refusals. Real
Kafka, PostgreSQL and Redis, services as processes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tests.conftest import TOKEN, Stack, new_world, wait_for
from tests.issuer import test_issuer

pytestmark = pytest.mark.integration


@asynccontextmanager
async def mcp_client(stack: Stack, token: str) -> AsyncIterator[ClientSession]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(60))
    async with http, streamable_http_client(f"{stack.gateway_url}/mcp", http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            yield session


def body(result: CallToolResult) -> Any:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return json.loads(block.text)


async def test_a_whole_turn_over_mcp(stack: Stack) -> None:
    async with stack.http() as http:
        world = await new_world(http, memory="Prefer short answers.\n")
        token = http.headers["Authorization"].removeprefix("Bearer ")  # the issuer's access token of world's admin
        async with mcp_client(stack, token) as mcp:
            tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
            assert {"studio_open_session", "studio_wait_for_decisions", "studio_edit_memory"} <= set(tools)
            assert {"read_repo_file", "propose_source_change"} <= set(tools), "the source tools"
            published = json.loads((stack_root() / "contracts/schemas/tools/studio_edit_memory.json").read_text())
            assert tools["studio_edit_memory"].input_schema["properties"] == published["properties"]

            refused = await mcp.call_tool("studio_read_memory", {"agent_id": world.agent_id})
            assert refused.is_error and body(refused)["code"] == "no_session"
            opened = body(await mcp.call_tool("studio_open_session", {"source_guild_id": world.guild_id}))
            assert opened["org_id"] == world.org_id
            session_id = opened["session_id"]

            read = await mcp.call_tool("studio_read_memory", {"agent_id": world.agent_id})
            assert not read.is_error, read.content
            memory = body(read)
            assert memory["content"] == "Prefer short answers.\n"

            bad = await mcp.call_tool("studio_edit_memory", {"agent_id": world.agent_id, "content": 7})
            assert bad.is_error and body(bad)["code"] == "invalid_arguments", body(bad)
            assert "content: Input should be a valid string" in body(bad)["message"]

            proposed = await mcp.call_tool(
                "studio_edit_memory",
                {
                    "agent_id": world.agent_id,
                    "content": "Prefer short answers.\nQuote the order number.\n",
                    "base_version": memory["version"],
                    "reason": "Refund threads got mixed up.",
                },
            )
            assert not proposed.is_error, proposed.content
            pending = body(proposed)
            assert pending["pending"] and pending["widget"]["await_operator"]

            early = body(await mcp.call_tool("studio_wait_for_decisions", {"timeout_seconds": 0.5}))
            assert early == {"continued": False, "waiting": True, "step": 0, "decisions": []}, early
            too_long = await mcp.call_tool("studio_wait_for_decisions", {"timeout_seconds": 601})
            assert too_long.is_error and body(too_long)["code"] == "malformed_arguments"

            progress: list[float] = []

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                progress.append(done)

            waiting = asyncio.create_task(
                mcp.call_tool("studio_wait_for_decisions", {"timeout_seconds": 60}, progress_callback=on_progress)
            )

            async def decided() -> bool:
                response = await http.get(f"/api/studio/sessions/{session_id}/pending")
                if response.status_code != 200 or response.json()["waiting_on"] != 1:
                    return False
                seq = pending["seq"]
                decision = await http.post(f"/api/studio/sessions/{session_id}/edits/{seq}", json={"decision": "apply"})
                assert decision.status_code == 200, decision.text
                return True

            await asyncio.sleep(6)  # one progress notification at least
            await wait_for(decided)
            done = body(await waiting)
            assert done["continued"] is True
            assert [d["outcome"] for d in done["decisions"]] == ["applied"], done
            assert progress, "progress was reported while waiting"
            live = await http.get(f"/api/workspace/agents/{world.agent_id}/memory")
            assert live.json()["content"] == "Prefer short answers.\nQuote the order number.\n"


async def test_a_wait_that_times_out_returns_the_decisions_made_so_far(stack: Stack) -> None:
    async with stack.http() as http:
        world = await new_world(http)
        token = http.headers["Authorization"].removeprefix("Bearer ")
        async with mcp_client(stack, token) as mcp:
            session_id = body(await mcp.call_tool("studio_open_session", {"source_guild_id": world.guild_id}))[
                "session_id"
            ]
            proposed = []
            for agent_id in (world.agent_id, world.other_agent_id):
                memory = body(await mcp.call_tool("studio_read_memory", {"agent_id": agent_id}))
                arguments = {
                    "agent_id": agent_id,
                    "content": memory["content"] + "Quote the order number.\n",
                    "base_version": memory["version"],
                    "reason": "Refund threads got mixed up.",
                }
                proposed.append(body(await mcp.call_tool("studio_edit_memory", arguments)))
            first, second = (request["seq"] for request in proposed)

            nothing_yet = body(await mcp.call_tool("studio_wait_for_decisions", {"timeout_seconds": 0.5}))
            assert nothing_yet == {"continued": False, "waiting": True, "step": 0, "decisions": []}, nothing_yet

            async def decide(seq: int, decision: str) -> bool:
                response = await http.post(
                    f"/api/studio/sessions/{session_id}/edits/{seq}", json={"decision": decision}
                )
                return response.status_code == 200

            await wait_for(lambda: decide(first, "decline"))

            async def one_decided() -> dict[str, Any] | None:
                waited = body(await mcp.call_tool("studio_wait_for_decisions", {"timeout_seconds": 0.2}))
                return waited if waited["decisions"] else None

            so_far = await wait_for(one_decided)
            assert so_far["continued"] is False and so_far["waiting"] is True and so_far["step"] == 0, so_far
            assert [(d["seq"], d["outcome"]) for d in so_far["decisions"]] == [(first, "declined")], so_far

            await wait_for(lambda: decide(second, "apply"))
            done = body(await mcp.call_tool("studio_wait_for_decisions", {"timeout_seconds": 60}))
            assert done["continued"] is True
            assert [(d["seq"], d["outcome"]) for d in done["decisions"]] == [(first, "declined"), (second, "applied")]


async def test_refusals_no_token_and_another_organisation(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=30) as raw:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        accept = {"Accept": "application/json, text/event-stream"}
        assert (await raw.post("/mcp", json=ping, headers=accept)).status_code == 401
        forged = {**accept, "Authorization": "Bearer not-a-token"}
        refused = await raw.post("/mcp", json=ping, headers=forged)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        # The MCP specification's authorization: the challenge names the resource's metadata, which names the issuer.
        assert "/.well-known/oauth-protected-resource/mcp" in refused.headers["www-authenticate"]
        metadata = (await raw.get("/.well-known/oauth-protected-resource/mcp")).json()
        assert metadata["resource"].endswith("/mcp") and metadata["authorization_servers"] == [test_issuer().url]
    async with stack.http() as http:
        world = await new_world(http)
    # TOKEN is an admin of another organisation: its session is its own organisation's, and the owner refuses
    # the world's guild and agent there.
    async with mcp_client(stack, TOKEN) as mcp:
        opened = body(await mcp.call_tool("studio_open_session", {"source_guild_id": world.guild_id}))
        assert opened["org_id"] != world.org_id
        read = await mcp.call_tool("studio_read_memory", {"agent_id": world.agent_id})
        assert read.is_error, read.content
        assert world.org_id not in json.dumps(body(read))
        guild = await mcp.call_tool("studio_read_guild", {})  # the session's source guild is the world's
        assert guild.is_error and body(guild)["code"] == "unknown_guild", guild.content
        assert "Support" not in json.dumps(body(guild))


def stack_root() -> Path:
    return Path(__file__).resolve().parents[1]
