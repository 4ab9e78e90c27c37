"""The builder chat end to end, over real git repositories on disk: when Studio shows it and to whom (the deployed
agents' declaration of ``propose_source_change``, read by the deployer at the deployed version), who may use it,
and its one chance per reply to fix a file that fails its checks."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from assent.contracts import Requester
from assent.db import create_engine
from assent.topics import route
from tests.conftest import Stack, as_admin_of, new_world, wait_for
from tests.test_source_proposals import (
    chat,
    deploy,
    page,
    proposal_id,
    propose,
    put_repository,
    refused,
    source_world,
)

pytestmark = pytest.mark.integration

PROMPT = "You answer refund questions.\n"
UNDECLARED = {
    "agents/main/AGENT.md": PROMPT,
    "agents/main/agent.json": json.dumps({"tools": ["list_repo_files", "read_repo_file"]}) + "\n",
    "agents/sales/agent.ts": "export default { tools: ['read_repo_file'] };\n",
    "skills/refunds.md": "# Refunds\n",
    "amodal.json": '{"name": "ada"}\n',
}
STORE = json.dumps({"name": "orders", "entity": {"name": "Order", "key": "{id}", "schema": {"id": {"type": "string"}}}})


async def shown(http: httpx.AsyncClient, agent_id: str) -> dict[str, Any]:
    response = await http.get(f"/api/agents/{agent_id}/builder-chat")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def commit_and_deploy(http: httpx.AsyncClient, agent_id: str, files: dict[str, str | None]) -> str:
    response = await http.post(
        f"/api/workspace/agents/{agent_id}/repository/commits", json={"files": files, "message": "by hand"}
    )
    assert response.status_code == 201, response.text
    return (await deploy(http, agent_id))["source_version"]  # type: ignore[no-any-return]


async def test_the_builder_chat_shows_for_a_declaring_deployment_or_a_proposal_from_chat(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http, UNDECLARED)
        answer = await shown(http, world.agent_id)
        assert answer["shown"] is False and "for no agent" in answer["reason"], answer
        assert answer["declared_in"] == [] and answer["has_chat_proposal"] is False

        # a named agent's agent.ts, committed but not deployed: the deployed version is what counts
        ts = "export default {\n  // tools: []\n  tools: ['read_repo_file', 'propose_source_change'],\n};\n"
        response = await http.post(
            f"/api/workspace/agents/{world.agent_id}/repository/commits",
            json={"files": {"agents/sales/agent.ts": ts}, "message": "let sales propose"},
        )
        assert response.status_code == 201, response.text
        assert (await shown(http, world.agent_id))["shown"] is False
        version = (await deploy(http, world.agent_id))["source_version"]
        answer = await shown(http, world.agent_id)
        assert answer["shown"] is True and answer["source_version"] == version
        assert answer["declared_in"] == [{"agent": "sales", "path": "agents/sales/agent.ts"}]
        assert "agents/sales/agent.ts" in answer["reason"]

        # the main agent's agent.json counts only beside a prompt that is not empty
        declares = json.dumps({"tools": ["list_repo_files", "read_repo_file", "propose_source_change"]})
        await commit_and_deploy(
            http,
            world.agent_id,
            {"agents/sales/agent.ts": None, "agents/main/agent.json": declares, "agents/main/AGENT.md": "\n"},
        )
        answer = await shown(http, world.agent_id)
        assert answer["shown"] is False and answer["declared_in"] == [], answer
        await commit_and_deploy(http, world.agent_id, {"agents/main/AGENT.md": PROMPT})
        answer = await shown(http, world.agent_id)
        assert answer["declared_in"] == [{"agent": "main", "path": "agents/main/agent.json"}], answer

        # a deployment that recorded no source version declares nothing
        await deploy(http, world.agent_id, records_version=False)
        answer = await shown(http, world.agent_id)
        assert answer["shown"] is False and "redeploy" in answer["reason"], answer

        # ... until the agent has a proposal from chat
        await deploy(http, world.agent_id)
        await commit_and_deploy(http, world.agent_id, {"agents/main/agent.json": UNDECLARED["agents/main/agent.json"]})
        assert (await shown(http, world.agent_id))["shown"] is False
        session = await chat(coach, world)
        proposal_id(await propose(session, world.agent_id, {"skills/refunds.md": "# Refunds\nConfirm first.\n"}))
        answer = await shown(http, world.agent_id)
        assert answer["shown"] is True and answer["has_chat_proposal"] is True
        assert "proposal from chat" in answer["reason"]


async def test_a_new_blank_agent_that_may_propose_changes_to_itself_gets_both_main_files(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        await put_repository(http, world.agent_id, {"mode": "hosted", "propose_changes_to_itself": True})
        await deploy(http, world.agent_id)
        answer = await shown(http, world.agent_id)
        assert answer["shown"] is True and answer["declared_in"] == [
            {"agent": "main", "path": "agents/main/agent.json"}
        ]
        turn = (await chat(coach, world, channel="builder")).begin_turn()
        listed = await turn.call("list_repo_files", {"agent_id": world.agent_id})
        assert listed.ok and listed.output is not None, listed
        contents = listed.output["contents"]
        assert sorted(contents) == ["agents/main/AGENT.md", "agents/main/agent.json"]
        assert json.loads(contents["agents/main/agent.json"]) == {
            "tools": ["list_repo_files", "read_repo_file", "propose_source_change"]
        }
        assert "propose_source_change" in contents["agents/main/AGENT.md"]

        url = f"/api/workspace/agents/{world.agent_id}/repository"
        clash = {"mode": "hosted", "files": {"agents/main/AGENT.md": PROMPT}, "propose_changes_to_itself": True}
        response = await http.put(url, json=clash)
        assert response.status_code == 422 and "agents/main/AGENT.md" in response.text, response.text
        external = {"mode": "external", "url": "file:///none", "provider": "github", "propose_changes_to_itself": True}
        response = await http.put(url, json=external)  # an external source's files live in its remote
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"] == ["body", "external", "propose_changes_to_itself"]


async def test_only_people_who_may_edit_the_source_see_it_and_organisations_are_walls(stack: Stack) -> None:
    async with stack.http() as http:
        world = await source_world(http)  # its main agent declares the tool
        editor = "eve@acme.example"
        roles = await http.put(
            f"/api/workspace/agents/{world.agent_id}/roles", json={"owners": [], "editors": [editor]}
        )
        assert roles.status_code == 200, roles.text
        assert (await shown(http, world.agent_id))["shown"] is True  # admin

        async def as_(user: str, role: str) -> dict[str, Any]:
            as_admin_of(http, world.org_id, user=user, roles=(role,))
            return await shown(http, world.agent_id)

        assert (await as_("dev@acme.example", "developer"))["shown"] is True
        for user, role in (("rita@acme.example", "reviewer"), ("vic@acme.example", "viewer")):
            answer = await as_(user, role)
            assert answer["shown"] is False and "permission to edit the agent's source" in answer["reason"], answer

        async def editor_sees() -> bool:
            return bool((await as_(editor, "viewer"))["shown"])

        await wait_for(editor_sees)  # once the gateway's copy of the workspace holds the new editor

        as_admin_of(http, f"org_other_{uuid.uuid4().hex[:6]}")
        assert (await http.get(f"/api/agents/{world.agent_id}/builder-chat")).status_code == 404
        as_admin_of(http, f"org_other_{uuid.uuid4().hex[:6]}", user="vic@acme.example", roles=("viewer",))
        assert (await http.get(f"/api/agents/{world.agent_id}/builder-chat")).status_code == 404
        as_admin_of(http, world.org_id)
        missing = await http.get("/api/agents/agent_nobody/builder-chat")
        assert missing.status_code == 404, missing.text


async def test_a_builder_call_whose_requester_cannot_edit_the_source_is_refused(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        for requester, words in (
            (Requester(user_id=None), "API key"),
            (Requester(user_id="user_x", email="x@other.example", org_id="org_elsewhere"), "user_x"),
        ):
            builder = await chat(coach, world, channel="builder", requester=requester)
            turn = builder.begin_turn()
            refused(await turn.call("list_repo_files", {"agent_id": world.agent_id}), "builder_not_allowed", words)
            refused(await propose(builder, world.agent_id, {"stores/orders.json": STORE}), "builder_not_allowed")
        assert (await page(http, world.agent_id))["counts"] == {"waiting": 0, "decided": 0}
        builder = await chat(coach, world, channel="builder")  # a person of the organisation
        assert proposal_id(await propose(builder, world.agent_id, {"stores/orders.json": STORE}))


async def failed_calls(stack: Stack, session_id: str) -> dict[str, list[str]]:
    engine = create_engine(stack.database_url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT turn_id, failed_calls FROM deployer.chat_turns WHERE session_id = :s"), {"s": session_id}
            )
            return {row.turn_id: list(row.failed_calls) for row in rows}
    finally:
        await engine.dispose()


async def test_the_builder_gets_one_chance_per_reply_to_fix_a_file(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        builder = await chat(coach, world, channel="builder")
        turn = builder.begin_turn()

        async def call(files: dict[str, str]) -> Any:
            body = [{"path": p, "content": c} for p, c in files.items()]
            return await turn.call(
                "propose_source_change", {"agent_id": world.agent_id, "files": body, "reason": "a store"}
            )

        first = await call({"stores/orders.json": json.dumps({"name": "orders"})})
        refused(first, "invalid_format", "stores/orders.json", "not a valid store file", "one more try")
        assert first.error is not None and not first.error.message.startswith("nothing was proposed")
        second = await call({"stores/orders.json": "{not json"})
        refused(second, "invalid_json", "stores/orders.json", "one chance")
        assert second.error is not None and second.error.message.startswith("nothing was proposed: ")
        third = await call({"amodal/stores/orders.json": STORE})  # this agent loads stores/ from the top level
        refused(third, "wrong_location", "stores/orders.json")
        assert third.error is not None and third.error.message.startswith("nothing was proposed: ")
        assert (await page(http, world.agent_id))["counts"] == {"waiting": 0, "decided": 0}

        # the first failing call sent again (a new envelope, the same call) keeps its answer and changes nothing
        call_one = turn.calls[first.tool_call_id]
        again = call_one.model_copy(update={"id": uuid.uuid4()})
        coach.forget_result(call_one.tool_call_id)
        waiting = coach.expect_result(call_one.tool_call_id)
        await coach.publish(route("propose_source_change"), again.session_id, again)
        replay = await asyncio.wait_for(waiting, 15)
        assert replay.error is not None and first.error is not None and replay.error.message == first.error.message
        assert await failed_calls(stack, builder.session_id) == {
            turn.turn_id: [first.tool_call_id, second.tool_call_id, third.tool_call_id]
        }

        # a new reply gets a new chance, and its fix is proposed
        turn = builder.begin_turn()
        retry = await call({"evals/refund.json": json.dumps({"name": "r", "query": "q", "assertions": []})})
        refused(retry, "invalid_format", "evals/refund.json", "one more try")
        fixed = await call({"stores/orders.json": STORE})
        assert proposal_id(fixed)
        assert (await page(http, world.agent_id))["counts"] == {"waiting": 1, "decided": 0}
        assert (await failed_calls(stack, builder.session_id))[turn.turn_id] == [retry.tool_call_id]
