"""A route an owner declares is served at the public address with its permission and its wall, and the gateway's
code is not edited for it: here a toy owner declares a route the gateway has never heard of, serves it with
:func:`assent.api.serve`, and the gateway mounts it from the declaration alone (the real authenticator, permission
check and passing on; the owner is reached in process over ASGI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI, HTTPException
from pydantic import BaseModel

from assent.api import Caller, Permission, PublicRoute, RequestModel, serve
from assent.domain import Agent
from assent.http import Identifier
from assent.service_auth import ServiceSigner
from gateway import api, owner_routes
from gateway.adapters.owners import Owners
from gateway.auth import Authenticator, Gate
from gateway.settings import StaticToken

KEY = "declared-routes-test-key-" + "0123456789abcdef" * 2


class ToyIn(RequestModel):
    colour: Identifier


class Toy(BaseModel):
    agent_id: str
    toy_id: str
    colour: str
    by: str


TOY = PublicRoute(
    "toys",
    "PUT",
    "/agents/{agent_id}/toys/{toy_id}",
    "put_toy",
    "Give an agent a toy",
    Permission.CHANGE_AGENT,
    "toys",
    body=ToyIn,
    response=Toy,
    errors={404: "No such agent in the caller's organisation"},
)
AGENTS = {"ada": Agent("ada", "acme", None, "Ada", editors=("eve@acme",))}


class Toys:
    """The toy owner: it enforces the wall on its own data, as every owner does."""

    def __init__(self) -> None:
        self.calls: list[Caller] = []

    async def put_toy(self, caller: Caller, agent_id: str, toy_id: str, body: ToyIn) -> dict[str, Any]:
        self.calls.append(caller)
        agent = AGENTS.get(agent_id)
        if agent is None or (caller.org is not None and agent.org_id != caller.org):
            raise HTTPException(404, f"agent {agent_id!r} does not exist")
        return {"agent_id": agent_id, "toy_id": toy_id, "colour": body.colour, "by": caller.actor}


def token(user: str, org: str, role: str) -> StaticToken:
    return StaticToken(user=user, org=org, roles=(role,))  # type: ignore[arg-type]


@pytest.fixture
async def public() -> AsyncIterator[tuple[httpx.AsyncClient, Toys, FastAPI]]:
    toys = Toys()
    owner = FastAPI()
    internal = APIRouter(prefix="/internal")
    serve(internal, [TOY], toys)
    owner.include_router(internal)

    settings = SimpleNamespace(
        api_tokens={
            "admin-acme": token("ólga@acme", "acme", "admin"),  # any user id: headers carry it percent-encoded
            "viewer-acme": token("vic@acme", "acme", "viewer"),
            "editor-acme": token("eve@acme", "acme", "viewer"),
            "admin-other": token("mallory@other", "other", "admin"),
        },
        oidc_jwks_url=None,
    )

    async def agent_of(agent_id: str) -> Agent | None:
        return AGENTS.get(agent_id)

    gateway = FastAPI()
    owners = Owners({"toys": "http://toys.test"}, ServiceSigner("gateway", KEY), transport=httpx.ASGITransport(owner))
    owner_routes.mount(gateway, [TOY], Gate(Authenticator(settings), agent_of), owners)  # type: ignore[arg-type]
    api.errors(gateway)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(gateway), base_url="http://gateway.test") as client:
        yield client, toys, gateway
    await owners.close()


async def put(client: httpx.AsyncClient, who: str | None, body: Any = None, agent: str = "ada") -> httpx.Response:
    headers = {"Authorization": f"Bearer {who}"} if who else {}
    return await client.put(f"/api/workspace/agents/{agent}/toys/t1", json=body or {"colour": "red"}, headers=headers)


async def test_a_declared_route_is_served_with_its_permission_and_wall(
    public: tuple[httpx.AsyncClient, Toys, FastAPI],
) -> None:
    client, toys, _ = public
    assert (await put(client, None)).status_code == 401
    refused = await put(client, "viewer-acme")
    assert refused.status_code == 403 and "own or edit" in refused.json()["detail"]
    assert (await put(client, "viewer-acme", agent="nobody")).status_code == 404  # the gateway's copy: no such agent
    assert toys.calls == []  # refused before the owner is asked

    by_editor = await put(client, "editor-acme", {"colour": "blue"})
    assert by_editor.status_code == 200, by_editor.text
    assert by_editor.json() == {"agent_id": "ada", "toy_id": "t1", "colour": "blue", "by": "eve@acme"}
    assert toys.calls[-1] == Caller("acme", "eve@acme", frozenset({"viewer"}))

    walled = await put(client, "admin-other")  # an admin may change any agent of their own org: the owner's wall
    assert walled.status_code == 404 and walled.json() == {"detail": "agent 'ada' does not exist"}
    assert toys.calls[-1].org == "other"

    calls = len(toys.calls)
    invalid = await put(client, "admin-acme", {"colour": " red", "size": 3})  # checked by the gateway, once declared
    assert invalid.status_code == 422
    assert {tuple(e["loc"]) for e in invalid.json()["detail"]} == {("body", "colour"), ("body", "size")}
    assert len(toys.calls) == calls
    by_admin = await put(client, "admin-acme")
    assert by_admin.status_code == 200 and by_admin.json()["by"] == "ólga@acme", by_admin.text


async def test_the_public_document_tells_the_declared_route(public: tuple[httpx.AsyncClient, Toys, FastAPI]) -> None:
    _, _, gateway = public
    operation = gateway.openapi()["paths"]["/api/workspace/agents/{agent_id}/toys/{toy_id}"]["put"]
    assert sorted(operation["responses"]) == ["200", "400", "401", "403", "404", "408", "422", "503"]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Toy"
    }
    errors = {operation["responses"][s]["content"]["application/json"]["schema"]["$ref"] for s in ("401", "404", "422")}
    assert errors == {"#/components/schemas/Error"}
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ToyIn"}
    assert operation["security"] == [{"HTTPBearer": []}]
