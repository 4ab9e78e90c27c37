"""The deploy rules table by table (approve routes, branch names, push payloads, webhook signatures, promotion and
retry), deterministic artifacts, and the local and webhook targets (the latter against a real local server)."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from assent.domain import Refusal
from deployer.adapters.artifacts import Artifacts, pack
from deployer.adapters.targets import DeployOrder, LocalTarget, TargetError, Targets, WebhookTarget
from deployer.domain.deploys import (
    Route,
    approve_route,
    branch_refusal,
    deploy_error,
    github_signature_ok,
    gitlab_token_ok,
    parse_push,
    promotion_refusal,
    repository_key,
    retry_refusal,
)
from deployer_contract.deploys import LocalTarget as LocalConfig
from deployer_contract.deploys import Target

COMMIT = "a" * 40

ROUTES: list[tuple[str, dict[str, Any], Route | str]] = [
    ("external", {}, Route("production", "main")),
    ("external", {"branch": {"kind": "production"}, "message": "Do it"}, Route("production", "main", "Do it")),
    ("external", {"branch": {"kind": "new", "name": "fix/x"}}, Route("new", "fix/x")),
    ("external", {"branch": {"kind": "existing", "name": "dev"}}, Route("existing", "dev")),
    ("hosted", {}, Route("production", "main")),
    ("hosted", {"branch": {"kind": "new", "name": "x"}}, "hosted_has_no_branches"),
    ("external", {"branch": {"kind": "new"}}, "bad_branch"),
    ("external", {"branch": {"kind": "sideways", "name": "x"}}, "bad_branch"),
    ("external", {"branch": {"kind": "new", "name": "main"}}, "bad_branch"),
    ("external", {"branch": {"kind": "new", "name": "a..b"}}, "bad_branch"),
    ("external", {"branch": "dev"}, "bad_branch"),
    ("external", {"message": "  "}, "bad_message"),
    ("external", {"message": "x" * 4001}, "bad_message"),
    ("external", {"message": "Fix\x00it"}, "bad_message"),
]


@pytest.mark.parametrize(("mode", "options", "expected"), ROUTES)
def test_approve_routes(mode: str, options: dict[str, Any], expected: Route | str) -> None:
    route = approve_route(mode, "main", options)
    if isinstance(expected, Route):
        assert route == expected
        assert route.deploys == (expected.kind == "production")
    else:
        assert isinstance(route, Refusal) and route.code == expected and route.status == 422


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("feature", True),
        ("assent/fix-1", True),
        ("v1.2", True),
        ("", False),
        ("-x", False),
        ("a..b", False),
        ("a b", False),
        ("a~1", False),
        ("x.lock", False),
        ("x/", False),
        ("/x", False),
        ("a//b", False),
        ("a@{1}", False),
        ("HEAD", False),
        ("a:b", False),
        ("x" * 201, False),
    ],
)
def test_branch_names(name: str, ok: bool) -> None:
    assert (branch_refusal(name) is None) is ok


PUSHES: list[tuple[str, dict[str, Any], tuple[tuple[str, ...], str | None, str | None] | None]] = [
    (
        "github",
        {"ref": "refs/heads/main", "after": COMMIT, "repository": {"clone_url": "https://github.com/o/r.git"}},
        (("https://github.com/o/r.git",), "main", COMMIT),
    ),
    (
        "github",
        {"ref": "refs/tags/v1", "after": COMMIT, "repository": {"ssh_url": "git@github.com:o/r.git"}},
        (("git@github.com:o/r.git",), None, COMMIT),
    ),
    (
        "github",
        {"ref": "refs/heads/main", "after": "0" * 40, "repository": {"html_url": "https://github.com/o/r"}},
        (("https://github.com/o/r",), "main", None),
    ),
    (
        "gitlab",
        {"ref": "refs/heads/dev", "after": COMMIT, "project": {"git_http_url": "https://gitlab.com/o/r.git"}},
        (("https://gitlab.com/o/r.git",), "dev", COMMIT),
    ),
    ("gitlab", {"ref": "refs/heads/dev", "after": COMMIT}, None),
    ("bitbucket", {"ref": "refs/heads/dev", "repository": {"url": "x"}}, None),
]


@pytest.mark.parametrize(("provider", "payload", "expected"), PUSHES)
def test_push_payloads(provider: str, payload: dict[str, Any], expected: Any) -> None:
    push = parse_push(provider, payload)
    assert (None if push is None else (push.urls, push.branch, push.commit)) == expected


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("git@github.com:Acme/Ada.git", "https://github.com/acme/ada"),
        ("https://user:pw@gitlab.com/o/r.git", "https://gitlab.com/o/r/"),
        ("ssh://git@github.com/o/r.git", "https://github.com/o/r"),
        ("file:///tmp/r.git", "file:///tmp/r"),
    ],
)
def test_one_repository_in_every_spelling(a: str, b: str) -> None:
    assert repository_key(a) == repository_key(b)


def test_webhook_signatures_and_tokens() -> None:
    body = b'{"ref": "refs/heads/main"}'
    good = "sha256=" + hmac.new(b"secret", body, hashlib.sha256).hexdigest()
    assert github_signature_ok("secret", body, good)
    assert not github_signature_ok("other", body, good)
    assert not github_signature_ok("secret", body + b" ", good)
    assert not github_signature_ok("secret", body, good.removeprefix("sha256="))
    assert not github_signature_ok("secret", body, None)
    assert gitlab_token_ok("secret", "secret")
    assert not gitlab_token_ok("secret", "Secret") and not gitlab_token_ok("secret", None)


@pytest.mark.parametrize(
    ("status", "promote", "retry"),
    [
        ("pending", "not_started", "not_failed"),
        ("started", None, "not_failed"),
        ("live", "already_live", "not_failed"),
        ("failed", "deploy_failed", None),
    ],
)
def test_what_promotion_and_retry_accept(status: str, promote: str | None, retry: str | None) -> None:
    refusal = promotion_refusal(status, "dep_1")
    assert (None if refusal is None else refusal.code) == promote
    refusal = retry_refusal(status, "dep_1")
    assert (None if refusal is None else refusal.code) == retry


def test_a_deploy_error_names_the_commit() -> None:
    assert COMMIT[:12] in deploy_error(COMMIT, "the target answered 503")


def test_an_artifact_is_deterministic_and_named_by_its_content(tmp_path: Path) -> None:
    files = [("b.md", 0o100644, b"b\n"), ("a/run.sh", 0o100755, b"#!/bin/sh\n")]
    first, second = pack(files), pack(list(reversed(files)))
    assert first == second
    store = Artifacts(tmp_path)
    name = store.store(first)
    assert name == "sha256:" + hashlib.sha256(first).hexdigest() and store.store(second) == name
    assert store.path(name).read_bytes() == first and len(os.listdir(tmp_path)) == 1
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        members = tar.getmembers()
    assert [(m.name, m.mode, m.mtime) for m in members] == [("a/run.sh", 0o755, 0), ("b.md", 0o644, 0)]
    assert pack([("b.md", 0o100644, b"c\n")]) != pack([("b.md", 0o100644, b"b\n")])


ORDER = DeployOrder("dep_1", "acme", "ada", COMMIT, "sha256:" + "0" * 64, "/tmp/x.tar")


async def test_the_local_target_records_each_step_once(tmp_path: Path) -> None:
    target = LocalTarget(tmp_path)
    await target.start(ORDER)
    await target.start(ORDER)  # after a crash: the same request
    staged = target.read("ada")
    assert staged.live is None and staged.staged is not None and staged.staged.source_version == COMMIT
    await target.promote(ORDER)
    state = target.read("ada")
    assert state.live is not None and state.live.deploy_id == "dep_1"
    assert [(h.deploy_id, h.action) for h in state.history] == [("dep_1", "start"), ("dep_1", "promote")]


async def test_the_webhook_target_posts_to_a_real_server_and_names_a_refusal() -> None:
    received: list[tuple[str | None, dict[str, Any]]] = []
    statuses = [200, 200, 500]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(
                (self.headers.get("Authorization"), json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            )
            self.send_response(statuses.pop(0))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        target = WebhookTarget(f"http://127.0.0.1:{server.server_address[1]}/hook", token="t0k")
        await target.start(ORDER)
        await target.promote(ORDER)
        with pytest.raises(TargetError, match="answered 500"):
            await target.start(ORDER)
    finally:
        server.shutdown()
        server.server_close()
    assert [(auth, body["action"], body["commit"], body["artifact_digest"]) for auth, body in received] == [
        ("Bearer t0k", "start", COMMIT, ORDER.artifact_digest),
        ("Bearer t0k", "promote", COMMIT, ORDER.artifact_digest),
        ("Bearer t0k", "start", COMMIT, ORDER.artifact_digest),
    ]


@pytest.mark.parametrize(
    ("config", "refused"),
    [
        ({"kind": "ftp"}, [((), "union_tag_invalid")]),
        ({"kind": "webhook"}, [(("webhook", "url"), "missing")]),
        ({"kind": "webhook", "url": "ftp://x"}, [(("webhook", "url"), "string_pattern_mismatch")]),
        (
            {"kind": "kubernetes", "deployment": "ada"},
            [(("kubernetes", "container"), "missing"), (("kubernetes", "image"), "missing")],
        ),
        ({"kind": "local"}, []),
        ({"kind": "webhook", "url": "https://cd.example/hook", "token": "t0k"}, []),
        ({"kind": "kubernetes", "deployment": "ada", "container": "agent", "image": "registry.example/ada"}, []),
    ],
)
def test_target_configurations(tmp_path: Path, config: dict[str, Any], refused: list[tuple[Any, str]]) -> None:
    """A target's configuration (the Deploys settings', ``ASSENT_DEPLOY_TARGET``) names a target it can deploy to."""
    try:
        target = Targets(tmp_path, LocalConfig(kind="local")).get(TypeAdapter(Target).validate_python(config))
    except ValidationError as exc:
        assert [(error["loc"], error["type"]) for error in exc.errors()] == refused
    else:
        assert refused == [] and target.kind == config["kind"]
