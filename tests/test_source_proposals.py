"""Source proposals end to end: the deployer over real git repositories on disk (a hosted bare repository, and an
external one reached through a real ``file://`` remote), the gateway's Proposals page, decisions and activity."""

from __future__ import annotations

import json
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from assent.coach import CoachClient, CoachSession
from assent.contracts import Requester, ToolResult
from tests.conftest import OPERATOR, Stack, World, as_admin_of, new_world, wait_for
from tests.issuer import test_issuer

pytestmark = pytest.mark.integration

FILES = {
    "agents/main/AGENT.md": "You answer refund questions.\n",
    "agents/main/agent.json": '{"tools": ["list_repo_files", "read_repo_file", "propose_source_change"]}\n',
    "skills/refunds.md": "# Refunds\n\nRefund within 30 days.\n",
    "knowledge/policy.md": "Refunds take 5 days.\n",
    "tools/lookup/tool.json": '{"name": "lookup"}\n',
    "tools/lookup/index.ts": "export default () => 1;\n",
    "amodal.json": '{"name": "ada"}\n',
    "package.json": '{"name": "ada"}\n',
}
USER = "sam@acme.example"


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def hosted_path(stack: Stack, agent_id: str) -> Path:
    return Path(tempfile.gettempdir()) / "assent-deployer" / stack.prefix.strip(".") / f"{agent_id}.git"


async def put_repository(http: httpx.AsyncClient, agent_id: str, body: dict[str, Any]) -> dict[str, Any]:
    async def attempt() -> httpx.Response | None:
        response = await http.put(f"/api/workspace/agents/{agent_id}/repository", json=body)
        if response.status_code == 404 and "does not exist" in response.text:
            return None  # the deployer has not heard of the agent yet
        return response

    response = await wait_for(attempt)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def deploy(http: httpx.AsyncClient, agent_id: str, **body: Any) -> dict[str, Any]:
    response = await http.post(f"/api/workspace/agents/{agent_id}/deployments", json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


async def source_world(http: httpx.AsyncClient, files: dict[str, str] | None = None) -> World:
    world = await new_world(http)
    await put_repository(http, world.agent_id, {"mode": "hosted", "files": files or FILES})
    await deploy(http, world.agent_id)
    return world


async def chat(
    coach: CoachClient,
    world: World,
    channel: str = "web",
    requester: Requester | None = None,
    model: str | None = "claude-sonnet-4-5",
) -> CoachSession:
    return await coach.open_session(
        org_id=world.org_id,
        source_guild_id=world.guild_id,
        operator_user_id=OPERATOR,
        channel=channel,  # type: ignore[arg-type]
        requester=requester or Requester(user_id="user_sam", email=USER, org_id=world.org_id),
        model=model,
    )


async def propose(
    session: CoachSession, agent_id: str, files: dict[str, str | None], reason: str = "asked in chat", **extra: Any
) -> ToolResult:
    turn = session.begin_turn()
    body = [{"path": p, "content": c} for p, c in files.items()]
    return await turn.call("propose_source_change", {"agent_id": agent_id, "files": body, "reason": reason, **extra})


def refused(result: ToolResult, code: str, *words: str) -> None:
    assert not result.ok and result.error is not None, result
    assert result.error.code == code, result.error
    for word in words:
        assert word in result.error.message, result.error.message


async def page(http: httpx.AsyncClient, agent_id: str) -> dict[str, Any]:
    response = await http.get(f"/api/agents/{agent_id}/proposals")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def projected(http: httpx.AsyncClient, session_id: str, proposal_id: str) -> None:
    """Wait until the gateway's projection holds the proposal (it arrives as ProposalProposed)."""

    async def probe() -> bool:
        response = await http.get(f"/api/studio/sessions/{session_id}/pending")
        return response.status_code == 200 and any(i["proposal_id"] == proposal_id for i in response.json()["items"])

    await wait_for(probe)


async def decide(http: httpx.AsyncClient, agent_id: str, proposal_id: str, decision: str) -> httpx.Response:
    return await http.post(f"/api/agents/{agent_id}/proposals/{proposal_id}", json={"decision": decision})


def proposal_id(result: ToolResult) -> str:
    assert result.ok and result.widget is not None, result
    return result.widget.proposal_id


async def test_an_agent_proposes_and_an_admin_approves_onto_the_hosted_source(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        session = await chat(coach, world)
        turn = session.begin_turn()
        listed = await turn.call("list_repo_files", {"agent_id": world.agent_id})
        assert listed.ok and listed.output is not None, listed
        assert {f["path"] for f in listed.output["files"]} == set(FILES)
        assert "contents" not in listed.output  # only the builder reads everything at once
        read = await turn.call("read_repo_file", {"agent_id": world.agent_id, "path": "skills/refunds.md"})
        assert read.ok and read.output is not None and read.output["content"] == FILES["skills/refunds.md"]
        new_skill = "# Refunds\n\nRefund within 30 days.\nConfirm before refunding.\n"
        result = await turn.call(
            "propose_source_change",
            {
                "agent_id": world.agent_id,
                "files": [
                    {"path": "skills/refunds.md", "content": new_skill},
                    {"path": "knowledge/policy.md", "content": FILES["knowledge/policy.md"]},  # unchanged: dropped
                    {"path": "knowledge/faq.md", "content": "# FAQ\n"},
                ],
                "reason": "The user asked to confirm before refunding.",
            },
        )
        pid = proposal_id(result)
        assert result.output is not None
        assert result.output["files"] == [
            {"path": "knowledge/faq.md", "action": "create"},
            {"path": "skills/refunds.md", "action": "edit"},
        ]
        shown = await page(http, world.agent_id)
        assert shown["counts"] == {"waiting": 1, "decided": 0}
        item = shown["waiting"][0]
        assert item["proposal_id"] == pid and item["reason"] == "The user asked to confirm before refunding."
        assert item["asked_by"] == USER and item["model"] == "claude-sonnet-4-5"
        assert item["chat"]["session_id"] == session.session_id and item["label"] == "View chat"
        assert item["actions"] == ["approve", "discard"] and item["changed_since"] == []
        diffs = {f["path"]: f for f in item["files"]}
        assert "+Confirm before refunding." in diffs["skills/refunds.md"]["diff"]
        assert diffs["knowledge/faq.md"]["action"] == "create"

        await projected(http, session.session_id, pid)
        approved = await decide(http, world.agent_id, pid, "approve")
        assert approved.status_code == 200, approved.text
        commit = approved.json()["effects"]["commit"]
        assert approved.json()["outcome"] == "approved" and approved.json()["effects"]["version_number"] == 2

        repo = hosted_path(stack, world.agent_id)
        assert git("--git-dir", str(repo), "rev-parse", "refs/heads/main").strip() == commit
        assert git("--git-dir", str(repo), "show", f"{commit}:skills/refunds.md") == new_skill
        author = git("--git-dir", str(repo), "log", "-1", "--format=%an|%ae", commit).strip()
        assert author == f"{OPERATOR}|{OPERATOR}"
        message = git("--git-dir", str(repo), "log", "-1", "--format=%B", commit)
        assert pid in message and "confirm before refunding" in message and f"Asked by: {USER}" in message

        shown = await page(http, world.agent_id)
        assert shown["counts"] == {"waiting": 0, "decided": 1}
        assert shown["decided"][0]["commit"] == commit and shown["decided"][0]["resolved_by"] == OPERATOR

        again = await decide(http, world.agent_id, pid, "discard")
        assert again.status_code == 422, again.text

        feed = (await http.get("/api/activity", params={"agent_id": world.agent_id})).json()["entries"]
        assert [(e["who"], e["what"], e["proposal_id"]) for e in feed] == [(OPERATOR, "approved", pid)]
        assert feed[0]["links"]["commit"] == commit
        assert feed[0]["links"]["chat"] == f"/api/studio/sessions/{session.session_id}/pending"

        events = await stack.records(
            stack.topic("deploys.events"), lambda r: r.value is not None and pid.encode() in r.value
        )
        assert len(events) == 1
        announced = json.loads(events[0].value or b"")
        assert announced["type"] == "SourceCommitted" and announced["source_version"] == commit
