"""Who may do what, over every public endpoint, against the real services.

Tokens are minted by the suite's own OpenID Connect issuer and verified by the gateway against its JWKS
(no stub of the verifier). Each endpoint is called as each kind of caller; a refused call changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import OPERATOR, Stack, World, new_world, wait_for
from tests.issuer import test_issuer
from tests.test_memory_edits import memory, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration

CALLERS = (
    "none",
    "expired",
    "wrong_audience",
    "bad_signature",
    "other_org",
    "viewer",
    "reviewer",
    "developer",
    "admin",
)


def token_for(caller: str, world: World) -> str | None:
    issuer = test_issuer()
    if caller == "none":
        return None
    if caller == "expired":
        return issuer.mint(OPERATOR, world.org_id, ("admin",), expires_in=-3600)
    if caller == "wrong_audience":
        return issuer.mint(OPERATOR, world.org_id, ("admin",), audience="another-api")
    if caller == "bad_signature":  # the issuer's key id, another key
        forged = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return issuer.mint(OPERATOR, world.org_id, ("admin",), key=forged)
    if caller == "other_org":
        return issuer.mint(OPERATOR, f"org_other_{uuid.uuid4().hex[:6]}", ("admin",))
    return issuer.mint(f"{caller}@example.com", world.org_id, (caller,))


@dataclass
class Scene:
    world: World
    session_id: str
    seq: int
    note_path: str = ""


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: Callable[[Scene], str]
    access: str  # read | write | decide
    body: Callable[[Scene], Any] | None = None
    allowed_status: int = 200


ENDPOINTS = [
    Endpoint("pending", "GET", lambda s: f"/api/studio/sessions/{s.session_id}/pending", "read"),
    Endpoint("card", "GET", lambda s: f"/api/studio/sessions/{s.session_id}/edits/{s.seq}", "read"),
    Endpoint(
        "decide",
        "POST",
        lambda s: f"/api/studio/sessions/{s.session_id}/edits/{s.seq}",
        "decide",
        lambda s: {"decision": "decline"},
    ),
    Endpoint(
        "continue", "POST", lambda s: f"/api/studio/sessions/{s.session_id}/continue", "write", allowed_status=200
    ),
    Endpoint(
        "create org",
        "POST",
        lambda s: "/api/workspace/orgs",
        "write",
        lambda s: {"org_id": s.world.org_id, "name": "X"},
        409,
    ),
    Endpoint(
        "create guild",
        "POST",
        lambda s: "/api/workspace/guilds",
        "write",
        lambda s: {"guild_id": f"g_{uuid.uuid4().hex[:8]}", "org_id": s.world.org_id, "name": "G"},
        201,
    ),
    Endpoint(
        "create agent",
        "POST",
        lambda s: "/api/workspace/agents",
        "write",
        lambda s: {
            "agent_id": f"a_{uuid.uuid4().hex[:8]}",
            "org_id": s.world.org_id,
            "guild_id": s.world.guild_id,
            "name": "A",
        },
        201,
    ),
    Endpoint("agent", "GET", lambda s: f"/api/workspace/agents/{s.world.agent_id}", "read"),
    Endpoint(
        "patch agent",
        "PATCH",
        lambda s: f"/api/workspace/agents/{s.world.other_agent_id}",
        "write",
        lambda s: {"task": f"T {uuid.uuid4().hex}"},
    ),
    Endpoint("memory", "GET", lambda s: f"/api/workspace/agents/{s.world.agent_id}/memory", "read"),
    Endpoint(
        "write memory",
        "PUT",
        lambda s: f"/api/workspace/agents/{s.world.other_agent_id}/memory",
        "write",
        lambda s: {"content": f"M {uuid.uuid4().hex}\n"},
    ),
    Endpoint("memory history", "GET", lambda s: f"/api/workspace/agents/{s.world.agent_id}/memory/history", "read"),
    Endpoint("guild", "GET", lambda s: f"/api/workspace/guilds/{s.world.guild_id}", "read"),
    Endpoint(
        "patch guild",
        "PATCH",
        lambda s: f"/api/workspace/guilds/{s.world.guild_id}",
        "write",
        lambda s: {"about": uuid.uuid4().hex},
    ),
    Endpoint("guild changes", "GET", lambda s: f"/api/workspace/guilds/{s.world.guild_id}/changes", "read"),
    Endpoint("notes", "GET", lambda s: f"/api/workspace/orgs/{s.world.org_id}/notes", "read"),
    Endpoint("note", "GET", lambda s: f"/api/workspace/orgs/{s.world.org_id}/note?path={s.note_path}", "read"),
    Endpoint(
        "write note",
        "PUT",
        lambda s: f"/api/workspace/orgs/{s.world.org_id}/note?path=org/scratch.md",
        "write",
        lambda s: {"content": uuid.uuid4().hex},
    ),
    Endpoint(
        "note history", "GET", lambda s: f"/api/workspace/orgs/{s.world.org_id}/note/history?path={s.note_path}", "read"
    ),
]


def expected(caller: str, endpoint: Endpoint) -> int:
    if caller in ("none", "expired", "wrong_audience", "bad_signature"):
        return 401
    if caller == "other_org":
        return 404
    if caller in ("viewer", "reviewer") and endpoint.access != "read":
        return 403
    return endpoint.allowed_status


async def snapshot(admin: httpx.AsyncClient, scene: Scene) -> dict[str, Any]:
    """What a refused call must leave as it was."""
    world = scene.world

    async def body(path: str) -> Any:
        response = await admin.get(path)
        assert response.status_code == 200, (path, response.text)
        return response.json()

    pending = await body(f"/api/studio/sessions/{scene.session_id}/pending")
    return {
        "pending": [(item["seq"], item["stale"]) for item in pending["items"]],
        "other_agent": await body(f"/api/workspace/agents/{world.other_agent_id}"),
        "other_memory": await body(f"/api/workspace/agents/{world.other_agent_id}/memory"),
        "guild": await body(f"/api/workspace/guilds/{world.guild_id}"),
        "guild_changes": len(await body(f"/api/workspace/guilds/{world.guild_id}/changes")),
        "notes": await body(f"/api/workspace/orgs/{world.org_id}/notes"),
    }


@pytest.mark.parametrize("caller", CALLERS)
async def test_every_endpoint_answers_each_caller_as_the_roles_say_and_a_refusal_writes_nothing(
    stack: Stack, caller: str
) -> None:
    async with stack.http() as admin, stack.coach() as coach:
        world = await new_world(admin)
        note = await admin.put(
            f"/api/workspace/orgs/{world.org_id}/note?path=org/policy.md", json={"content": "Be kind.\n"}
        )
        assert note.status_code in (200, 201), note.text
        turn = await open_turn(coach, world)
        result = await propose(turn, world.agent_id, "Proposed.\n", (await memory(admin, world.agent_id))["version"])
        assert result.ok, result.error
        await turn.end_step()
        scene = Scene(world, turn.session.session_id, turn.calls[result.tool_call_id].seq, "org/policy.md")
        await wait_pending(admin, scene.session_id, 1)

        token = token_for(caller, world)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(base_url=stack.gateway_url, headers=headers, timeout=60) as http:
            for endpoint in ENDPOINTS:
                before = await snapshot(admin, scene)
                body = endpoint.body(scene) if endpoint.body else None
                response = await http.request(endpoint.method, endpoint.path(scene), json=body)
                want = expected(caller, endpoint)
                assert response.status_code == want, (caller, endpoint.name, response.status_code, response.text)
                assert response.headers["content-type"].startswith("application/json"), endpoint.name
                if want == 401:
                    assert response.headers["www-authenticate"].startswith("Bearer"), endpoint.name
                if want >= 400:
                    assert await snapshot(admin, scene) == before, (caller, endpoint.name)
                    assert "Prefer short answers" not in response.text and "Be kind" not in response.text, endpoint.name
                if endpoint.name == "decide" and want == 200:
                    assert response.json()["resolved_by"] == f"{caller}@example.com"
                    # Later endpoints read a card that is no longer pending; that is fine for reads.


async def test_a_session_is_its_organisations_only_and_its_event_stream_too(stack: Stack) -> None:
    async with stack.http() as admin, stack.coach() as coach:
        world = await new_world(admin)
        turn = await open_turn(coach, world)
        await wait_pending(admin, turn.session.session_id, 0)
        other = test_issuer().mint(OPERATOR, f"org_x_{uuid.uuid4().hex[:6]}", ("admin",))
        async with httpx.AsyncClient(
            base_url=stack.gateway_url, headers={"Authorization": f"Bearer {other}"}, timeout=30
        ) as http:
            stream = await http.get(f"/api/studio/sessions/{turn.session.session_id}/events")
            assert stream.status_code == 404
            assert (await http.get(f"/api/studio/sessions/{turn.session.session_id}/pending")).status_code == 404


async def test_the_issuer_may_rotate_its_keys(stack: Stack) -> None:
    """A token signed with a key the gateway has not seen yet is verified once the JWKS is fetched again."""
    async with stack.http() as admin:
        world = await new_world(admin)
        issuer = test_issuer()
        issuer.rotate()
        fresh = issuer.mint(OPERATOR, world.org_id, ("viewer",))
        assert jwt.get_unverified_header(fresh)["kid"] == issuer.keys[-1][0]
        async with httpx.AsyncClient(
            base_url=stack.gateway_url, headers={"Authorization": f"Bearer {fresh}"}, timeout=30
        ) as http:

            async def read() -> bool:
                return (await http.get(f"/api/workspace/agents/{world.agent_id}")).status_code == 200

            assert await wait_for(read, timeout=10)
