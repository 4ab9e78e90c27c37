"""Deploys on the public API: an agent's Deploys settings, builds, deploys (promote, retry), and the providers'
push webhooks.

The deployer owns all of it and enforces the organisation's wall (``X-Assent-Org``: another organisation's agent,
build or deploy answers 404). Changing settings, building, promoting and retrying need permission to edit source
and manage deploys (admin or developer, or the agent's owner or editor); reading needs any role.

The push webhooks (``/api/webhooks/github``, ``/api/webhooks/gitlab``) carry no person's token: the provider
authenticates each delivery with the repository's webhook secret (GitHub's ``X-Hub-Signature-256`` HMAC of the
body, GitLab's ``X-Gitlab-Token``). The gateway forwards the exact body and those headers with its service
credential; the deployer finds the repository by its address (404 when no agent's source has it) and checks the
signature or token against that repository's secret (401 when it does not fit).
"""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from assent.http import Omissible, OneLine

from .adapters.owners import Owners, segment
from .domain.roles import Identity

DEPLOYER = "deployer"
PathId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
Forward = Callable[..., Awaitable[JSONResponse]]
MAX_WEBHOOK_BYTES = 5_000_000


Target = dict[Annotated[str, Field(max_length=100), OneLine], Annotated[str, Field(max_length=2000), OneLine]]


class DeploySettingsIn(BaseModel):
    """``builds_on_push``; ``auto_promote``; ``target`` (``{"kind": "local"|"webhook"|"kubernetes", ...}``, null:
    the default); ``webhook_secret`` of the provider's push webhook (write only). A field left out is kept."""

    model_config = ConfigDict(extra="forbid")
    builds_on_push: Omissible[bool] = None
    auto_promote: Omissible[bool] = None
    target: Target | None = None
    webhook_secret: Annotated[str, Field(min_length=16, max_length=200), OneLine] | None = None


class BuildIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source_version: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")] | None = None


def install(
    app: FastAPI,
    user_dependency: Any,
    forward: Forward,
    may_change_agent: Callable[[Identity, str], Awaitable[None]],
    owners: Owners,
) -> None:
    User = user_dependency
    router = APIRouter(tags=["deploys"])

    @router.get("/api/workspace/agents/{agent_id}/deploy-settings")
    async def read_settings(agent_id: PathId, user: User) -> JSONResponse:
        return await forward(DEPLOYER, "GET", f"/internal/agents/{segment(agent_id)}/deploy-settings", user)

    @router.put("/api/workspace/agents/{agent_id}/deploy-settings")
    async def change_settings(agent_id: PathId, body: DeploySettingsIn, user: User) -> JSONResponse:
        await may_change_agent(user, agent_id)
        payload = {**body.model_dump(exclude_unset=True), "actor": user.user_id}
        return await forward(DEPLOYER, "PUT", f"/internal/agents/{segment(agent_id)}/deploy-settings", user, payload)

    @router.get("/api/agents/{agent_id}/builds")
    async def list_builds(agent_id: PathId, user: User) -> JSONResponse:
        return await forward(DEPLOYER, "GET", f"/internal/agents/{segment(agent_id)}/builds", user)

    @router.get("/api/agents/{agent_id}/builds/{build_id}")
    async def read_build(agent_id: PathId, build_id: PathId, user: User) -> JSONResponse:
        """A build: its status, artifact digest, triggers (push, poll, approval), deploys and log."""
        return await forward(DEPLOYER, "GET", f"/internal/agents/{segment(agent_id)}/builds/{segment(build_id)}", user)

    @router.post("/api/agents/{agent_id}/builds", status_code=202)
    async def start_build(agent_id: PathId, body: BuildIn, user: User) -> JSONResponse:
        await may_change_agent(user, agent_id)
        payload = {**body.model_dump(), "actor": user.user_id}
        return await forward(DEPLOYER, "POST", f"/internal/agents/{segment(agent_id)}/builds", user, payload)

    @router.get("/api/agents/{agent_id}/deploys")
    async def list_deploys(agent_id: PathId, user: User) -> JSONResponse:
        return await forward(DEPLOYER, "GET", f"/internal/agents/{segment(agent_id)}/deploys", user)

    @router.get("/api/agents/{agent_id}/deploys/{deploy_id}")
    async def read_deploy(agent_id: PathId, deploy_id: PathId, user: User) -> JSONResponse:
        return await forward(
            DEPLOYER, "GET", f"/internal/agents/{segment(agent_id)}/deploys/{segment(deploy_id)}", user
        )

    @router.post("/api/agents/{agent_id}/deploys/{deploy_id}/promote")
    async def promote(agent_id: PathId, deploy_id: PathId, user: User) -> JSONResponse:
        """Make a started deploy live (auto-promote off): 409 when it is not waiting for promotion."""
        await may_change_agent(user, agent_id)
        path = f"/internal/agents/{segment(agent_id)}/deploys/{segment(deploy_id)}/promote"
        return await forward(DEPLOYER, "POST", path, user, {"actor": user.user_id})

    @router.post("/api/agents/{agent_id}/deploys/{deploy_id}/retry", status_code=202)
    async def retry(agent_id: PathId, deploy_id: PathId, user: User) -> JSONResponse:
        """Start again a deploy that did not start: 409 unless it failed."""
        await may_change_agent(user, agent_id)
        path = f"/internal/agents/{segment(agent_id)}/deploys/{segment(deploy_id)}/retry"
        return await forward(DEPLOYER, "POST", path, user, {"actor": user.user_id})

    @router.post("/api/webhooks/{provider}", status_code=202)
    async def push_webhook(provider: Literal["github", "gitlab"], request: Request) -> JSONResponse:
        """A provider's push webhook: 202 with what it started, 401 when the signature or token does not fit the
        repository's webhook secret, 404 when no agent's source is that repository."""
        raw = await request.body()
        if len(raw) > MAX_WEBHOOK_BYTES:
            return JSONResponse({"detail": "the webhook's body is too large"}, status_code=413)
        headers = request.headers
        event = headers.get("x-github-event") if provider == "github" else headers.get("x-gitlab-event")
        if event not in ("push", "Push Hook"):
            return JSONResponse({"ignored": f"not a push event ({event!r})"}, status_code=202)
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            return JSONResponse({"detail": "the webhook's body is not UTF-8 JSON"}, status_code=422)
        body = {
            "body": text,
            "signature": headers.get("x-hub-signature-256"),
            "token": headers.get("x-gitlab-token"),
            "event": event,
            "delivery": headers.get("x-github-delivery") or headers.get("x-gitlab-event-uuid"),
        }
        reply = await owners.call(DEPLOYER, "POST", f"/internal/webhooks/{segment(provider)}", body)
        if reply.status == 403:
            return JSONResponse(reply.body, status_code=401)
        return JSONResponse(reply.body, status_code=reply.status)

    app.include_router(router)


async def deployer_activity(owners: Owners, org_id: str, agent_id: str | None, limit: int) -> list[dict[str, Any]]:
    """The deployer's activity entries (deploy, deploy failed, promote, link fix) of ``org_id``."""
    query = urlencode({"limit": limit, **({"agent_id": agent_id} if agent_id is not None else {})})
    reply = await owners.call(DEPLOYER, "GET", f"/internal/activity?{query}", org=org_id)
    return list(reply.body.get("entries", [])) if reply.status == 200 else []
