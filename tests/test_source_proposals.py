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
from tests.test_memory_edits import armed_marker, continue_markers

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
        one = await http.get(f"/api/agents/{world.agent_id}/proposals/{pid}")  # decided, still read at its address
        assert one.status_code == 200, one.text
        assert (one.json()["status"], one.json()["resolved_by"], one.json()["commit"]) == ("approved", OPERATOR, commit)
        resolution = one.json()["resolution"]  # how it was decided: the gateway's projection, beside the owner's read
        assert (resolution["status"], resolution["resolved_by"]) == ("approved", OPERATOR)
        assert [(d["decision"], d["actor"], d["outcome"]) for d in resolution["decisions"]] == [
            ("approve", OPERATOR, "approved")
        ]
        assert resolution["detail"] == approved.json()["detail"]

        again = await decide(http, world.agent_id, pid, "discard")
        assert again.status_code == 422, again.text

        feed = (await http.get("/api/activity", params={"agent_id": world.agent_id})).json()["entries"]
        assert sorted((e["who"], e["what"], e["proposal_id"]) for e in feed) == [
            (OPERATOR, "approved", pid),
            (OPERATOR, "deploy", pid),  # approving onto production deploys
        ]
        approval = next(e for e in feed if e["what"] == "approved")
        assert approval["links"]["commit"] == commit
        assert approval["links"]["chat"] == f"/api/studio/sessions/{session.session_id}/pending"

        events = await stack.records(
            stack.topic("deploys.events"),
            lambda r: r.value is not None and pid.encode() in r.value and b'"type":"SourceCommitted"' in r.value,
        )
        # The commit is announced once; the deploy it starts announces itself separately (DeployStarted, ...).
        assert len(events) == 1
        announced = json.loads(events[0].value or b"")
        assert announced["type"] == "SourceCommitted" and announced["source_version"] == commit


AGENT_REFUSED = [
    ("amodal.json", '{"name": "x"}\n', "amodal.json"),
    ("agents/main/agent.json", "{}\n", "agent.json"),
    ("agents/main/agent.ts", "export {};\n", "agent.ts"),
    ("tools/lookup/tool.json", "{}\n", "tool.json"),
    ("package.json", "{}\n", "package.json"),
    ("connections/zendesk/spec.json", "{}\n", "spec.json"),
    (".env", "A=1\n", ".env"),
    ("agents/main/.env.local", "A=1\n", ".env.local"),
    ("skills/refunds.txt", "x\n", "only Markdown"),
    ("tools/helper.ts", "x\n", "only Markdown"),
    ("tools/lookup/README.txt", "x\n", "only Markdown"),
    ("stores/orders.json", "{}\n", "only Markdown"),
    ("evals/refund.json", "{}\n", "only Markdown"),
    ("README.md", "x\n", "only Markdown"),
]


async def test_an_agent_may_change_only_its_markdown_and_tool_code_where_it_loads_them(stack: Stack) -> None:
    files = {**FILES, "amodal/skills/greeting.md": "# Greeting\n"}  # skills load from amodal/skills/ here
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http, files)
        session = await chat(coach, world)
        for path, content, words in AGENT_REFUSED:
            result = await propose(session, world.agent_id, {path: content})
            refused(result, "path_refused", path, words)
        wrong = await propose(session, world.agent_id, {"skills/new.md": "# New\n"})
        refused(wrong, "wrong_location", "propose it as amodal/skills/new.md instead")
        wrong = await propose(session, world.agent_id, {"amodal/knowledge/new.md": "# New\n"})
        refused(wrong, "wrong_location", "propose it as knowledge/new.md instead")
        same = await propose(session, world.agent_id, {"knowledge/policy.md": FILES["knowledge/policy.md"]})
        refused(same, "nothing_to_propose", "changes nothing")
        allowed = await propose(
            session,
            world.agent_id,
            {
                "amodal/skills/greeting.md": "# Greeting\nSay hello.\n",
                "agents/main/AGENT.md": "You answer refund questions politely.\n",
                "tools/lookup/index.ts": "export default () => 2;\n",
                "tools/lookup/util.mjs": "export const x = 1;\n",
            },
        )
        assert allowed.ok and allowed.output is not None, allowed
        assert len(allowed.output["files"]) == 4
        shown = await page(http, world.agent_id)
        assert shown["counts"] == {"waiting": 1, "decided": 0}


async def test_the_tools_exist_only_in_web_api_and_builder_chat_of_a_deployment_that_recorded_its_version(
    stack: Stack,
) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        for channel in ("local-dev", "channel", "studio"):
            session = await chat(coach, world, channel=channel)
            result = await session.begin_turn().call("list_repo_files", {"agent_id": world.agent_id})
            refused(result, "tool_unavailable", f"not available in a {channel} session")
            result = await propose(session, world.agent_id, {"skills/x.md": "# X\n"})
            refused(result, "tool_unavailable")
        api = await chat(coach, world, channel="api")
        listed = await api.begin_turn().call("list_repo_files", {"agent_id": world.agent_id})
        assert listed.ok, listed
        docs = await api.begin_turn().call("read_docs", {})
        assert docs.ok and docs.output is not None
        assert {"connections", "source-layout", "evals", "stores"} <= {p["page"] for p in docs.output["pages"]}
        connections = await api.begin_turn().call("read_docs", {"page": "/guide/connections"})
        assert connections.ok and connections.output is not None and "env:" in connections.output["content"]

        await deploy(http, world.agent_id, records_version=False)
        again = await api.begin_turn().call("list_repo_files", {"agent_id": world.agent_id})
        refused(again, "redeploy_first", "redeploy the agent first")
        result = await propose(api, world.agent_id, {"skills/x.md": "# X\n"})
        refused(result, "redeploy_first")

        bare = await new_world(http)
        await put_repository(http, bare.agent_id, {"mode": "hosted", "files": FILES})
        never = await chat(coach, bare)
        result = await never.begin_turn().call("read_repo_file", {"agent_id": bare.agent_id, "path": "amodal.json"})
        refused(result, "redeploy_first")


BUILDER_REFUSED = [
    (".env", "A=1\n", "path_refused", "environment files"),
    ("config/.env.production", "A=1\n", "path_refused", "environment files"),
    ("certs/server.pem", "x\n", "path_refused", "key files"),
    ("id_rsa", "x\n", "path_refused", "key files"),
    ("node_modules/x/index.js", "x\n", "path_refused", "node_modules/"),
    ("dist/index.js", "x\n", "path_refused", "dist/"),
    ("build/out.js", "x\n", "path_refused", "build/"),
    ("coverage/lcov.info", "x\n", "path_refused", "coverage/"),
    (".git/config", "x\n", "path_refused", ".git/"),
    ("web/.next/cache.json", "{}\n", "path_refused", ".next/"),
    ("broken.json", "{not json", "invalid_json", "not valid JSON"),
    (
        "connections/zendesk/spec.json",
        json.dumps({"name": "zendesk", "baseUrl": "https://z.example", "auth": {"type": "bearer", "token": "abc123"}}),
        "literal_credential",
        "auth.token holds a literal credential",
    ),
    (
        "connections/zendesk/spec.json",
        json.dumps({"name": "zendesk", "auth": {"type": "bearer", "token": "env:ZENDESK_TOKEN"}}),
        "invalid_format",
        "'baseUrl' is a required property",
    ),
    ("stores/orders.json", json.dumps({"name": "orders"}), "invalid_format", "not a valid store file"),
    ("evals/refund.json", json.dumps({"name": "r", "query": "q", "assertions": []}), "invalid_format", "eval"),
    ("skills/keys.md", "Use sk-ant-abcdefghijklmnopqrstuvwxyz012345 to call.\n", "secret_value", "secret"),
    ("lib/aws.ts", 'const key = "AKIAABCDEFGHIJKLMNOP";\n', "secret_value", "AWS"),
]


async def test_the_builder_may_change_any_file_but_secrets_keys_and_build_folders_and_files_are_checked(
    stack: Stack,
) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        builder = await chat(coach, world, channel="builder")
        for path, content, code, words in BUILDER_REFUSED:
            refused(await propose(builder, world.agent_id, {path: content}), code, path, words)
        good = {
            "amodal.json": '{"name": "ada", "version": 2}\n',
            "connections/zendesk/spec.json": json.dumps(
                {"name": "zendesk", "baseUrl": "https://z.example", "auth": {"type": "bearer", "token": "env:ZD"}}
            ),
            "stores/orders.json": json.dumps(
                {"name": "orders", "entity": {"name": "Order", "key": "{id}", "schema": {"id": {"type": "string"}}}}
            ),
            "evals/refund.json": json.dumps(
                {"name": "r", "query": "Refund 1", "assertions": [{"type": "contains", "value": "confirm"}]}
            ),
        }
        result = await propose(builder, world.agent_id, good)
        assert result.ok and result.output is not None, result
        shown = await page(http, world.agent_id)
        item = shown["waiting"][0]
        assert item["from_builder_chat"] and item["label"] == "From the builder chat" and item["chat"] is None


def push_to_bare(repo: Path, scratch: Path, files: dict[str, str]) -> None:
    """Commit ``files`` onto ``main`` of a bare repository, as someone working outside Assent would."""
    git("clone", "--quiet", str(repo), str(scratch))
    for path, text in files.items():
        (scratch / path).parent.mkdir(parents=True, exist_ok=True)
        (scratch / path).write_text(text)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A", cwd=scratch)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "by hand", cwd=scratch)
    git("push", "--quiet", "origin", "HEAD:main", cwd=scratch)


async def test_the_builder_reads_within_its_budget_and_deletes_only_what_it_read(stack: Stack, tmp_path: Path) -> None:
    big = "x" * 100_000 + "\n"
    huge = {"knowledge/huge.md": "y" * 170_000}  # more than a file may hold to be read at all
    files = {**FILES, "knowledge/a_big.md": big, "knowledge/b_big.md": big}
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http, files)
        push_to_bare(hosted_path(stack, world.agent_id), tmp_path / "work", huge)
        await deploy(http, world.agent_id)
        files = {**files, **huge}
        builder = await chat(coach, world, channel="builder")
        turn = builder.begin_turn()
        listed = await turn.call("list_repo_files", {"agent_id": world.agent_id})
        assert listed.ok and listed.output is not None, listed
        assert {f["path"] for f in listed.output["files"]} == set(files)
        contents = listed.output["contents"]
        assert sum(len(text) for text in contents.values()) <= 160_000
        assert "knowledge/a_big.md" in contents and "skills/refunds.md" in contents
        assert listed.output["listed_only"] == ["knowledge/b_big.md", "knowledge/huge.md"]
        too_large = await turn.call("read_repo_file", {"agent_id": world.agent_id, "path": "knowledge/huge.md"})
        refused(too_large, "file_too_large", "cannot be read")
        refused(await propose(builder, world.agent_id, {"knowledge/huge.md": "short\n"}), "file_too_large")
        refused(await propose(builder, world.agent_id, {"knowledge/huge.md": None}), "file_too_large")
        refused(await propose(builder, world.agent_id, {"knowledge/b_big.md": None}), "unread_file", "has not read it")
        refused(await propose(builder, world.agent_id, {"knowledge/none.md": None}), "unknown_file")
        deleted = await propose(builder, world.agent_id, {"skills/refunds.md": None})
        assert deleted.ok, deleted
        item = (await page(http, world.agent_id))["waiting"][0]
        (file,) = item["files"]
        assert file["deleted"] and file["action"] == "delete"
        assert file["lines"] == {"added": 0, "removed": 3}
        assert file["diff"].count("\n-") == 3 and "\n+" not in file["diff"].split("@@", 1)[1]


async def test_one_waiting_proposal_per_chat(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        session = await chat(coach, world)
        first = await propose(session, world.agent_id, {"skills/refunds.md": "# Refunds\nv2\n"})
        second = await propose(session, world.agent_id, {"knowledge/faq.md": "# FAQ\n"})
        p1, p2 = proposal_id(first), proposal_id(second)
        assert second.output is not None and second.output["replaces"] == p1
        shown = await page(http, world.agent_id)
        assert shown["counts"] == {"waiting": 1, "decided": 1}
        assert [f["path"] for f in shown["waiting"][0]["files"]] == ["knowledge/faq.md", "skills/refunds.md"]
        assert shown["decided"][0]["proposal_id"] == p1 and shown["decided"][0]["status"] == "discarded"
        assert shown["decided"][0]["replaced_by"] == p2

        async def gateway_sees_it() -> bool:
            response = await http.get(f"/api/studio/sessions/{session.session_id}/pending")
            if response.status_code != 200:
                return False
            return [i["proposal_id"] for i in response.json()["items"]] == [p2]

        await wait_for(gateway_sees_it)
        refused_decision = await decide(http, world.agent_id, p1, "approve")
        assert refused_decision.status_code == 422, refused_decision.text

        # Asked to drop a file the waiting proposal creates: the next proposal holds every other file.
        dropped = await propose(session, world.agent_id, {"knowledge/faq.md": None})
        assert dropped.output is not None and dropped.output["replaces"] == p2
        shown = await page(http, world.agent_id)
        assert [f["path"] for f in shown["waiting"][0]["files"]] == ["skills/refunds.md"]
        assert shown["counts"] == {"waiting": 1, "decided": 2}

        reset = await chat(coach, world)  # resetting the chat starts a new proposal, the previous one waits
        third = await propose(reset, world.agent_id, {"knowledge/policy.md": "Refunds take 3 days.\n"})
        assert third.output is not None and third.output["replaces"] is None
        shown = await page(http, world.agent_id)
        assert shown["counts"] == {"waiting": 2, "decided": 2}
        assert [f["path"] for f in shown["waiting"][0]["files"]] == ["knowledge/policy.md"]


async def test_a_turn_continues_once_when_its_replaced_proposals_successor_is_decided(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        session = await chat(coach, world)
        # Paused before the turn under test (so Continue means that turn); continued after it to prove it
        # continued once (see continue_markers).
        markers = [await armed_marker(session) for _ in range(2)]
        turn = session.begin_turn()
        first = await turn.call(
            "propose_source_change",
            {"agent_id": world.agent_id, "files": [{"path": "knowledge/faq.md", "content": "# FAQ\n"}], "reason": "r"},
        )
        second = await turn.call(
            "propose_source_change",
            {"agent_id": world.agent_id, "files": [{"path": "skills/a.md", "content": "# A\n"}], "reason": "r"},
        )
        p1, p2 = proposal_id(first), proposal_id(second)
        assert second.output is not None and second.output["replaces"] == p1
        await turn.end_step((first.tool_call_id, second.tool_call_id))
        sid = session.session_id

        async def only_the_successor_pends() -> bool:
            items = (await http.get(f"/api/studio/sessions/{sid}/pending")).json()["items"]
            return [i["proposal_id"] for i in items] == [p2]

        await wait_for(only_the_successor_pends)
        early = await http.post(f"/api/studio/sessions/{sid}/continue")
        assert early.status_code == 409 and "waiting on 1 decision" in early.json()["detail"], early.text

        assert (await decide(http, world.agent_id, p2, "discard")).status_code == 200
        continuation = await turn.continuation()
        seq1, seq2 = turn.calls[first.tool_call_id].seq, turn.calls[second.tool_call_id].seq
        assert [(d.seq, d.proposal_id, d.outcome) for d in continuation.decisions] == [
            (seq1, p1, "superseded"),
            (seq2, p2, "discarded"),
        ]
        lines = continuation.text.splitlines()
        assert lines[0] == "The operator decided 1 request; 1 was replaced by a later proposal:"
        assert lines[1].startswith(f"- seq {seq1}: ") and lines[1].endswith(
            "replaced by a later proposal; it needs no answer"
        )
        await continue_markers(markers[0], markers[1], world)

        def of_turn(record: Any) -> bool:
            body = json.loads(record.value)
            return body["session_id"] == sid and body["turn_id"] == turn.turn_id

        assert len(await stack.records(stack.topic("studio.continuations"), of_turn)) == 1


async def test_a_file_changed_in_the_repository_after_proposing(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        session = await chat(coach, world)
        first = await propose(session, world.agent_id, {"skills/refunds.md": "# Refunds\nmine\n"})
        p1 = proposal_id(first)
        theirs = "# Refunds\ntheirs\n"
        response = await http.post(
            f"/api/workspace/agents/{world.agent_id}/repository/commits",
            json={"files": {"skills/refunds.md": theirs}, "message": "Edit refunds by hand"},
        )
        assert response.status_code == 201, response.text
        item = (await page(http, world.agent_id))["waiting"][0]
        assert item["changed_since"] == ["skills/refunds.md"] and item["actions"] == ["discard"]

        await projected(http, session.session_id, p1)
        stale = await decide(http, world.agent_id, p1, "approve")
        assert stale.status_code == 409, stale.text
        assert "skills/refunds.md changed in the repository" in stale.json()["detail"]
        shown = await page(http, world.agent_id)
        assert shown["counts"] == {"waiting": 1, "decided": 0}
        card = await http.get(f"/api/studio/sessions/{session.session_id}/pending")
        assert card.json()["items"][0]["stale"] is True

        second = await propose(session, world.agent_id, {"knowledge/faq.md": "# FAQ\n"})
        assert second.output is not None
        assert second.output["left_out"] == [{"path": "skills/refunds.md", "repository_content": theirs}]
        shown = await page(http, world.agent_id)
        assert [f["path"] for f in shown["waiting"][0]["files"]] == ["knowledge/faq.md"]
        assert shown["counts"] == {"waiting": 1, "decided": 1}


async def test_a_reply_that_finishes_after_its_proposal_was_decided_proposes_nothing(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        session = await chat(coach, world)
        p1 = proposal_id(await propose(session, world.agent_id, {"skills/refunds.md": "# Refunds\nv2\n"}))
        reply = session.begin_turn()
        read = await reply.call("read_repo_file", {"agent_id": world.agent_id, "path": "knowledge/policy.md"})
        assert read.ok, read
        await projected(http, session.session_id, p1)
        as_admin_of(http, world.org_id, user="rita@acme.example", roles=("reviewer",))
        discarded = await decide(http, world.agent_id, p1, "discard")
        assert discarded.status_code == 200, discarded.text
        late = await reply.call(
            "propose_source_change",
            {"agent_id": world.agent_id, "files": [{"path": "knowledge/faq.md", "content": "# FAQ\n"}], "reason": "r"},
        )
        refused(late, "proposal_decided", "nothing was proposed", p1, "discarded by rita@acme.example")
        fresh = await propose(session, world.agent_id, {"knowledge/faq.md": "# FAQ\n"})
        assert fresh.ok and fresh.output is not None and fresh.output["replaces"] is None
        shown = await page(http, world.agent_id)
        assert shown["counts"] == {"waiting": 1, "decided": 1}
        assert [f["path"] for f in shown["waiting"][0]["files"]] == ["knowledge/faq.md"]
        feed = (await http.get("/api/activity", params={"agent_id": world.agent_id})).json()["entries"]
        assert [(e["who"], e["what"]) for e in feed] == [("rita@acme.example", "discarded")]


async def test_who_asked_in_its_three_forms(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        forms = [
            (Requester(user_id="user_sam", email=USER, org_id=world.org_id), USER),
            (Requester(user_id="user_ext", email="ext@other.example", org_id="org_other"), "user_ext"),
            (Requester(user_id=None), None),
        ]
        for requester, _ in forms:
            session = await chat(coach, world, channel="api", requester=requester)
            assert (await propose(session, world.agent_id, {"knowledge/faq.md": "# FAQ\n"})).ok
        shown = await page(http, world.agent_id)
        assert shown["counts"] == {"waiting": 3, "decided": 0}
        assert sorted(map(str, (i["asked_by"] for i in shown["waiting"]))) == sorted(map(str, (f for _, f in forms)))


async def test_who_may_approve_and_discard_and_organisations_are_walls(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        editor = "eve@acme.example"
        roles = await http.put(
            f"/api/workspace/agents/{world.agent_id}/roles", json={"owners": [], "editors": [editor]}
        )
        assert roles.status_code == 200, roles.text
        ids = []
        for n in range(4):
            session = await chat(coach, world)
            pid = proposal_id(await propose(session, world.agent_id, {f"knowledge/f{n}.md": f"# {n}\n"}))
            await projected(http, session.session_id, pid)
            ids.append(pid)

        async def as_(user: str, roles: tuple[str, ...], pid: str, decision: str) -> int:
            as_admin_of(http, world.org_id, user=user, roles=roles)
            return (await decide(http, world.agent_id, pid, decision)).status_code

        assert await as_("vic@acme.example", ("viewer",), ids[0], "approve") == 403
        assert await as_("vic@acme.example", ("viewer",), ids[0], "discard") == 403
        assert await as_("rita@acme.example", ("reviewer",), ids[0], "approve") == 403
        assert await as_("rita@acme.example", ("reviewer",), ids[0], "discard") == 200
        assert await as_("dev@acme.example", ("developer",), ids[1], "approve") == 200
        assert await as_(editor, ("viewer",), ids[2], "approve") == 200
        assert await as_(editor, ("viewer",), ids[3], "discard") == 200

        other = f"org_other_{uuid.uuid4().hex[:6]}"
        as_admin_of(http, other)
        for method, url in [
            ("GET", f"/api/agents/{world.agent_id}/proposals"),
            ("GET", f"/api/agents/{world.agent_id}/proposals/{ids[1]}"),
            ("GET", f"/api/workspace/agents/{world.agent_id}/repository"),
            ("GET", f"/api/workspace/agents/{world.agent_id}/issues"),
        ]:
            assert (await http.request(method, url)).status_code == 404, url
        assert (await decide(http, world.agent_id, ids[1], "discard")).status_code == 404
        denied = await http.post(f"/api/workspace/agents/{world.agent_id}/deployments", json={})
        assert denied.status_code == 404, denied.text
        assert (await http.get("/api/activity")).json()["entries"] == []

        as_admin_of(http, world.org_id)
        feed = (await http.get("/api/activity", params={"agent_id": world.agent_id})).json()["entries"]
        assert sorted((e["who"], e["what"]) for e in feed) == sorted(
            [
                ("rita@acme.example", "discarded"),
                ("dev@acme.example", "approved"),
                ("dev@acme.example", "deploy"),
                (editor, "approved"),
                (editor, "deploy"),
                (editor, "discarded"),
            ]
        )
        assert (await page(http, world.agent_id))["counts"] == {"waiting": 0, "decided": 4}


async def test_an_external_source_over_a_file_remote_and_a_fix_for_an_issue(stack: Stack, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git("init", "--quiet", "--bare", "--initial-branch", "trunk", str(remote))
    work = tmp_path / "work"
    git("clone", "--quiet", str(remote), str(work))
    for path, text in FILES.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "first", cwd=work)
    git("push", "--quiet", "origin", "HEAD:trunk", cwd=work)
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        attached = await put_repository(
            http, world.agent_id, {"mode": "external", "url": f"file://{remote}", "provider": "github"}
        )
        assert attached["branch"] == "trunk" and attached["provider"] == "github"
        await deploy(http, world.agent_id)
        eval_file = json.dumps(
            {"name": "confirm", "query": "Refund 1", "assertions": [{"type": "contains", "value": "confirm"}]}
        )
        bad = await http.post(
            f"/api/workspace/agents/{world.agent_id}/issues",
            json={"title": "x", "evals": {"evals/bad.json": "{}"}},
        )
        assert bad.status_code == 422, bad.text
        created = await http.post(
            f"/api/workspace/agents/{world.agent_id}/issues",
            json={
                "title": "Refunds without confirmation",
                "text": "It refunded at once.",
                "evals": {"evals/confirm.json": eval_file},
            },
        )
        assert created.status_code == 201, created.text
        issue = created.json()
        session = await chat(coach, world)
        result = await propose(
            session, world.agent_id, {"skills/refunds.md": "# Refunds\nConfirm first.\n"}, issue_id=issue["issue_id"]
        )
        pid = proposal_id(result)
        item = (await page(http, world.agent_id))["waiting"][0]
        assert item["fix_for_issue"]["label"] == "Fix for issue"
        assert item["fix_for_issue"]["link"] == f"/api/workspace/agents/{world.agent_id}/issues/{issue['issue_id']}"
        await projected(http, session.session_id, pid)
        approved = await decide(http, world.agent_id, pid, "approve")
        assert approved.status_code == 200, approved.text
        commit = approved.json()["effects"]["commit"]
        assert git("--git-dir", str(remote), "rev-parse", "refs/heads/trunk").strip() == commit
        assert git("--git-dir", str(remote), "show", f"{commit}:evals/confirm.json") == eval_file
        assert git("--git-dir", str(remote), "show", f"{commit}:skills/refunds.md") == "# Refunds\nConfirm first.\n"
        assert "Fixes issue #1" in git("--git-dir", str(remote), "log", "-1", "--format=%B", commit)
        fixed = await http.get(f"/api/workspace/agents/{world.agent_id}/issues/{issue['issue_id']}")
        assert fixed.json()["status"] == "fixed"

        # Someone pushes to the remote; a proposal bound to the old text can then only be discarded.
        second = await propose(
            await chat(coach, world), world.agent_id, {"knowledge/policy.md": "Refunds take 2 days.\n"}
        )
        git("pull", "--quiet", "origin", "trunk", cwd=work)
        (work / "knowledge/policy.md").write_text("Refunds take 9 days.\n")
        git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-am", "by hand", cwd=work)
        git("push", "--quiet", "origin", "HEAD:trunk", cwd=work)
        item = (await page(http, world.agent_id))["waiting"][0]
        assert item["proposal_id"] == proposal_id(second) and item["actions"] == ["discard"]
        assert item["changed_since"] == ["knowledge/policy.md"]
