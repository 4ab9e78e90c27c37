"""The public routes' declarations (:mod:`assent.api`): each is one route of one owner, and an owner that lacks a
handler for one does not start."""

from __future__ import annotations

import pytest
from fastapi import APIRouter

from assent.api import ROUTES, Caller, Permission, PublicRoute, RequestModel, Wall, error_statuses, mismatches, serve


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


def test_every_route_declares_its_answer() -> None:
    assert [route.name for route in ROUTES if route.response is None] == []
