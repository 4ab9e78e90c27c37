"""Deploys on the public API, owned by the deployer: an agent's Deploys settings, builds, deploys (promote,
retry), and the providers' push webhooks.

Changing settings, building, promoting and retrying need permission to edit source and manage deploys; another
organisation's agent, build or deploy answers 404. The push webhooks carry no person's token: the provider
authenticates each delivery with the repository's webhook secret (GitHub's ``X-Hub-Signature-256`` HMAC of the
body, GitLab's ``X-Gitlab-Token``), which the deployer checks against the body's exact bytes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, Field

from assent.api.declare import PublicRoute, RequestModel, Wall
from assent.api.roles import Permission
from assent.http import Omissible, OneLine

from .source import AGENT_404, COMMIT_RULE, OWNER, SOURCE_404, Commit, Deploy

Setting = Annotated[str, Field(min_length=1, max_length=2000), OneLine]


class LocalTarget(RequestModel):
    """Records the staged and the live version in the deployer's local target folder."""

    kind: Literal["local"]


class WebhookTarget(RequestModel):
    """POSTs each start and promote to ``url`` (with ``token`` as a bearer token, if any)."""

    kind: Literal["webhook"]
    url: Annotated[str, Field(min_length=1, max_length=2000, pattern=r"^https?://[^\x00-\x1f\x7f]*$"), OneLine]
    token: Setting | None = None


class KubernetesTarget(RequestModel):
    """Annotates, then patches, a Deployment's pod template (in the namespace ``default`` when none is named)."""

    kind: Literal["kubernetes"]
    namespace: Setting | None = Field(None, exclude_if=lambda namespace: namespace is None)
    deployment: Setting
    container: Setting
    image: Setting


Target = Annotated[LocalTarget | WebhookTarget | KubernetesTarget, Field(discriminator="kind")]


class ShownWebhookTarget(BaseModel):
    """A webhook target as the settings show it: without its token."""

    kind: Literal["webhook"]
    url: str


ShownTarget = Annotated[LocalTarget | ShownWebhookTarget | KubernetesTarget, Field(discriminator="kind")]
"""A target's configuration as the settings show it (a webhook's token never)."""


class DeploySettingsIn(RequestModel):
    """``builds_on_push``; ``auto_promote``; ``target`` (null: the deployer's default); ``webhook_secret`` of the
    provider's push webhook (GitHub signs with it, GitLab sends it as its token; never shown again). A field left
    out is kept."""

    builds_on_push: Omissible[bool] = None
    auto_promote: Omissible[bool] = None
    target: Target | None = None
    webhook_secret: Annotated[str, Field(min_length=16, max_length=200), OneLine] | None = None


class BuildIn(RequestModel):
    """Build a commit (default: the production branch's head) by hand."""

    source_version: Commit | None = None


class DeploySettings(BaseModel):
    agent_id: str
    builds_on_push: bool
    auto_promote: bool
    target: ShownTarget | None
    """The target's configuration, without its token."""
    webhook_secret_set: bool


class Trigger(BaseModel):
    trigger: str
    ref: str | None
    actor: str | None
    at: str


class Build(BaseModel):
    build_id: str
    agent_id: str
    source_version: str
    status: str
    artifact_digest: str | None
    error: str | None
    attempts: int
    created_at: str
    started_at: str | None
    finished_at: str | None
    triggers: list[Trigger]
    deploys: list[str]
    log: str | None = Field(None, exclude_if=lambda log: log is None)
    """A build read on its own carries its log."""


class Builds(BaseModel):
    builds: list[Build]


class Deploys(BaseModel):
    deploys: list[Deploy]


class PushBuilt(BaseModel):
    """The build a push to an agent's production branch started (or joined)."""

    agent_id: str
    build_id: str
    status: str


class PushIgnored(BaseModel):
    """Why a push did nothing for an agent (another branch, builds on push off)."""

    agent_id: str
    ignored: str


class Pushed(BaseModel):
    """What a push started, per agent whose source is the repository; or why the delivery was ignored."""

    results: list[PushBuilt | PushIgnored] | None = Field(None, exclude_if=lambda results: results is None)
    ignored: str | None = Field(None, exclude_if=lambda ignored: ignored is None)


def _route(
    method: Any, path: str, name: str, summary: str, permission: Permission, tag: str, **more: Any
) -> PublicRoute:
    return PublicRoute(OWNER, method, path, name, summary, permission, tag, **more)


BUILD_404 = {404: "No such build of this agent in the caller's organisation"}
DEPLOY_404 = {404: "No such deploy of this agent in the caller's organisation"}

SETTINGS = (
    _route(
        "GET",
        "/agents/{agent_id}/deploy-settings",
        "get_deploy_settings",
        "The agent's Deploys settings",
        Permission.READ,
        "deploys",
        response=DeploySettings,
        errors=SOURCE_404,
    ),
    _route(
        "PUT",
        "/agents/{agent_id}/deploy-settings",
        "set_deploy_settings",
        "Builds on push, auto-promote, the deploy target and the push webhook's secret",
        Permission.CHANGE_AGENT,
        "deploys",
        body=DeploySettingsIn,
        response=DeploySettings,
        errors=SOURCE_404,
        rules="builds on push for a hosted source (it is built when a proposal is approved)",
    ),
)

BUILDS = (
    _route(
        "GET",
        "/agents/{agent_id}/builds",
        "list_builds",
        "The agent's builds",
        Permission.READ,
        "deploys",
        prefix="/api",
        response=Builds,
        errors=AGENT_404,
    ),
    _route(
        "GET",
        "/agents/{agent_id}/builds/{build_id}",
        "read_build",
        "A build: its status, artifact digest, triggers (push, poll, approval), deploys and log",
        Permission.READ,
        "deploys",
        prefix="/api",
        response=Build,
        errors=BUILD_404,
    ),
    _route(
        "POST",
        "/agents/{agent_id}/builds",
        "start_build",
        "Build a commit (default: the production branch's head); one commit has one build",
        Permission.CHANGE_AGENT,
        "deploys",
        prefix="/api",
        body=BuildIn,
        response=Build,
        status=202,
        errors={**SOURCE_404, 409: "The production branch has no commit to build yet"},
        rules=COMMIT_RULE,
    ),
)

DEPLOYS = (
    _route(
        "GET",
        "/agents/{agent_id}/deploys",
        "list_deploys",
        "The agent's deploys",
        Permission.READ,
        "deploys",
        prefix="/api",
        response=Deploys,
        errors=AGENT_404,
    ),
    _route(
        "GET",
        "/agents/{agent_id}/deploys/{deploy_id}",
        "read_deploy",
        "A deploy with its status, error, target and links",
        Permission.READ,
        "deploys",
        prefix="/api",
        response=Deploy,
        errors=DEPLOY_404,
    ),
    _route(
        "POST",
        "/agents/{agent_id}/deploys/{deploy_id}/promote",
        "promote",
        "Make a started deploy live (auto-promote off)",
        Permission.CHANGE_AGENT,
        "deploys",
        prefix="/api",
        response=Deploy,
        errors={**DEPLOY_404, 409: "The deploy is not waiting for promotion"},
    ),
    _route(
        "POST",
        "/agents/{agent_id}/deploys/{deploy_id}/retry",
        "retry",
        "Start again a deploy that did not start (its commit stays)",
        Permission.CHANGE_AGENT,
        "deploys",
        prefix="/api",
        response=Deploy,
        status=202,
        errors={**DEPLOY_404, 409: "The deploy did not fail"},
    ),
)

WEBHOOK_HEADERS = (
    "X-GitHub-Event",
    "X-Hub-Signature-256",
    "X-GitHub-Delivery",
    "X-Gitlab-Event",
    "X-Gitlab-Token",
    "X-Gitlab-Event-UUID",
)

WEBHOOKS = (
    _route(
        "POST",
        "/webhooks/{provider}",
        "push",
        "A provider's push webhook (no bearer token: the repository's webhook secret authenticates it)",
        Permission.SIGNED,
        "webhooks",
        prefix="/api",
        wall=Wall.NONE,
        params={"provider": Annotated[Literal["github", "gitlab"], Path()]},
        headers=WEBHOOK_HEADERS,
        raw_body=True,
        response=Pushed,
        status=202,
        errors={
            401: "The signature (GitHub) or token (GitLab) does not fit the repository's webhook secret",
            404: "No agent's source is this repository",
            409: "The pushed commit is not on the remote yet; send the push again",
            413: "The body is too large",
        },
        rules="a push event's body that is not the provider's push event",
        description="A push to the production branch of a source that builds on push starts (or joins) the build "
        "of its commit; other events and branches are accepted and ignored.",
    ),
)

ROUTES: tuple[PublicRoute, ...] = (*SETTINGS, *BUILDS, *DEPLOYS, *WEBHOOKS)
"""The deployer's public routes of builds and deploys."""
