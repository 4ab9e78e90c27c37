"""The agent frameworks' adapters (``assent.adapters``), each through its example with a scripted model against the
real services: a LangGraph graph and an OpenAI Agents SDK agent each propose a Memory edit, the request is decided
over HTTP, and the turn resumes from the continuation to the model's final answer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import httpx
import pytest

from assent.coach import CoachClient, CoachSession
from tests.conftest import OPERATOR, Stack, World, new_world, wait_for

pytestmark = pytest.mark.integration


async def open_session(coach: CoachClient, world: World) -> CoachSession:
    return await coach.open_session(org_id=world.org_id, source_guild_id=world.guild_id, operator_user_id=OPERATOR)


async def decide_when_waiting(
    http: httpx.AsyncClient, session_id: str, running: Awaitable[str], decision: str = "apply"
) -> str:
    """Decide the session's one request over HTTP once its turn waits on it, and return the turn's answer."""
    turn = asyncio.ensure_future(running)

    async def waiting() -> dict[str, Any] | None:
        if turn.done():
            turn.result()  # the turn ended (or failed) before waiting: say how
            raise AssertionError(f"the turn ended without waiting on a request: {turn.result()!r}")
        response = await http.get(f"/api/studio/sessions/{session_id}/pending")
        if response.status_code != 200 or response.json()["waiting_on"] != 1:
            return None
        tray: dict[str, Any] = response.json()
        return tray

    tray = await wait_for(waiting, timeout=60)
    assert [item["kind"] for item in tray["items"]] == ["memory"], tray
    seq = tray["items"][0]["seq"]
    decided = await http.post(f"/api/studio/sessions/{session_id}/edits/{seq}", json={"decision": decision})
    assert decided.status_code == 200, decided.text
    return await asyncio.wait_for(turn, 60)


async def test_a_langgraph_graph_resumes_from_assent_s_decision(stack: Stack) -> None:
    from examples.langgraph_coach import ScriptedChatModel, propose_with_langgraph, script

    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http, memory="Prefer short answers.\n")
        session = await open_session(coach, world)
        model = ScriptedChatModel(steps=script(world.agent_id, "Quote the order number."))
        turn = session.begin_turn()
        answer = await decide_when_waiting(http, session.session_id, propose_with_langgraph(turn, model, timeout=60))
        assert answer == "People decided: applied."
        assert model.taken == 3, "read, propose, answer: one model call each"
        assert [call.tool for call in turn.calls.values()] == ["studio_read_memory", "studio_edit_memory"]
        live = await http.get(f"/api/workspace/agents/{world.agent_id}/memory")
        assert live.json()["content"] == "Prefer short answers.\nQuote the order number.\n"


async def test_an_agents_sdk_tool_s_approval_is_assent_s_decision(stack: Stack) -> None:
    from examples.openai_agents_coach import ScriptedModel, propose_with_agents_sdk, script

    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http, memory="Prefer short answers.\n")
        session = await open_session(coach, world)
        model = ScriptedModel(script(world.agent_id, "Quote the order number."))
        turn = session.begin_turn()
        answer = await decide_when_waiting(
            http, session.session_id, propose_with_agents_sdk(turn, model, timeout=60), decision="decline"
        )
        assert answer == "People decided: declined."
        assert model.taken == 3, "read, propose, answer: one model call each"
        assert [call.tool for call in turn.calls.values()] == ["studio_read_memory", "studio_edit_memory"]
        live = await http.get(f"/api/workspace/agents/{world.agent_id}/memory")
        assert live.json()["content"] == "Prefer short answers.\n", "declined: the Memory is as it was"
