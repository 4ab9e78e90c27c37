"""The deployer's pure rules, table by table: paths, secrets and formats, who asked, carrying files over."""

from __future__ import annotations

import json

import pytest

from assent.contracts import Requester
from assent.domain import Refusal
from deployer.adapters.formats import load_docs, load_schemas
from deployer.domain import checks, paths
from deployer.domain.proposals import FileChange, carry_over, fit_budget, text_hash, who_asked

TOP = paths.layout(["skills/a.md", "knowledge/b.md", "tools/t/index.ts"])
AMODAL = paths.layout(["amodal/skills/a.md", "amodal/tools/t/index.ts", "knowledge/b.md"])
SCHEMAS = load_schemas()


@pytest.mark.parametrize(
    ("path", "loads", "code", "words"),
    [
        ("agents/main/AGENT.md", TOP, None, ""),
        ("agents/support/AGENT.md", TOP, None, ""),
        ("skills/refunds.md", TOP, None, ""),
        ("knowledge/faq.md", TOP, None, ""),
        ("tools/lookup/index.ts", TOP, None, ""),
        ("tools/lookup/lib/a.mts", TOP, None, ""),
        ("tools/lookup/a.js", TOP, None, ""),
        ("tools/lookup/a.mjs", TOP, None, ""),
        ("amodal/skills/refunds.md", AMODAL, None, ""),
        ("amodal/tools/lookup/index.ts", AMODAL, None, ""),
        ("knowledge/faq.md", AMODAL, None, ""),
        ("skills/refunds.md", AMODAL, "wrong_location", "amodal/skills/refunds.md"),
        ("tools/lookup/index.ts", AMODAL, "wrong_location", "amodal/tools/lookup/index.ts"),
        ("amodal/knowledge/faq.md", AMODAL, "wrong_location", "knowledge/faq.md"),
        ("amodal/skills/refunds.md", TOP, "wrong_location", "skills/refunds.md"),
        ("amodal.json", TOP, "path_refused", "amodal.json"),
        ("agents/main/agent.json", TOP, "path_refused", "agent.json"),
        ("agents/main/agent.ts", TOP, "path_refused", "agent.ts"),
        ("tools/lookup/tool.json", TOP, "path_refused", "tool.json"),
        ("package.json", TOP, "path_refused", "package.json"),
        ("tools/lookup/package.json", TOP, "path_refused", "package.json"),
        ("connections/zd/spec.json", TOP, "path_refused", "only Markdown"),
        ("connections/zd/notes.md", TOP, "path_refused", "only Markdown"),
        (".env", TOP, "path_refused", ".env"),
        ("agents/main/.env.local", TOP, "path_refused", ".env.local"),
        ("skills/a.txt", TOP, "path_refused", "only Markdown"),
        ("tools/index.ts", TOP, "path_refused", "only Markdown"),
        ("tools/lookup/README.md", TOP, "path_refused", "only Markdown"),
        ("amodal/agents/main/AGENT.md", TOP, "path_refused", "only Markdown"),
        ("stores/a.json", TOP, "path_refused", "only Markdown"),
        ("evals/a.json", TOP, "path_refused", "only Markdown"),
        ("README.md", TOP, "path_refused", "only Markdown"),
        ("agents/main/key.pem", TOP, "path_refused", "key.pem"),
    ],
)
def test_what_an_agent_may_propose(path: str, loads: dict[str, str], code: str | None, words: str) -> None:
    refusal = paths.check_agent_path(path, loads)
    if code is None:
        assert refusal is None
    else:
        assert refusal is not None and refusal.code == code and words in refusal.message and path in refusal.message


@pytest.mark.parametrize(
    ("path", "exists", "code"),
    [
        ("amodal.json", True, None),
        ("package.json", True, None),
        ("agents/main/agent.json", True, None),
        ("connections/zd/spec.json", False, None),
        ("hooks/on_start.ts", False, None),
        ("skills/new.md", False, None),
        ("amodal/skills/new.md", False, "wrong_location"),
        ("amodal/skills/old.md", True, None),
        (".env", False, "path_refused"),
        ("a/.env.production", False, "path_refused"),
        ("secrets/prod.env", False, "path_refused"),
        ("certs/server.key", False, "path_refused"),
        ("id_ed25519", False, "path_refused"),
        ("node_modules/x/a.js", False, "path_refused"),
        ("dist/a.js", True, "path_refused"),
        ("build/a.js", True, "path_refused"),
        ("coverage/lcov.info", True, "path_refused"),
        (".git/config", True, "path_refused"),
        ("web/.next/a.json", True, "path_refused"),
    ],
)
def test_what_the_builder_may_propose(path: str, exists: bool, code: str | None) -> None:
    refusal = paths.check_builder_path(path, TOP, exists=exists)
    assert (refusal.code if refusal else None) == code


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("skills/refunds.md", None),
        (".gitignore", None),
        ("docs/.github/workflow.yml", None),
        ("a/git/b.md", None),
        ("", "invalid_path"),
        ("/etc/passwd", "invalid_path"),
        ("../x.md", "invalid_path"),
        ("../../etc/passwd", "invalid_path"),
        ("a/../b", "invalid_path"),
        ("a/..", "invalid_path"),
        ("a//b", "invalid_path"),
        ("./a", "invalid_path"),
        ("a/", "invalid_path"),
        ("a\\b", "invalid_path"),
        ("..\\x", "invalid_path"),
        ("a\nb", "invalid_path"),
        ("a\x00b", "invalid_path"),
        ("x" * 501, "invalid_path"),
        (".git/config", "path_refused"),
        (".git", "path_refused"),
        ("sub/.git/hooks/pre-commit", "path_refused"),
        ("sub/.git", "path_refused"),
        (".GIT/config", "path_refused"),
        (".Git/HEAD", "path_refused"),
        (".git./config", "path_refused"),
        (".git /config", "path_refused"),
        ("git~1/config", "path_refused"),
    ],
)
def test_a_path_names_a_file_inside_the_repository_and_outside_git_s_folder(path: str, code: str | None) -> None:
    """What git itself would refuse (a path leaving the repository, or into ``.git/`` as git or NTFS reads it)
    is refused before git is asked, naming the path."""
    normal = paths.normalize(path)
    if code is None:
        assert normal == path
    else:
        assert isinstance(normal, Refusal) and (normal.code, normal.status) == (code, 422)
        assert repr(path) in normal.message or path in normal.message


CONNECTION = {"name": "zd", "baseUrl": "https://z.example", "auth": {"type": "bearer", "token": "env:ZD_TOKEN"}}
STORE = {"name": "orders", "entity": {"name": "Order", "key": "{id}", "schema": {"id": {"type": "string"}}}}
EVAL = {"name": "e", "query": "q", "assertions": [{"type": "contains", "value": "x"}]}


@pytest.mark.parametrize(
    ("path", "text", "code", "words"),
    [
        ("connections/zd/spec.json", json.dumps(CONNECTION), None, ""),
        ("amodal/connections/zd/spec.json", json.dumps(CONNECTION), None, ""),
        ("stores/orders.json", json.dumps(STORE), None, ""),
        ("evals/refund.json", json.dumps(EVAL), None, ""),
        ("evals/regressions/refund.json", json.dumps(EVAL), None, ""),
        ("skills/a.md", "# Use env:ZD_TOKEN\n", None, ""),
        ("amodal.json", '{"name": "x"}', None, ""),
        (
            "connections/zd/spec.json",
            json.dumps({**CONNECTION, "auth": {"type": "bearer", "token": "abc"}}),
            "literal_credential",
            "auth.token",
        ),
        (
            "connections/zd/spec.json",
            json.dumps({**CONNECTION, "headers": {"X-Api-Key": "abc"}}),
            "literal_credential",
            "headers.X-Api-Key",
        ),
        ("tools/t/spec.json", json.dumps({"password": "hunter2"}), "literal_credential", "password"),
        ("connections/zd/spec.json", json.dumps({"name": "zd"}), "invalid_format", "'baseUrl' is a required"),
        ("connections/zd/spec.json", json.dumps({**CONNECTION, "baseUrl": "ftp://x"}), "invalid_format", "baseUrl"),
        ("stores/orders.json", json.dumps({"name": "orders"}), "invalid_format", "'entity' is a required"),
        ("evals/refund.json", json.dumps({**EVAL, "assertions": []}), "invalid_format", "assertions"),
        ("evals/refund.json", json.dumps({**EVAL, "extra": 1}), "invalid_format", "extra"),
        ("config.json", "{nope", "invalid_json", "line 1"),
        ("skills/a.md", "-----BEGIN RSA PRIVATE KEY-----\n", "secret_value", "private key"),
        ("skills/a.md", "AKIAABCDEFGHIJKLMNOP", "secret_value", "AWS"),
        ("a.ts", "const t = 'ghp_" + "a" * 36 + "'", "secret_value", "GitHub"),
        ("a.ts", "xoxb-1234567890-abcdef", "secret_value", "Slack"),
        ("a.md", "sk-ant-" + "a" * 30, "secret_value", "API secret"),
    ],
)
def test_secrets_and_formats(path: str, text: str, code: str | None, words: str) -> None:
    refusal = checks.check_file(path, text, SCHEMAS)
    if code is None:
        assert refusal is None, refusal
    else:
        assert refusal is not None and refusal.code == code, refusal
        assert path in refusal.message and words in refusal.message, refusal.message


@pytest.mark.parametrize(
    ("requester", "shown"),
    [
        (Requester(user_id="u1", email="sam@acme.example", org_id="acme"), "sam@acme.example"),
        (Requester(user_id="u1", email="sam@acme.example"), "sam@acme.example"),
        (Requester(user_id="u2", email="x@other.example", org_id="other"), "u2"),
        (Requester(user_id=None), None),
        (None, "olga"),
    ],
)
def test_who_asked(requester: Requester | None, shown: str | None) -> None:
    assert who_asked(requester, "olga", "acme") == shown


def test_a_new_proposal_keeps_the_files_so_far_but_those_changed_in_the_repository() -> None:
    previous = [
        FileChange(path=path, before=before, after=after)
        for path, before, after in (("a.md", "a\n", "a2\n"), ("b.md", "b\n", "b2\n"), ("c.md", None, "c\n"))
    ]
    heads = {"a.md": text_hash("a\n"), "b.md": text_hash("changed\n"), "c.md": None}
    kept, left_out = carry_over(previous, ["a.md"], heads)
    assert [c.path for c in kept] == ["c.md"] and left_out == ["b.md"]


def test_the_read_budget_lists_what_does_not_fit() -> None:
    read, listed = fit_budget([("b", 100_000), ("a", 50_000), ("c", 20_000), ("d", 5_000)])
    assert read == ["a", "b", "d"] and listed == ["c"]


def test_the_docs_and_schemas_ship_with_the_service() -> None:
    docs = load_docs()
    assert {"source-layout", "connections", "stores", "evals", "skills", "tools", "proposals"} <= set(docs)
    assert set(SCHEMAS) == {"connection", "store", "eval"}


@pytest.mark.parametrize(
    ("provider", "remote", "link"),
    [
        ("github", "https://github.com/acme/ada.git", "https://github.com/acme/ada/compare/main...fix?expand=1"),
        ("github", "git@github.com:acme/ada.git", "https://github.com/acme/ada/compare/main...fix?expand=1"),
        ("github", "https://user:pw@github.com/acme/ada", "https://github.com/acme/ada/compare/main...fix?expand=1"),
        (
            "gitlab",
            "https://gitlab.com/acme/ada.git",
            "https://gitlab.com/acme/ada/-/merge_requests/new?merge_request%5Bsource_branch%5D=fix"
            "&merge_request%5Btarget_branch%5D=main",
        ),
    ],
)
def test_pull_and_merge_request_links(provider: str, remote: str, link: str) -> None:
    from deployer.domain.links import change_request_link

    assert change_request_link(provider, remote, "main", "fix") == link
