"""The public routes' declarations (:mod:`assent.api`): each is one route of one owner, an owner that lacks a
handler for one does not start, and the patterns the document states say what the rules behind them say."""

from __future__ import annotations

import re
import subprocess

import pytest
from fastapi import APIRouter
from hypothesis import given, settings
from hypothesis import strategies as st

from assent.api import ROUTES, Caller, Permission, PublicRoute, RequestModel, Wall, error_statuses, mismatches, serve
from assent.api.source import BRANCH_NAME, REPOSITORY_PATH, folder_clash, repository_path
from assent.domain import Refusal

DERANDOMIZED = settings(derandomize=True, max_examples=300, database=None)


def test_each_route_is_declared_once_and_says_what_it_answers() -> None:
    public = [(r.method, r.public_path) for r in ROUTES]
    assert len(public) == len(set(public))
    internal = [(r.owner, r.method, r.internal_path) for r in ROUTES]
    assert len(internal) == len(set(internal))
    names = [(r.owner, r.name) for r in ROUTES]
    assert len(names) == len(set(names))
    for route in ROUTES:
        assert route.public_path.startswith("/api/"), route.name
        statuses = error_statuses(route)
        assert {422, 503} <= set(statuses), route.name
        if route.wall is Wall.ORG:
            assert {401, 403, 404} <= set(statuses), route.name
        if route.body is not None and isinstance(route.body, type):
            assert issubclass(route.body, RequestModel), route.name  # unknown fields are refused


class Thing(RequestModel):
    name: str


THING = PublicRoute(
    "things", "PUT", "/things/{thing_id}", "put_thing", "Put", Permission.CHANGE_WORKSPACE, "t", body=Thing
)


def test_an_owner_without_a_handler_for_a_declared_route_does_not_start() -> None:
    class Nothing:
        pass

    class Mismatched:
        async def put_thing(self, caller: Caller, thing: str, body: Thing) -> None: ...

    class Fits:
        async def put_thing(self, caller: Caller, thing_id: str, body: Thing) -> None: ...

    assert mismatches([THING], [Nothing()]) == ["PUT /things/{thing_id}: no handler put_thing"]
    with pytest.raises(RuntimeError, match="no handler put_thing"):
        serve(APIRouter(), [THING], Nothing())
    with pytest.raises(RuntimeError, match="takes"):
        serve(APIRouter(), [THING], Mismatched())
    router = APIRouter(prefix="/internal")
    serve(router, [THING], Fits())
    assert [(route.path, route.methods) for route in router.routes] == [("/internal/things/{thing_id}", {"PUT"})]


def test_a_route_on_an_agent_names_the_agent() -> None:
    with pytest.raises(ValueError, match="agent's id"):
        PublicRoute("o", "PUT", "/things/{thing_id}", "put", "Put", Permission.CHANGE_AGENT, "t")


def test_a_request_schema_holds_no_null_default_it_refuses() -> None:
    from assent.http import Omissible

    class Patch(RequestModel):
        title: Omissible[str] = None
        guild_id: str | None = None

    properties = Patch.model_json_schema()["properties"]
    assert "default" not in properties["title"] and properties["title"]["type"] == "string"
    assert properties["guild_id"]["default"] is None


# --- the patterns say what the rules say ----------------------------------------------------------------------

PATH_PARTS = st.sampled_from(["a", "b.md", ".", "..", ".git", ".GIT.", ".git ", "git~1", "", " ", "x\\y", "é", "\x01"])


@DERANDOMIZED
@given(st.lists(PATH_PARTS, min_size=1, max_size=4).map("/".join) | st.text(max_size=12))
def test_the_repository_path_pattern_accepts_what_the_rule_accepts(path: str) -> None:
    assert (re.fullmatch(REPOSITORY_PATH, path) is not None) == (not isinstance(repository_path(path), Refusal))


BRANCHES = [
    "main", "feature/x", "a.b", "release-1.0", "assent/confirm", "é", "HEAD", "@", "-x", "/x", "x/", "x.", ".x",
    "a/.b", "a..b", "a//b", "a@{b", "a.lock", "a.lock/b", "a b", "a~b", "a^b", "a:b", "a?b", "a*b", "a[b", "a\\b",
    "a\x7fb", "x" * 200, "head", "a@b", "a.lockb",
]  # fmt: skip


@pytest.mark.parametrize("name", BRANCHES)
def test_the_branch_pattern_accepts_what_git_accepts(name: str) -> None:
    git = subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], capture_output=True, check=False)
    accepted = git.returncode == 0 and not name.startswith("-") and name != "HEAD"  # as `git branch` takes it
    assert (re.fullmatch(BRANCH_NAME, name) is not None) == accepted, name


def test_every_route_declares_its_answer() -> None:
    assert [route.name for route in ROUTES if route.response is None] == []


def test_a_file_that_is_a_folder_of_another_is_no_tree() -> None:
    assert folder_clash(["a.md", "a.md/b.md"]) == "a.md"
    assert folder_clash(["x/y", "x/y/z"]) == "x/y"
    assert folder_clash(["a", "a-b/c", "ab", "a.b/c"]) is None
