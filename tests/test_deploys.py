"""Approve, commit, build, deploy: the deployer over real git (a hosted repository, and external ones reached
through real ``file://`` remotes), real Kafka, PostgreSQL and Redis, a real local HTTP server as the webhook
deploy target, and the gateway's public API."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import tempfile
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import OPERATOR, Stack, World, as_admin_of, new_world, running_stack, wait_for
from tests.test_source_proposals import (
    FILES,
    chat,
    decide,
    deploy,
    git,
    hosted_path,
    page,
    projected,
    proposal_id,
    propose,
    put_repository,
    source_world,
)

pytestmark = pytest.mark.integration
SECRET = "webhook-secret-0123456789"
EVAL = json.dumps({"name": "confirm", "query": "Refund 1", "assertions": [{"type": "contains", "value": "confirm"}]})


def local_target(stack: Stack, agent_id: str) -> dict[str, Any]:
    path = Path(tempfile.gettempdir()) / "assent-local-target" / stack.prefix.strip(".") / f"{agent_id}.json"
    return json.loads(path.read_text()) if path.exists() else {"staged": None, "live": None, "history": []}


def remote_repo(tmp_path: Path, branch: str = "trunk") -> tuple[Path, Path]:
    """A bare remote holding FILES on ``branch``, and a clone to push from."""
    remote = tmp_path / f"remote-{uuid.uuid4().hex[:6]}.git"
    git("init", "--quiet", "--bare", "--initial-branch", branch, str(remote))
    work = tmp_path / f"work-{uuid.uuid4().hex[:6]}"
    git("clone", "--quiet", str(remote), str(work))
    for path, text in FILES.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    commit_all(work, "first")
    git("push", "--quiet", "origin", f"HEAD:{branch}", cwd=work)
    return remote, work


def commit_all(work: Path, message: str) -> None:
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", message, cwd=work)


async def external_world(http: httpx.AsyncClient, url: str, provider: str = "github") -> World:
    world = await new_world(http)
    await put_repository(http, world.agent_id, {"mode": "external", "url": url, "provider": provider})
    await deploy(http, world.agent_id)
    return world


async def settings(http: httpx.AsyncClient, agent_id: str, **body: Any) -> dict[str, Any]:
    response = await http.put(f"/api/workspace/agents/{agent_id}/deploy-settings", json=body)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def approved(
    http: httpx.AsyncClient, stack: Stack, world: World, files: dict[str, str], **options: Any
) -> dict[str, Any]:
    """Propose ``files`` from a web chat and approve them with ``options``; the outcome."""
    async with stack.coach() as coach:
        session = await chat(coach, world)
        result = await propose(
            session, world.agent_id, files, reason="Confirm before refunding.", **options.pop("propose", {})
        )
        pid = proposal_id(result)
        await projected(http, session.session_id, pid)
    response = await http.post(f"/api/agents/{world.agent_id}/proposals/{pid}", json={"decision": "approve", **options})
    assert response.status_code == 200, response.text
    outcome = response.json()
    assert outcome["outcome"] == "approved", outcome
    return outcome  # type: ignore[no-any-return]


async def deploy_state(http: httpx.AsyncClient, agent_id: str, deploy_id: str, *status: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        response = await http.get(f"/api/agents/{agent_id}/deploys/{deploy_id}")
        assert response.status_code == 200, response.text
        return response.json() if response.json()["status"] in status else None  # type: ignore[no-any-return]

    return await wait_for(probe, timeout=30)  # type: ignore[no-any-return]


async def events(stack: Stack, agent_id: str, *types: str) -> list[dict[str, Any]]:
    records = await stack.records(
        stack.topic("deploys.events"), lambda r: r.value is not None and agent_id.encode() in r.value
    )
    found = [json.loads(r.value or b"") for r in records]
    return [e for e in found if e["type"] in types]


def log_of(repo: Path, ref: str, n: int = 3) -> list[list[str]]:
    """``[commit, parents..., subject]`` of the last ``n`` commits of ``ref``."""
    out = git("--git-dir", str(repo), "log", f"-{n}", "--format=%H %P|%s", ref)
    return [[*line.split("|")[0].split(), line.split("|", 1)[1]] for line in out.strip().splitlines()]


# --- a local HTTP server: the webhook deploy target -------------------------------------------------------


class TargetServer:
    """Records every POST; answers with the next status of ``statuses`` (the last one repeats)."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.bodies: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.bodies.append(body)
                status = server.statuses.pop(0) if len(server.statuses) > 1 else server.statuses[0]
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *_: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/sync"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> TargetServer:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def target_server() -> Iterator[TargetServer]:
    with TargetServer([503, 200]) as server:
        yield server


# --- the tests ----------------------------------------------------------------------------------------------


async def test_a_hosted_approval_commits_the_next_version_builds_it_and_goes_live(stack: Stack) -> None:
    async with stack.http() as http:
        world = await source_world(http)
        repo = hosted_path(stack, world.agent_id)
        before = git("--git-dir", str(repo), "rev-parse", "main").strip()
        outcome = await approved(http, stack, world, {"skills/refunds.md": "# Refunds\nConfirm first.\n"})
        effects = outcome["effects"]
        commit, deploy_id = effects["commit"], effects["deploy_id"]
        assert effects["route"] == "production" and effects["version_number"] == 2
        assert log_of(repo, "main", 2)[0][:2] == [commit, before]
        assert deploy_id in outcome["detail"] and commit[:12] in outcome["detail"]

        live = await deploy_state(http, world.agent_id, deploy_id, "live")
        assert live["source_version"] == commit and live["target"] == "local" and live["promoted_by"] is None
        build = (await http.get(f"/api/agents/{world.agent_id}/builds/{live['build_id']}")).json()
        assert build["status"] == "succeeded" and build["artifact_digest"].startswith("sha256:")
        assert [t["trigger"] for t in build["triggers"]] == ["approval"] and build["deploys"] == [deploy_id]
        assert "ok   skills/refunds.md" in build["log"] and build["artifact_digest"] in build["log"]
        recorded = local_target(stack, world.agent_id)
        assert recorded["live"]["source_version"] == commit
        assert [(h["deploy_id"], h["action"]) for h in recorded["history"]] == [
            (deploy_id, "start"),
            (deploy_id, "promote"),
        ]
        source = (await http.get(f"/api/workspace/agents/{world.agent_id}/repository")).json()
        assert source["deployment"]["source_version"] == commit and source["live"]["deploy_id"] == deploy_id
        item = (await page(http, world.agent_id))["decided"][0]
        assert item["commit"] == commit and item["deployed"] is True and item["deploy"]["status"] == "live"

        seen = await events(
            stack, world.agent_id, "BuildStarted", "BuildProgressed", "BuildFinished", "DeployStarted", "DeployLive"
        )
        assert [e["type"] for e in seen] == [
            "BuildStarted",
            "BuildProgressed",
            "BuildProgressed",
            "BuildFinished",
            "DeployStarted",
            "DeployLive",
        ]
        assert seen[3]["artifact_digest"] == build["artifact_digest"]

        feed = (await http.get("/api/activity", params={"agent_id": world.agent_id})).json()["entries"]
        assert sorted(e["what"] for e in feed) == ["approved", "deploy"]

        # A hosted source has no branches.
        async with stack.coach() as coach:
            session = await chat(coach, world)
            pid = proposal_id(await propose(session, world.agent_id, {"knowledge/policy.md": "Two days.\n"}))
            await projected(http, session.session_id, pid)
        refused = await http.post(
            f"/api/agents/{world.agent_id}/proposals/{pid}",
            json={"decision": "approve", "branch": {"kind": "new", "name": "try"}},
        )
        assert refused.status_code == 422 and "no branches" in refused.text


@pytest.mark.parametrize("provider", ["github", "gitlab"])
async def test_approving_onto_a_new_or_an_existing_branch_commits_there_and_links_a_change_request(
    stack: Stack, tmp_path: Path, provider: str
) -> None:
    remote, work = remote_repo(tmp_path)
    git("push", "--quiet", "origin", "HEAD:feature", cwd=work)
    async with stack.http() as http:
        world = await external_world(http, f"file://{remote}", provider)
        production = git("--git-dir", str(remote), "rev-parse", "trunk").strip()
        web = f"file://{remote}".removesuffix(".git")  # the repository's page: its address without .git

        new = await approved(
            http,
            stack,
            world,
            {"skills/refunds.md": "# Refunds\nConfirm first.\n"},
            branch={"kind": "new", "name": "assent/confirm"},
            message="Confirm before refunding\n\nAs asked in chat.",
        )
        effects = new["effects"]
        assert effects["route"] == "new" and effects["branch"] == "assent/confirm" and "deploy_id" not in effects
        [[commit, parent, subject]] = log_of(remote, "assent/confirm", 1)
        assert commit == effects["commit"] and parent == production and subject == "Confirm before refunding"
        assert git("--git-dir", str(remote), "rev-parse", "trunk").strip() == production  # production untouched
        if provider == "github":
            assert effects["link"] == f"{web}/compare/trunk...assent%2Fconfirm?expand=1"
            assert "pull request" in new["detail"]
        else:
            assert effects["link"].startswith(f"{web}/-/merge_requests/new?")
            assert "source_branch%5D=assent%2Fconfirm" in effects["link"] and "merge request" in new["detail"]
        item = (await page(http, world.agent_id))["decided"][0]
        assert item["deploy"] == "not deployed" and item["deployed"] is False and item["link"] == effects["link"]

        feature = git("--git-dir", str(remote), "rev-parse", "feature").strip()
        existing = await approved(
            http, stack, world, {"knowledge/policy.md": "Two days.\n"}, branch={"kind": "existing", "name": "feature"}
        )
        assert log_of(remote, "feature", 1)[0][:2] == [existing["effects"]["commit"], feature]
        assert existing["effects"]["route"] == "existing" and existing["effects"]["deploy"] == "not deployed"

        # The same new branch twice is refused; an unknown existing branch too. Neither commits anything.
        async with stack.coach() as coach:
            session = await chat(coach, world)
            pid = proposal_id(await propose(session, world.agent_id, {"knowledge/faq.md": "# FAQ\n"}))
            await projected(http, session.session_id, pid)
        again = await http.post(
            f"/api/agents/{world.agent_id}/proposals/{pid}",
            json={"decision": "approve", "branch": {"kind": "new", "name": "assent/confirm"}},
        )
        assert again.status_code == 409 and "exists already" in again.text
        unknown = await http.post(
            f"/api/agents/{world.agent_id}/proposals/{pid}",
            json={"decision": "approve", "branch": {"kind": "existing", "name": "nope"}},
        )
        assert unknown.status_code == 404 and "no branch nope" in unknown.text
        deploys = (await http.get(f"/api/agents/{world.agent_id}/deploys")).json()["deploys"]
        assert deploys == []


def github_push(remote: Path, commit: str, branch: str = "trunk") -> bytes:
    return json.dumps(
        {"ref": f"refs/heads/{branch}", "after": commit, "repository": {"clone_url": f"file://{remote}"}}
    ).encode()


def signed(body: bytes, secret: str = SECRET) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"X-GitHub-Event": "push", "X-Hub-Signature-256": f"sha256={digest}", "Content-Type": "application/json"}


async def test_a_push_and_an_approval_of_one_commit_share_one_build(stack: Stack, tmp_path: Path) -> None:
    remote, _ = remote_repo(tmp_path)
    async with stack.http() as http:
        world = await external_world(http, f"file://{remote}")
        shown = await settings(http, world.agent_id, builds_on_push=True, webhook_secret=SECRET)
        assert shown["builds_on_push"] is True and shown["webhook_secret_set"] is True and "webhook_secret" not in shown

        outcome = await approved(http, stack, world, {"skills/refunds.md": "# Refunds\nConfirm first.\n"})
        commit, build_id = outcome["effects"]["commit"], outcome["effects"]["build_id"]
        body = github_push(remote, commit)
        async with httpx.AsyncClient(base_url=stack.gateway_url) as anonymous:
            pushed = await anonymous.post("/api/webhooks/github", content=body, headers=signed(body))
            assert pushed.status_code == 202, pushed.text
            assert pushed.json()["results"] == [
                {"agent_id": world.agent_id, "build_id": build_id, "status": pushed.json()["results"][0]["status"]}
            ]

            forged = await anonymous.post("/api/webhooks/github", content=body, headers=signed(body, "x" * 20))
            assert forged.status_code == 401 and "X-Hub-Signature-256" in forged.text
            unsigned = await anonymous.post("/api/webhooks/github", content=body, headers={"X-GitHub-Event": "push"})
            assert unsigned.status_code == 401
            elsewhere = github_push(tmp_path / "nowhere.git", commit)
            unknown = await anonymous.post("/api/webhooks/github", content=elsewhere, headers=signed(elsewhere))
            assert unknown.status_code == 404
            gitlab = json.dumps(
                {"ref": "refs/heads/trunk", "after": commit, "project": {"git_http_url": f"file://{remote}"}}
            ).encode()
            wrong = await anonymous.post(
                "/api/webhooks/gitlab",
                content=gitlab,
                headers={"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": SECRET},
            )
            assert wrong.status_code == 404  # the repository is a GitHub source
            garbage = await anonymous.post("/api/webhooks/github", content=b"[1]", headers=signed(b"[1]"))
            assert garbage.status_code == 422

        await deploy_state(http, world.agent_id, outcome["effects"]["deploy_id"], "live")
        builds = (await http.get(f"/api/agents/{world.agent_id}/builds")).json()["builds"]
        assert [b["build_id"] for b in builds if b["source_version"] == commit] == [build_id]
        build = (await http.get(f"/api/agents/{world.agent_id}/builds/{build_id}")).json()
        triggers = {t["trigger"] for t in build["triggers"]} - {"poll"}
        assert triggers == {"approval", "push"} and build["deploys"] == [outcome["effects"]["deploy_id"]]

        async def build_finished() -> list[dict[str, Any]] | None:
            found = [e for e in await events(stack, world.agent_id, "BuildFinished") if e["build_id"] == build_id]
            return found or None  # published just after the commit that recorded it

        assert len(await wait_for(build_finished)) == 1

        # A push by hand (not through Assent) starts a build of its own.
        _, work = remote, tmp_path / "again"
        git("clone", "--quiet", str(remote), str(work))
        (work / "knowledge/policy.md").write_text("Nine days.\n")
        commit_all(work, "by hand")
        git("push", "--quiet", "origin", "HEAD:trunk", cwd=work)
        by_hand = git("--git-dir", str(remote), "rev-parse", "trunk").strip()
        body = github_push(remote, by_hand)
        async with httpx.AsyncClient(base_url=stack.gateway_url) as anonymous:
            pushed = await anonymous.post("/api/webhooks/github", content=body, headers=signed(body))
        assert pushed.status_code == 202, pushed.text
        other = pushed.json()["results"][0]["build_id"]
        assert other != build_id

        async def built() -> bool:
            b = (await http.get(f"/api/agents/{world.agent_id}/builds/{other}")).json()
            return b["status"] == "succeeded"

        await wait_for(built, timeout=30)


async def test_a_deploy_that_does_not_start_keeps_the_approval_names_the_commit_and_retries(
    stack: Stack, target_server: TargetServer
) -> None:
    async with stack.http() as http:
        world = await source_world(http)
        await settings(http, world.agent_id, target={"kind": "webhook", "url": target_server.url})
        outcome = await approved(http, stack, world, {"skills/refunds.md": "# Refunds\nConfirm first.\n"})
        commit, deploy_id = outcome["effects"]["commit"], outcome["effects"]["deploy_id"]
        failed = await deploy_state(http, world.agent_id, deploy_id, "failed", "live")
        assert failed["status"] == "failed"
        assert commit[:12] in failed["error"] and "503" in failed["error"] and "Retry" in failed["error"]
        item = (await page(http, world.agent_id))["decided"][0]
        assert item["status"] == "approved" and item["deploy"]["error"] == failed["error"]
        assert git("--git-dir", str(hosted_path(stack, world.agent_id)), "rev-parse", "main").strip() == commit

        promote = await http.post(f"/api/agents/{world.agent_id}/deploys/{deploy_id}/promote")
        assert promote.status_code == 409 and "retry it first" in promote.text
        retried = await http.post(f"/api/agents/{world.agent_id}/deploys/{deploy_id}/retry")
        assert retried.status_code == 202, retried.text
        live = await deploy_state(http, world.agent_id, deploy_id, "live")
        assert live["error"] is None
        again = await http.post(f"/api/agents/{world.agent_id}/deploys/{deploy_id}/retry")
        assert again.status_code == 409 and "only a deploy that did not start" in again.text

        digest = (await http.get(f"/api/agents/{world.agent_id}/builds/{live['build_id']}")).json()["artifact_digest"]
        assert [(b["action"], b["agent_id"], b["commit"], b["artifact_digest"]) for b in target_server.bodies] == [
            ("start", world.agent_id, commit, digest),
            ("start", world.agent_id, commit, digest),
            ("promote", world.agent_id, commit, digest),
        ]
        kinds = [e["type"] for e in await events(stack, world.agent_id, "DeployFailed", "DeployStarted", "DeployLive")]
        assert kinds == ["DeployFailed", "DeployStarted", "DeployLive"]
        feed = (await http.get("/api/activity", params={"agent_id": world.agent_id})).json()["entries"]
        assert sorted(e["what"] for e in feed) == ["approved", "deploy", "deploy failed"]


async def test_with_auto_promote_off_a_deploy_waits_until_someone_allowed_promotes_it(stack: Stack) -> None:
    async with stack.http() as http:
        world = await source_world(http)
        await settings(http, world.agent_id, auto_promote=False)
        outcome = await approved(http, stack, world, {"skills/refunds.md": "# Refunds\nConfirm first.\n"})
        commit, deploy_id = outcome["effects"]["commit"], outcome["effects"]["deploy_id"]
        started = await deploy_state(http, world.agent_id, deploy_id, "started", "live")
        assert started["status"] == "started" and started["auto_promote"] is False
        recorded = local_target(stack, world.agent_id)
        assert recorded["staged"]["source_version"] == commit and recorded["live"] is None

        async with stack.http() as other:
            as_admin_of(other, world.org_id, "vic@acme.example", ("viewer",))
            refused = await other.post(f"/api/agents/{world.agent_id}/deploys/{deploy_id}/promote")
            assert refused.status_code == 403
            as_admin_of(other, world.org_id, "rita@acme.example", ("reviewer",))
            assert (await other.post(f"/api/agents/{world.agent_id}/deploys/{deploy_id}/promote")).status_code == 403
            as_admin_of(other, f"org_other_{uuid.uuid4().hex[:6]}")
            walled = await other.post(f"/api/agents/{world.agent_id}/deploys/{deploy_id}/promote")
            assert walled.status_code == 404
            as_admin_of(other, world.org_id, "dev@acme.example", ("developer",))
            promoted = await other.post(f"/api/agents/{world.agent_id}/deploys/{deploy_id}/promote")
            assert promoted.status_code == 200, promoted.text
            assert promoted.json()["status"] == "live" and promoted.json()["promoted_by"] == "dev@acme.example"
        again = await http.post(f"/api/agents/{world.agent_id}/deploys/{deploy_id}/promote")
        assert again.status_code == 409 and "live already" in again.text
        assert local_target(stack, world.agent_id)["live"]["source_version"] == commit
        seen = await events(stack, world.agent_id, "DeployPromoted", "DeployLive")
        assert [(e["type"], e.get("actor") or e.get("promoted_by")) for e in seen] == [
            ("DeployPromoted", "dev@acme.example"),
            ("DeployLive", "dev@acme.example"),
        ]
        feed = (await http.get("/api/activity", params={"agent_id": world.agent_id})).json()["entries"]
        assert [e["what"] for e in feed][:1] == ["promote"] and sorted(e["what"] for e in feed) == [
            "approved",
            "deploy",
            "promote",
        ]


async def test_an_issue_fix_commits_its_evals_and_links_its_deploy_to_the_issue(stack: Stack, tmp_path: Path) -> None:
    remote, _ = remote_repo(tmp_path)
    async with stack.http() as http:
        world = await external_world(http, f"file://{remote}")
        created = await http.post(
            f"/api/workspace/agents/{world.agent_id}/issues",
            json={"title": "Refunds without confirmation", "evals": {"evals/confirm.json": EVAL}},
        )
        assert created.status_code == 201, created.text
        issue = created.json()
        outcome = await approved(
            http,
            stack,
            world,
            {"skills/refunds.md": "# Refunds\nConfirm first.\n"},
            propose={"issue_id": issue["issue_id"]},
        )
        commit, deploy_id = outcome["effects"]["commit"], outcome["effects"]["deploy_id"]
        assert git("--git-dir", str(remote), "rev-parse", "trunk").strip() == commit
        files = git("--git-dir", str(remote), "show", "--name-only", "--format=", commit).split()
        assert sorted(files) == ["evals/confirm.json", "skills/refunds.md"]
        live = await deploy_state(http, world.agent_id, deploy_id, "live")
        assert live["issue_id"] == issue["issue_id"]
        fixed = (await http.get(f"/api/workspace/agents/{world.agent_id}/issues/{issue['issue_id']}")).json()
        assert fixed["status"] == "fixed" and fixed["fix_deploy_id"] == deploy_id
        feed = (await http.get("/api/activity", params={"agent_id": world.agent_id})).json()["entries"]
        links = [e for e in feed if e["what"] == "link fix"]
        assert len(links) == 1 and links[0]["who"] == OPERATOR
        assert links[0]["links"]["issue"] == f"/api/workspace/agents/{world.agent_id}/issues/{issue['issue_id']}"
        assert links[0]["links"]["deploy"].endswith(deploy_id)
        linked = await events(stack, world.agent_id, "IssueFixLinked")
        assert [(e["issue_id"], e["deploy_id"]) for e in linked] == [(issue["issue_id"], deploy_id)]


async def test_deploys_builds_and_settings_are_walled_by_organisation(stack: Stack) -> None:
    async with stack.http() as http:
        world = await source_world(http)
        outcome = await approved(http, stack, world, {"skills/refunds.md": "# Refunds\nConfirm first.\n"})
        deploy_id, build_id = outcome["effects"]["deploy_id"], outcome["effects"]["build_id"]
        await deploy_state(http, world.agent_id, deploy_id, "live")
        async with stack.http() as other:
            as_admin_of(other, f"org_other_{uuid.uuid4().hex[:6]}")
            base = f"/api/agents/{world.agent_id}"
            for method, path, body in [
                ("GET", f"{base}/deploys", None),
                ("GET", f"{base}/deploys/{deploy_id}", None),
                ("POST", f"{base}/deploys/{deploy_id}/promote", None),
                ("POST", f"{base}/deploys/{deploy_id}/retry", None),
                ("GET", f"{base}/builds", None),
                ("GET", f"{base}/builds/{build_id}", None),
                ("POST", f"{base}/builds", {}),
                ("GET", f"/api/workspace/agents/{world.agent_id}/deploy-settings", None),
                ("PUT", f"/api/workspace/agents/{world.agent_id}/deploy-settings", {"auto_promote": False}),
            ]:
                response = await other.request(method, path, json=body)
                assert response.status_code == 404, (method, path, response.text)
            feed = (await other.get("/api/activity", params={"agent_id": world.agent_id})).json()["entries"]
            assert feed == []
        bad = await http.put(
            f"/api/workspace/agents/{world.agent_id}/deploy-settings", json={"target": {"kind": "ftp"}}
        )
        assert bad.status_code == 422 and "'local', 'webhook', 'kubernetes'" in bad.text
        hosted = await http.put(
            f"/api/workspace/agents/{world.agent_id}/deploy-settings", json={"builds_on_push": True}
        )
        assert hosted.status_code == 422 and "no pushes" in hosted.text
        missing = await http.get(f"/api/agents/{world.agent_id}/deploys/dep_nope")
        assert missing.status_code == 404


async def test_kill_9_between_commit_and_deploy_commits_once_and_deploys_once(endpoints: Any, tmp_path: Path) -> None:
    extra = {"ASSENT_DECISION_TIMEOUT_SECONDS": "90"}
    async with running_stack(endpoints, tmp_path, extra_env=extra) as stack, stack.http() as http:
        world = await source_world(http)
        async with stack.coach() as coach:
            session = await chat(coach, world)
            pid = proposal_id(await propose(session, world.agent_id, {"skills/refunds.md": "# Refunds\nOnce.\n"}))
            await projected(http, session.session_id, pid)
        deployer = stack.system.deployer
        await asyncio.to_thread(deployer.stop)
        await asyncio.to_thread(deployer.start, {"ASSENT_CRASH_AT": "deployer.approve.after_commit"})
        decision = asyncio.create_task(decide(http, world.agent_id, pid, "approve"))
        assert await asyncio.to_thread(deployer.wait_exit, 60) == -9
        repo = hosted_path(stack, world.agent_id)
        committed = git("--git-dir", str(repo), "log", "--format=%H", "--grep", pid, "main").split()
        assert len(committed) == 1  # committed before the crash; nothing recorded yet
        await asyncio.to_thread(deployer.start)

        answer = await decision
        assert answer.status_code == 200, answer.text
        effects = answer.json()["effects"]
        assert effects["commit"] == committed[0]
        assert git("--git-dir", str(repo), "log", "--format=%H", "--grep", pid, "main").split() == committed
        live = await deploy_state(http, world.agent_id, effects["deploy_id"], "live")
        deploys = (await http.get(f"/api/agents/{world.agent_id}/deploys")).json()["deploys"]
        assert [d["deploy_id"] for d in deploys] == [live["deploy_id"]]
        history = local_target(stack, world.agent_id)["history"]
        assert [(h["deploy_id"], h["action"], h["source_version"]) for h in history] == [
            (live["deploy_id"], "start", committed[0]),
            (live["deploy_id"], "promote", committed[0]),
        ]

        async def went_live() -> list[dict[str, Any]] | None:
            return await events(stack, world.agent_id, "DeployLive") or None  # published just after its commit

        assert len(await wait_for(went_live)) == 1
