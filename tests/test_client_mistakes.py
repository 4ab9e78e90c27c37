"""A client's mistake on the deployer's endpoints is a 4xx naming the field or the path, never a 5xx: a null
where the field may only be left out, a NUL character (PostgreSQL's text cannot hold one, nor can git's commit
message), a file path outside the repository or under ``.git/``. Each body is sent through the gateway's public
API and straight to the deployer's internal API, which refuses it on its own too. Real Kafka, PostgreSQL, Redis
and git."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import Stack
from tests.test_source_proposals import source_world

pytestmark = pytest.mark.integration

NUL = "\x00"


def refused_at(response: httpx.Response, *loc: str, words: str) -> None:
    """422, with a validation error at ``body.<loc...>`` whose message holds ``words``."""
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    assert isinstance(errors, list), errors
    found = [e for e in errors if e["loc"][: len(loc) + 1] == ["body", *loc]]
    assert found, (loc, errors)
    assert words in found[0]["msg"], found[0]


async def test_client_mistakes_on_the_deployers_endpoints_are_422_naming_the_field_or_path(stack: Stack) -> None:
    deployer = stack.system.deployer.url
    async with stack.http() as http, httpx.AsyncClient(base_url=deployer, timeout=60) as internal:
        world = await source_world(http)
        agent = world.agent_id
        created = await http.post(f"/api/workspace/agents/{agent}/issues", json={"title": "Refunds go wrong"})
        assert created.status_code == 201, created.text
        issue = f"/agents/{agent}/issues/{created.json()['issue_id']}"
        head = (await http.get(f"/api/workspace/agents/{agent}/repository")).json()["head"]
        cases: list[tuple[str, str, dict[str, Any], tuple[str, ...], str]] = [
            ("PATCH", issue, {"evals": None}, ("evals",), "null"),
            ("PATCH", issue, {"title": None}, ("title",), "null"),
            ("PATCH", issue, {"text": None}, ("text",), "null"),
            ("PATCH", issue, {"status": None}, ("status",), "null"),
            ("PATCH", issue, {"title": f"a{NUL}b"}, ("title",), "NUL"),
            ("PATCH", issue, {"text": f"a{NUL}b"}, ("text",), "NUL"),
            ("POST", f"/agents/{agent}/issues", {"title": f"a{NUL}b"}, ("title",), "NUL"),
            ("POST", f"/agents/{agent}/issues", {"title": "t", "text": f"a{NUL}b"}, ("text",), "NUL"),
            (
                "PUT",
                f"/agents/{agent}/deploy-settings",
                {"target": {"kind": "webhook", "url": f"http://x{NUL}"}},
                ("target", "webhook", "url"),  # the target's kind names the branch of the union
                "NUL",
            ),
            ("PUT", f"/agents/{agent}/deploy-settings", {"auto_promote": None}, ("auto_promote",), "null"),
            ("PUT", f"/agents/{agent}/deploy-settings", {"builds_on_push": None}, ("builds_on_push",), "null"),
            (
                "POST",
                f"/agents/{agent}/repository/commits",
                {"files": {"skills/a.md": "x\n"}, "message": f"a{NUL}b"},
                ("message",),
                "NUL",
            ),
            (
                "POST",
                f"/agents/{agent}/repository/commits",
                {"files": {"../../etc/passwd": "x\n"}, "message": "m"},
                ("files", "../../etc/passwd"),
                "not a relative file path of the repository",
            ),
            (
                "POST",
                f"/agents/{agent}/repository/commits",
                {"files": {".git/config": "x\n"}, "message": "m"},
                ("files", ".git/config"),
                ".git/",
            ),
            (
                "PUT",
                f"/agents/{agent}/repository",
                {"mode": "hosted", "files": {"../x.md": "x\n"}},
                ("hosted", "files", "../x.md"),  # the mode names the branch of the union
                "not a relative file path of the repository",
            ),
        ]
        for method, path, body, loc, words in cases:
            answer = await http.request(method, f"/api/workspace{path}", json=body)
            refused_at(answer, *loc, words=words)
            direct = await internal.request(
                method,
                f"/internal{path}",
                json=body,
                headers={**stack.service_headers("deployer"), "X-Assent-Org": world.org_id, "X-Assent-User": "olga"},
            )
            refused_at(direct, *loc, words=words)
        # Approving with a NUL in the commit message is refused before the decision is looked up.
        answer = await http.post(
            f"/api/agents/{agent}/proposals/prop_nope", json={"decision": "approve", "message": f"a{NUL}"}
        )
        refused_at(answer, "message", words="NUL")
        # A file that would be a folder of another (in the request, or in the repository) is no tree git can write.
        commits = f"/api/workspace/agents/{agent}/repository/commits"
        clash = await http.post(commits, json={"files": {"x.md": "1\n", "x.md/y.md": "2\n"}, "message": "m"})
        refused_at(clash, words="x.md is a file and a folder of another file")
        for files in ({"skills/refunds.md/y.md": "2\n"}, {"skills": "2\n"}):
            clash = await http.post(commits, json={"files": files, "message": "m"})
            assert clash.status_code == 422 and "a file and a folder" in clash.json()["detail"], clash.text
        # Nothing was written: the issue and the repository's head are as they were.
        unchanged = await http.get(f"/api/workspace{issue}")
        assert unchanged.status_code == 200, unchanged.text
        assert (unchanged.json()["title"], unchanged.json()["text"]) == ("Refunds go wrong", "")
        assert (await http.get(f"/api/workspace/agents/{agent}/repository")).json()["head"] == head
