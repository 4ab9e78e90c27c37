"""Who may do what, over every public endpoint, against the real services.

Tokens are minted by the suite's own OpenID Connect issuer and verified by the gateway against its JWKS
(no stub of the verifier). Each endpoint is called as each kind of caller; a refused call changes nothing. The
endpoints listed here are every route of the gateway's OpenAPI document (a test proves it), so a new route cannot
go unchecked.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from assent.api import ROUTES, Permission, PublicRoute
from tests.conftest import OPERATOR, Stack, World, new_world, wait_for
from tests.issuer import test_issuer
from tests.test_memory_edits import memory, open_turn, propose, wait_pending
from tests.test_source_proposals import chat, projected, proposal_id, source_world
from tests.test_source_proposals import propose as propose_source

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
UNAUTHENTICATED = ("none", "expired", "wrong_audience", "bad_signature")


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
    note_path: str
    proposal_id: str  # a waiting source proposal (the caller's own)
    approved_id: str  # an approved one (shared)
    issue_id: str
    build_id: str
    deploy_id: str  # live


ALLOWED: dict[str, frozenset[str]] = {
    "read": frozenset({"viewer", "reviewer", "developer", "admin"}),
    "write": frozenset({"developer", "admin"}),  # change the workspace, decide, change an agent
    "review": frozenset({"reviewer", "developer", "admin"}),  # review feedback
    "roles": frozenset({"admin"}),  # name an agent's owners and editors
    "org_admin": frozenset({"admin"}),  # set the caller's own organisation's policy (another's admin: its own)
}


@dataclass(frozen=True)
class Endpoint:
    method: str
    route: str  # the path as the OpenAPI document names it
    path: Callable[[Scene], str]
    access: str  # a key of ALLOWED, or "org" (the caller's organisation's own feed), or "public" (no bearer token)
    body: Callable[[Scene], Any] | None = None
    allowed_status: int = 200
    headers: dict[str, str] | None = None
    stream: bool = False
    content_type: str = "application/json"  # of an allowed answer (a refusal is JSON)


S = "/api/studio/sessions/{session_id}"
W = "/api/workspace"
AG = "/api/agents/{agent_id}"

LISTED = [
    Endpoint("GET", f"{S}/pending", lambda s: f"/api/studio/sessions/{s.session_id}/pending", "read"),
    Endpoint("GET", f"{S}/events", lambda s: f"/api/studio/sessions/{s.session_id}/events", "read", stream=True),
    Endpoint("GET", f"{S}/edits/{{seq}}", lambda s: f"/api/studio/sessions/{s.session_id}/edits/{s.seq}", "read"),
    Endpoint(
        "POST",
        f"{S}/edits/{{seq}}",
        lambda s: f"/api/studio/sessions/{s.session_id}/edits/{s.seq}",
        "write",
        lambda s: {"decision": "decline"},
    ),
    Endpoint(  # the request was just declined (or is still waiting): nothing to revert, and nothing is filed
        "POST",
        f"{S}/edits/{{seq}}/revert",
        lambda s: f"/api/studio/sessions/{s.session_id}/edits/{s.seq}/revert",
        "write",
        allowed_status=409,
    ),
    Endpoint("POST", f"{S}/continue", lambda s: f"/api/studio/sessions/{s.session_id}/continue", "write"),
    # The desk: the organisation's sessions and pending items; Apply all and Decline all (nothing left to decide).
    Endpoint("GET", "/api/me", lambda s: "/api/me", "org"),
    Endpoint("GET", "/api/studio/sessions", lambda s: "/api/studio/sessions", "org"),
    Endpoint("GET", "/api/studio/pending", lambda s: "/api/studio/pending", "org"),
    # Their previews (read-only, but decided by the role that may act on them).
    Endpoint("GET", f"{S}/apply-all", lambda s: f"/api/studio/sessions/{s.session_id}/apply-all", "write"),
    Endpoint("GET", f"{S}/decline-all", lambda s: f"/api/studio/sessions/{s.session_id}/decline-all", "write"),
    Endpoint("POST", f"{S}/apply-all", lambda s: f"/api/studio/sessions/{s.session_id}/apply-all", "write"),
    Endpoint("POST", f"{S}/decline-all", lambda s: f"/api/studio/sessions/{s.session_id}/decline-all", "write"),
    Endpoint(
        "POST", f"{W}/orgs", lambda s: f"{W}/orgs", "write", lambda s: {"org_id": s.world.org_id, "name": "X"}, 409
    ),
    Endpoint(
        "POST",
        f"{W}/guilds",
        lambda s: f"{W}/guilds",
        "write",
        lambda s: {"guild_id": f"g_{uuid.uuid4().hex[:8]}", "org_id": s.world.org_id, "name": "G"},
        201,
    ),
    Endpoint(
        "POST",
        f"{W}/agents",
        lambda s: f"{W}/agents",
        "write",
        lambda s: {
            "agent_id": f"a_{uuid.uuid4().hex[:8]}",
            "org_id": s.world.org_id,
            "guild_id": s.world.guild_id,
            "name": "A",
        },
        201,
    ),
    Endpoint("GET", f"{W}/agents/{{agent_id}}", lambda s: f"{W}/agents/{s.world.agent_id}", "read"),
    Endpoint(
        "PATCH",
        f"{W}/agents/{{agent_id}}",
        lambda s: f"{W}/agents/{s.world.other_agent_id}",
        "write",
        lambda s: {"task": f"T {uuid.uuid4().hex}"},
    ),
    Endpoint(
        "PUT",
        f"{W}/agents/{{agent_id}}/roles",
        lambda s: f"{W}/agents/{s.world.outsider_id}/roles",
        "roles",
        lambda s: {"owners": ["olga@example.com"], "editors": []},
    ),
    Endpoint("GET", f"{W}/agents/{{agent_id}}/memory", lambda s: f"{W}/agents/{s.world.agent_id}/memory", "read"),
    Endpoint(
        "PUT",
        f"{W}/agents/{{agent_id}}/memory",
        lambda s: f"{W}/agents/{s.world.other_agent_id}/memory",
        "write",
        lambda s: {"content": f"M {uuid.uuid4().hex}\n"},
    ),
    Endpoint(
        "GET",
        f"{W}/agents/{{agent_id}}/memory/history",
        lambda s: f"{W}/agents/{s.world.agent_id}/memory/history",
        "read",
    ),
    Endpoint("GET", f"{W}/guilds/{{guild_id}}", lambda s: f"{W}/guilds/{s.world.guild_id}", "read"),
    Endpoint(
        "PATCH",
        f"{W}/guilds/{{guild_id}}",
        lambda s: f"{W}/guilds/{s.world.guild_id}",
        "write",
        lambda s: {"about": uuid.uuid4().hex},
    ),
    Endpoint("GET", f"{W}/guilds/{{guild_id}}/changes", lambda s: f"{W}/guilds/{s.world.guild_id}/changes", "read"),
    Endpoint("GET", f"{W}/orgs/{{org_id}}/notes", lambda s: f"{W}/orgs/{s.world.org_id}/notes", "read"),
    Endpoint(
        "GET", f"{W}/orgs/{{org_id}}/note", lambda s: f"{W}/orgs/{s.world.org_id}/note?path={s.note_path}", "read"
    ),
    Endpoint(
        "PUT",
        f"{W}/orgs/{{org_id}}/note",
        lambda s: f"{W}/orgs/{s.world.org_id}/note?path=org/scratch.md",
        "write",
        lambda s: {"content": uuid.uuid4().hex},
    ),
    Endpoint(
        "GET",
        f"{W}/orgs/{{org_id}}/note/history",
        lambda s: f"{W}/orgs/{s.world.org_id}/note/history?path={s.note_path}",
        "read",
    ),
    Endpoint(
        "DELETE", f"{W}/orgs/{{org_id}}/note", lambda s: f"{W}/orgs/{s.world.org_id}/note?path=org/scratch.md", "write"
    ),
    # Collections (the scene holds none of its own: a collection's routes answer an allowed caller 404 for an unknown
    # one; tests/test_collections.py reads and writes real ones).
    Endpoint("GET", f"{W}/orgs/{{org_id}}/collections", lambda s: f"{W}/orgs/{s.world.org_id}/collections", "read"),
    Endpoint(
        "POST",
        f"{W}/orgs/{{org_id}}/collections",
        lambda s: f"{W}/orgs/{s.world.org_id}/collections",
        "write",
        lambda s: {
            "name": f"t_{uuid.uuid4().hex[:8]}",
            "purpose": "P",
            "scope": "org",
            "columns": [{"name": "a", "type": "text"}],
        },
        201,
    ),
    *(
        Endpoint(method, f"{W}/orgs/{{org_id}}/collections/{{collection_id}}{tail}", path, access, body, 404)
        for method, tail, path, access, body in (
            ("GET", "", lambda s: f"{W}/orgs/{s.world.org_id}/collections/col_unknown", "read", None),
            (
                "PATCH",
                "",
                lambda s: f"{W}/orgs/{s.world.org_id}/collections/col_unknown",
                "write",
                lambda s: {"purpose": "X"},
            ),
            ("DELETE", "", lambda s: f"{W}/orgs/{s.world.org_id}/collections/col_unknown", "write", None),
            (
                "POST",
                "/records",
                lambda s: f"{W}/orgs/{s.world.org_id}/collections/col_unknown/records",
                "write",
                lambda s: {"records": [{"a": "x"}]},
            ),
            (
                "PATCH",
                "/records",
                lambda s: f"{W}/orgs/{s.world.org_id}/collections/col_unknown/records",
                "write",
                lambda s: {"record_id": 1, "values": {"a": "y"}},
            ),
            (
                "PUT",
                "/access",
                lambda s: f"{W}/orgs/{s.world.org_id}/collections/col_unknown/access",
                "write",
                lambda s: {"kind": "org", "mode": "read"},
            ),
        )
    ),
    Endpoint(  # the change log of a collection that never was is empty
        "GET",
        f"{W}/orgs/{{org_id}}/collections/{{collection_id}}/changes",
        lambda s: f"{W}/orgs/{s.world.org_id}/collections/col_unknown/changes",
        "read",
    ),
    # Source proposals, the builder chat, the activity feed, repositories and issues.
    Endpoint("GET", f"{AG}/proposals", lambda s: f"/api/agents/{s.world.agent_id}/proposals", "read"),
    Endpoint(
        "GET", f"{AG}/proposal-events", lambda s: f"/api/agents/{s.world.agent_id}/proposal-events", "read", stream=True
    ),
    Endpoint(
        "GET",
        f"{AG}/proposals/{{proposal_id}}",
        lambda s: f"/api/agents/{s.world.agent_id}/proposals/{s.proposal_id}",
        "read",
    ),
    Endpoint("GET", f"{AG}/builder-chat", lambda s: f"/api/agents/{s.world.agent_id}/builder-chat", "read"),
    Endpoint("GET", "/api/activity", lambda s: "/api/activity", "org"),
    # The history and the policy: always the caller's own organisation's (another's admin reads and sets its own).
    Endpoint("GET", "/api/history", lambda s: "/api/history", "org"),
    Endpoint("GET", "/api/history/export", lambda s: "/api/history/export?format=csv", "org", content_type="text/csv"),
    Endpoint("GET", "/api/history/verify", lambda s: "/api/history/verify", "org"),
    Endpoint("GET", "/api/history/checkpoints", lambda s: "/api/history/checkpoints", "org"),
    Endpoint("GET", "/api/history/keys", lambda s: "/api/history/keys", "org"),
    Endpoint("GET", "/api/policy", lambda s: "/api/policy", "org"),
    Endpoint("GET", "/api/policy/versions", lambda s: "/api/policy/versions", "org"),
    Endpoint("GET", "/api/policy/versions/{version}", lambda s: "/api/policy/versions/999", "read", allowed_status=404),
    Endpoint(
        "POST",
        "/api/policy/test",
        lambda s: "/api/policy/test",
        "org_admin",
        lambda s: {"policy": {"rules": [{"name": "r", "decide": "apply"}]}, "last": 5},
    ),
    Endpoint(
        "PUT",
        "/api/policy",
        lambda s: "/api/policy",
        "org_admin",
        lambda s: {"policy": {"rules": [{"name": "r", "decide": "apply"}]}, "expected_version": 0},
    ),
    # The webhooks: an admin's, of the caller's own organisation (another's admin finds none of this one's).
    Endpoint(
        "POST",
        "/api/notifications/webhooks",
        lambda s: "/api/notifications/webhooks",
        "org_admin",
        lambda s: {"name": f"hook {uuid.uuid4().hex[:12]}", "url": "http://127.0.0.1:9/hook"},
    ),
    Endpoint("GET", "/api/notifications/webhooks", lambda s: "/api/notifications/webhooks", "org_admin"),
    Endpoint(
        "GET", "/api/notifications/deliveries", lambda s: "/api/notifications/deliveries?status=dead", "org_admin"
    ),
    Endpoint(
        "DELETE",
        "/api/notifications/webhooks/{name}",
        lambda s: "/api/notifications/webhooks/nothing",
        "org_admin",
        allowed_status=404,
    ),
    Endpoint(
        "GET",
        "/api/notifications/webhooks/{name}/deliveries",
        lambda s: "/api/notifications/webhooks/nothing/deliveries",
        "org_admin",
        allowed_status=404,
    ),
    Endpoint(
        "POST",
        "/api/notifications/deliveries/{delivery_id}/replay",
        lambda s: "/api/notifications/deliveries/dlv_nothing/replay",
        "org_admin",
        allowed_status=404,
    ),
    Endpoint(
        "GET", f"{W}/agents/{{agent_id}}/repository", lambda s: f"{W}/agents/{s.world.agent_id}/repository", "read"
    ),
    Endpoint(
        "PUT",
        f"{W}/agents/{{agent_id}}/repository",
        lambda s: f"{W}/agents/{s.world.other_agent_id}/repository",
        "write",
        lambda s: {"mode": "hosted", "files": {"agents/main/AGENT.md": "Hello.\n"}},
    ),
    Endpoint(
        "POST",
        f"{W}/agents/{{agent_id}}/repository/commits",
        lambda s: f"{W}/agents/{s.world.agent_id}/repository/commits",
        "write",
        lambda s: {"files": {"knowledge/by-hand.md": f"{uuid.uuid4().hex}\n"}, "message": "By hand"},
        201,
    ),
    Endpoint(
        "POST",
        f"{W}/agents/{{agent_id}}/deployments",
        lambda s: f"{W}/agents/{s.world.agent_id}/deployments",
        "write",
        lambda s: {},
        201,
    ),
    Endpoint("GET", f"{W}/agents/{{agent_id}}/issues", lambda s: f"{W}/agents/{s.world.agent_id}/issues", "read"),
    Endpoint(
        "POST",
        f"{W}/agents/{{agent_id}}/issues",
        lambda s: f"{W}/agents/{s.world.agent_id}/issues",
        "review",
        lambda s: {"title": "Refunds go wrong"},
        201,
    ),
    Endpoint(
        "GET",
        f"{W}/agents/{{agent_id}}/issues/{{issue_id}}",
        lambda s: f"{W}/agents/{s.world.agent_id}/issues/{s.issue_id}",
        "read",
    ),
    Endpoint(
        "PATCH",
        f"{W}/agents/{{agent_id}}/issues/{{issue_id}}",
        lambda s: f"{W}/agents/{s.world.agent_id}/issues/{s.issue_id}",
        "review",
        lambda s: {"text": uuid.uuid4().hex},
    ),
    # Routines (the scene holds none: a routine's own routes answer an allowed caller 404 for an unknown one).
    Endpoint("GET", f"{W}/agents/{{agent_id}}/routines", lambda s: f"{W}/agents/{s.world.agent_id}/routines", "read"),
    Endpoint(
        "POST",
        f"{W}/agents/{{agent_id}}/routines",
        lambda s: f"{W}/agents/{s.world.agent_id}/routines",
        "write",
        lambda s: {"description": "D", "instruction": "I", "cron": "0 9 * * *"},
        201,
    ),
    Endpoint(
        "GET",
        f"{W}/agents/{{agent_id}}/routines/{{schedule_id}}",
        lambda s: f"{W}/agents/{s.world.agent_id}/routines/rtn_unknown",
        "read",
        allowed_status=404,
    ),
    Endpoint(
        "PATCH",
        f"{W}/agents/{{agent_id}}/routines/{{schedule_id}}",
        lambda s: f"{W}/agents/{s.world.agent_id}/routines/rtn_unknown",
        "write",
        lambda s: {"paused": True},
        404,
    ),
    Endpoint(
        "DELETE",
        f"{W}/agents/{{agent_id}}/routines/{{schedule_id}}",
        lambda s: f"{W}/agents/{s.world.agent_id}/routines/rtn_unknown",
        "write",
        allowed_status=404,
    ),
    Endpoint("GET", f"{W}/guilds/{{guild_id}}/routines", lambda s: f"{W}/guilds/{s.world.guild_id}/routines", "read"),
    Endpoint(
        "PUT",
        f"{W}/guilds/{{guild_id}}/routines-switch",
        lambda s: f"{W}/guilds/{s.world.guild_id}/routines-switch",
        "write",
        lambda s: {"routines_on": True},
    ),
    # Access: bindings at the agent, its guild and the organisation (the last the admin's only).
    Endpoint("GET", f"{W}/agents/{{agent_id}}/access", lambda s: f"{W}/agents/{s.world.agent_id}/access", "read"),
    Endpoint(
        "PUT",
        f"{W}/agents/{{agent_id}}/access",
        lambda s: f"{W}/agents/{s.world.agent_id}/access",
        "write",
        lambda s: {"native_tools": {"web_search": "off"}},
    ),
    Endpoint("GET", f"{W}/guilds/{{guild_id}}/access", lambda s: f"{W}/guilds/{s.world.guild_id}/access", "read"),
    Endpoint(
        "PUT",
        f"{W}/guilds/{{guild_id}}/access",
        lambda s: f"{W}/guilds/{s.world.guild_id}/access",
        "write",
        lambda s: {"native_tools": {"fetch_url": "off"}},
    ),
    Endpoint("GET", f"{W}/orgs/{{org_id}}/access", lambda s: f"{W}/orgs/{s.world.org_id}/access", "read"),
    Endpoint(
        "PUT",
        f"{W}/orgs/{{org_id}}/access",
        lambda s: f"{W}/orgs/{s.world.org_id}/access",
        "roles",
        lambda s: {"native_tools": {"generate_image": "on"}},
    ),
    # Deploys.
    Endpoint(
        "GET",
        f"{W}/agents/{{agent_id}}/deploy-settings",
        lambda s: f"{W}/agents/{s.world.agent_id}/deploy-settings",
        "read",
    ),
    Endpoint(
        "PUT",
        f"{W}/agents/{{agent_id}}/deploy-settings",
        lambda s: f"{W}/agents/{s.world.agent_id}/deploy-settings",
        "write",
        lambda s: {"auto_promote": True},
    ),
    Endpoint("GET", f"{AG}/builds", lambda s: f"/api/agents/{s.world.agent_id}/builds", "read"),
    Endpoint(
        "GET", f"{AG}/builds/{{build_id}}", lambda s: f"/api/agents/{s.world.agent_id}/builds/{s.build_id}", "read"
    ),
    Endpoint("POST", f"{AG}/builds", lambda s: f"/api/agents/{s.world.agent_id}/builds", "write", lambda s: {}, 202),
    Endpoint("GET", f"{AG}/deploys", lambda s: f"/api/agents/{s.world.agent_id}/deploys", "read"),
    Endpoint(
        "GET", f"{AG}/deploys/{{deploy_id}}", lambda s: f"/api/agents/{s.world.agent_id}/deploys/{s.deploy_id}", "read"
    ),
    Endpoint(  # a live deploy is not waiting for promotion
        "POST",
        f"{AG}/deploys/{{deploy_id}}/promote",
        lambda s: f"/api/agents/{s.world.agent_id}/deploys/{s.deploy_id}/promote",
        "write",
        allowed_status=409,
    ),
    Endpoint(  # nor did it fail
        "POST",
        f"{AG}/deploys/{{deploy_id}}/retry",
        lambda s: f"/api/agents/{s.world.agent_id}/deploys/{s.deploy_id}/retry",
        "write",
        allowed_status=409,
    ),
    Endpoint(  # no bearer token: the repository's webhook secret authenticates, and no agent's source is this one
        "POST",
        "/api/webhooks/{provider}",
        lambda s: "/api/webhooks/github",
        "public",
        lambda s: {
            "ref": "refs/heads/main",
            "after": "0" * 40,
            "repository": {"clone_url": "https://example.com/x.git"},
        },
        404,
        headers={"X-GitHub-Event": "push"},
    ),
    Endpoint(  # a guild login: another organisation's guild is one that does not exist (404)
        "POST",
        f"{W}/logins",
        lambda s: f"{W}/logins",
        "write",
        lambda s: {
            "login_id": f"login_{uuid.uuid4().hex[:8]}",
            "name": "Desk",
            "scope": "guild",
            "scope_id": s.world.guild_id,
            "server_url": "https://mcp.example/mcp",
            "account": "support",
        },
        201,
    ),
    Endpoint("GET", f"{W}/orgs/{{org_id}}/logins", lambda s: f"{W}/orgs/{s.world.org_id}/logins", "read"),
    Endpoint("GET", f"{W}/logins/{{login_id}}", lambda s: f"{W}/logins/login_unknown", "read", allowed_status=404),
    Endpoint(
        "PATCH",
        f"{W}/logins/{{login_id}}",
        lambda s: f"{W}/logins/login_unknown",
        "write",
        lambda s: {"name": "X"},
        404,
    ),
    Endpoint("DELETE", f"{W}/logins/{{login_id}}", lambda s: f"{W}/logins/login_unknown", "write", allowed_status=404),
    Endpoint("GET", f"{S}/connections", lambda s: f"/api/studio/sessions/{s.session_id}/connections", "read"),
    Endpoint(  # no such login reachable from the session
        "PUT",
        f"{S}/connections/{{connection_id}}",
        lambda s: f"/api/studio/sessions/{s.session_id}/connections/login_unknown",
        "write",
        lambda s: {"granted": True},
        404,
    ),
    # The message at seq is a Memory request, decided at …/edits/{seq}: another endpoint does not know it (404 to
    # every caller of the organisation, before any role is asked).
    Endpoint(
        "GET", f"{S}/logins/{{seq}}", lambda s: f"/api/studio/sessions/{s.session_id}/logins/{s.seq}", "read", None, 404
    ),
    Endpoint(
        "POST",
        f"{S}/logins/{{seq}}",
        lambda s: f"/api/studio/sessions/{s.session_id}/logins/{s.seq}",
        "read",
        lambda s: {"decision": "grant"},
        404,
    ),
    Endpoint(  # the message at seq is a Memory request, not a Task draft
        "GET", f"{S}/drafts/{{seq}}", lambda s: f"/api/studio/sessions/{s.session_id}/drafts/{s.seq}", "read", None, 404
    ),
    Endpoint(
        "PUT",
        f"{S}/drafts/{{seq}}",
        lambda s: f"/api/studio/sessions/{s.session_id}/drafts/{s.seq}",
        "write",
        lambda s: {"content": "Mine.\n"},
        404,
    ),
    Endpoint(
        "POST",
        f"{S}/drafts/{{seq}}",
        lambda s: f"/api/studio/sessions/{s.session_id}/drafts/{s.seq}",
        "read",
        lambda s: {"decision": "discard"},
        404,
    ),
    Endpoint(  # last: discarding ends the proposal the routes above read
        "POST",
        f"{AG}/proposals/{{proposal_id}}",
        lambda s: f"/api/agents/{s.world.agent_id}/proposals/{s.proposal_id}",
        "review",
        lambda s: {"decision": "discard"},
    ),
]
"""Every route of the public document, by hand, but the owners' reads that :func:`declared_reads` finds."""

KNOWN_IDS: dict[str, Callable[[Scene], str]] = {
    "agent_id": lambda s: s.world.agent_id,
    "guild_id": lambda s: s.world.guild_id,
    "org_id": lambda s: s.world.org_id,
}


def declared_reads(routes: Sequence[PublicRoute], listed: Sequence[Endpoint]) -> list[Endpoint]:
    """The owners' declared reads that ``listed`` does not name: a GET any role of the organisation may call, whose
    path names only the scene's agent, guild or organisation. Each is checked as a read (200 for every role, 404
    from another organisation, 401 without a valid token), so a new owner's read route is checked with no line
    here."""
    named = {(e.method, e.route) for e in listed}
    reads = []
    for route in routes:
        if (route.method, route.public_path) in named or route.method != "GET" or route.permission != Permission.READ:
            continue
        if not set(route.path_params) <= KNOWN_IDS.keys():
            continue

        def path(scene: Scene, route: PublicRoute = route) -> str:
            return route.public_path.format(**{name: KNOWN_IDS[name](scene) for name in route.path_params})

        reads.append(Endpoint("GET", route.public_path, path, "read"))
    return reads


ENDPOINTS = [*LISTED[:-1], *declared_reads(ROUTES, LISTED), LISTED[-1]]
"""What the matrix calls, in order (the last ends the proposal the others read)."""


def expected(caller: str, endpoint: Endpoint) -> int:
    if endpoint.access == "public":
        return endpoint.allowed_status
    if caller in UNAUTHENTICATED:
        return 401
    if caller == "other_org":
        return endpoint.allowed_status if endpoint.access in ("org", "org_admin") else 404
    if endpoint.access in ALLOWED and caller not in ALLOWED[endpoint.access]:
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
    agent = f"{W}/agents/{world.agent_id}"
    return {
        "pending": [(item["seq"], item["stale"]) for item in pending["items"]],
        "other_agent": await body(f"{W}/agents/{world.other_agent_id}"),
        "outsider": await body(f"{W}/agents/{world.outsider_id}"),
        "other_memory": await body(f"{W}/agents/{world.other_agent_id}/memory"),
        "guild": await body(f"{W}/guilds/{world.guild_id}"),
        "guild_changes": len(await body(f"{W}/guilds/{world.guild_id}/changes")),
        "notes": await body(f"{W}/orgs/{world.org_id}/notes"),
        "collections": await body(f"{W}/orgs/{world.org_id}/collections"),
        "repository": await body(f"{agent}/repository"),
        "issues": await body(f"{agent}/issues"),
        "deploy_settings": await body(f"{agent}/deploy-settings"),
        "access": await body(f"{agent}/access"),
        "builds": len((await body(f"/api/agents/{world.agent_id}/builds"))["builds"]),
        "deploys": await body(f"/api/agents/{world.agent_id}/deploys"),
        "proposals": (await body(f"/api/agents/{world.agent_id}/proposals"))["counts"],
        "policy": (await body("/api/policy"))["version"],
    }


@dataclass(frozen=True)
class Place:
    """What every caller's matrix shares: a source world with a note, an approved (live) source proposal, its
    build, an issue, and its admin's token."""

    world: World
    approved_id: str
    issue_id: str
    build_id: str
    deploy_id: str
    token: str


PLACES: dict[str, Place] = {}
"""The shared place of each stack (by topic prefix), made once."""


async def place_of(stack: Stack) -> Place:
    if stack.prefix not in PLACES:
        async with stack.http() as admin, stack.coach() as coach:
            world = await source_world(admin)
            note = await admin.put(f"{W}/orgs/{world.org_id}/note?path=org/policy.md", json={"content": "Be kind.\n"})
            assert note.status_code in (200, 201), note.text
            session = await chat(coach, world)
            pid = proposal_id(await propose_source(session, world.agent_id, {"knowledge/f.md": "# f\n"}))
            await projected(admin, session.session_id, pid)
            approved = await admin.post(f"/api/agents/{world.agent_id}/proposals/{pid}", json={"decision": "approve"})
            assert approved.status_code == 200, approved.text
            deploy_id = approved.json()["effects"]["deploy_id"]

            async def live() -> dict[str, Any] | None:
                deploy = (await admin.get(f"/api/agents/{world.agent_id}/deploys/{deploy_id}")).json()
                return deploy if deploy["status"] == "live" else None

            build_id = (await wait_for(live, timeout=30))["build_id"]
            issue = await admin.post(f"{W}/agents/{world.agent_id}/issues", json={"title": "Slow refunds"})
            assert issue.status_code == 201, issue.text
            token = admin.headers["Authorization"]
        PLACES[stack.prefix] = Place(world, pid, issue.json()["issue_id"], build_id, deploy_id, token)
    return PLACES[stack.prefix]


async def scene_of(stack: Stack, admin: httpx.AsyncClient) -> Scene:
    """The shared place (``admin`` acts as its admin from now on), and a caller's own waiting Memory request and
    waiting source proposal, which its decisions end."""
    place = await place_of(stack)
    world = place.world
    admin.headers["Authorization"] = place.token
    async with stack.coach() as coach:
        turn = await open_turn(coach, world)
        result = await propose(turn, world.agent_id, "Proposed.\n", (await memory(admin, world.agent_id))["version"])
        assert result.ok, result.error
        await turn.end_step()
        session = await chat(coach, world)
        waiting = proposal_id(
            await propose_source(session, world.agent_id, {f"knowledge/{uuid.uuid4().hex}.md": "#\n"})
        )
        await projected(admin, session.session_id, waiting)
    await wait_pending(admin, turn.session.session_id, 1)
    seq = turn.calls[result.tool_call_id].seq
    return Scene(
        world,
        turn.session.session_id,
        seq,
        "org/policy.md",
        waiting,
        place.approved_id,
        place.issue_id,
        place.build_id,
        place.deploy_id,
    )


def test_an_owners_read_that_the_list_does_not_name_is_checked_as_a_read() -> None:
    shelf = PublicRoute("shelf", "GET", "/agents/{agent_id}/books", "read_book", "Books", Permission.READ, "shelf")
    write = PublicRoute(
        "shelf", "POST", "/agents/{agent_id}/books", "add_book", "Add", Permission.CHANGE_WORKSPACE, "shelf"
    )
    unknown = PublicRoute("shelf", "GET", "/books/{book_id}", "book", "A book", Permission.READ, "shelf")
    listed = [e for e in LISTED if e.route != f"{W}/agents/{{agent_id}}/memory"]
    memory = next(r for r in ROUTES if r.public_path == f"{W}/agents/{{agent_id}}/memory" and r.method == "GET")
    found = declared_reads([shelf, write, unknown, memory], listed)
    scene = Scene(World("org_1", "guild_1", "agent_1", "a2", "a3"), "ses_1", 1, "n", "p", "p2", "i", "b", "d")
    assert [(e.method, e.route, e.path(scene), e.access) for e in found] == [
        ("GET", f"{W}/agents/{{agent_id}}/books", f"{W}/agents/agent_1/books", "read"),
        ("GET", f"{W}/agents/{{agent_id}}/memory", f"{W}/agents/agent_1/memory", "read"),
    ]
    assert [e.route for e in declared_reads([shelf, memory], LISTED)] == [f"{W}/agents/{{agent_id}}/books"]


async def test_the_matrix_lists_every_route_of_the_public_document(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=30) as http:
        document = (await http.get("/openapi.json")).json()
    routes = {
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method in ("get", "put", "post", "patch", "delete")
    }
    listed = [(e.method, e.route) for e in ENDPOINTS]
    assert len(listed) == len(set(listed))
    assert set(listed) == routes


@pytest.mark.parametrize("caller", CALLERS)
async def test_every_endpoint_answers_each_caller_as_the_roles_say_and_a_refusal_writes_nothing(
    stack: Stack, caller: str
) -> None:
    async with stack.http() as admin:
        scene = await scene_of(stack, admin)
        world = scene.world
        token = token_for(caller, world)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        secrets = ("Prefer short answers", "Be kind", "Slow refunds", "You answer refund questions")
        async with httpx.AsyncClient(base_url=stack.gateway_url, headers=headers, timeout=60) as http:
            # What refused calls must leave as it was; compared before the next allowed write, and at the end.
            before, refused = await snapshot(admin, scene), []
            for endpoint in ENDPOINTS:
                name = f"{endpoint.method} {endpoint.route}"
                body = endpoint.body(scene) if endpoint.body else None
                want = expected(caller, endpoint)
                writes = want < 400 and endpoint.method != "GET"
                if writes and refused:
                    assert await snapshot(admin, scene) == before, (caller, refused)
                request = http.build_request(endpoint.method, endpoint.path(scene), json=body, headers=endpoint.headers)
                response = await http.send(request, stream=endpoint.stream)
                try:
                    if endpoint.stream and response.status_code == 200:
                        assert response.headers["content-type"].startswith("text/event-stream"), name
                        first = await anext(response.aiter_lines())
                        assert first == "event: ready", (name, first)
                    else:
                        await response.aread()
                        kind = endpoint.content_type if response.status_code < 400 else "application/json"
                        assert response.headers["content-type"].startswith(kind), name
                finally:
                    await response.aclose()
                assert response.status_code == want, (caller, name, response.status_code, response.text)
                if want == 401:
                    assert response.headers["www-authenticate"].startswith("Bearer"), name
                if want >= 400:
                    assert not any(secret in response.text for secret in secrets), name
                    refused.append(name)
                elif writes:  # what the refusals after it must leave as it is
                    before, refused = await snapshot(admin, scene), []
                if endpoint.route.endswith("/edits/{seq}") and endpoint.method == "POST" and want == 200:
                    assert response.json()["resolved_by"] == f"{caller}@example.com"
                if endpoint.route == "/api/activity" and caller == "other_org":
                    assert response.json() == {"entries": []}
                if endpoint.route == "/api/history" and caller == "other_org":
                    assert [e for e in response.json()["entries"] if e["org_id"] == world.org_id] == []
                if endpoint.route in ("/api/studio/sessions", "/api/studio/pending") and caller == "other_org":
                    assert (response.json()["items"], response.json()["total"]) == ([], 0), name
            assert await snapshot(admin, scene) == before, (caller, refused)


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
