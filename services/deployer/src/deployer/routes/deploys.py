"""Deploys: an agent's Deploys settings, builds, deploys (promote, retry) and the providers' push webhooks (the
routes of :mod:`deployer_contract.deploys`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from assent.api import Caller
from assent.domain import Refusal
from assent.runtime.uow import UnitOfWork
from assent.runtime.walls import NotFound, agent_in
from assent.runtime.writes import actor_of, record_write
from deployer_contract import deploys as api
from deployer_contract.deploys import BuildIn, DeploySettingsIn, PushBuilt, Pushed, PushIgnored
from deployer_contract.source import OWNER
from deployer_contract.source import Deploy as DeployAnswer

from ..adapters.repository import Build, Deploy
from ..domain.deploys import github_signature_ok, gitlab_token_ok, parse_push, repository_key
from . import Resource, Unprocessable, refused, store, written
from .answers import build_answer, deploy_answer, settings_answer

MAX_WEBHOOK_BYTES = 5_000_000
PUSH_EVENTS = ("push", "Push Hook")
"""GitHub's and GitLab's names of a push event."""


class Settings(Resource):
    async def get_deploy_settings(self, caller: Caller, agent_id: str) -> api.DeploySettings:
        async with self.runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, caller.org)
            await self.source_of(uow, agent_id)
            return settings_answer(await store(uow).deploy_settings(agent_id))

    async def set_deploy_settings(self, caller: Caller, agent_id: str, body: DeploySettingsIn) -> api.DeploySettings:
        """Builds on push (needs a webhook secret for the push webhook; the poller needs none), auto-promote and
        the deploy target."""
        actor = caller.actor
        fields = body.model_dump(exclude_unset=True)
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            source = await self.source_of(uow, agent_id)
            if fields.get("builds_on_push") and source.mode == "hosted":
                raise Unprocessable(422, "a hosted source is built when a proposal is approved; it has no pushes")
            given = sorted(fields)  # the names only: a webhook secret's value is never recorded
            if fields.get("builds_on_push"):
                fields.setdefault("last_seen_head", await self.repos.head(source))
            saved = await store(uow).save_deploy_settings(agent_id, actor, **fields)
            if given:
                await written(
                    uow,
                    "set_deploy_settings",
                    agent,
                    "deploy_settings",
                    "edit",
                    f"Deploy settings of {agent.name}",
                    actor,
                    detail=", ".join(given),
                )
            return settings_answer(saved)


class Builds(Resource):
    async def list_builds(self, caller: Caller, agent_id: str) -> api.Builds:
        async with self.runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, caller.org)
            return api.Builds(builds=[await build_of(uow, b) for b in await store(uow).builds_of(agent_id)])

    async def read_build(self, caller: Caller, agent_id: str, build_id: str) -> api.Build:
        """A build with its status, triggers, deploys and log."""
        async with self.runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, caller.org)
            build = await store(uow).build(build_id)
            if build is None or build.agent_id != agent_id:
                raise NotFound(f"agent {agent_id!r} has no build {build_id!r}")
            return await build_of(uow, build, log=True)

    async def start_build(self, caller: Caller, agent_id: str, body: BuildIn) -> api.Build:
        actor = caller.actor
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            source = await self.source_of(uow, agent_id)
            commit = await self.commit_of(source, body.source_version, "build")
            build = await self.deploys.request_build(uow, source, agent.org_id, commit, "manual", actor, actor)
            await written(
                uow,
                "start_build",
                agent,
                "build",
                "start",
                f"Build of {agent.name}",
                actor,
                hash_after=commit,
                detail=build.build_id,
            )
            return await build_of(uow, build)


class Deploys(Resource):
    async def list_deploys(self, caller: Caller, agent_id: str) -> api.Deploys:
        async with self.runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, caller.org)
            return api.Deploys(deploys=[deploy_answer(d) for d in await store(uow).deploys_of(agent_id)])

    async def read_deploy(self, caller: Caller, agent_id: str, deploy_id: str) -> DeployAnswer:
        async with self.runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, caller.org)
            return deploy_answer(await deploy_in(uow, agent_id, deploy_id))

    async def promote(self, caller: Caller, agent_id: str, deploy_id: str) -> DeployAnswer:
        """Make a started deploy live (when auto-promote is off)."""
        actor = caller.actor
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            await deploy_in(uow, agent_id, deploy_id)
            promoted = done(await self.deploys.promote(uow, deploy_id, actor))
            await written(
                uow,
                "promote",
                agent,
                "deploy",
                "promote",
                f"Deploy {deploy_id} of {agent.name}",
                actor,
                hash_after=promoted.source_version,
                detail=promoted.status,
            )
            return promoted

    async def retry(self, caller: Caller, agent_id: str, deploy_id: str) -> DeployAnswer:
        """Start again a deploy that did not start (its commit stays)."""
        actor = actor_of(caller, OWNER)
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            await deploy_in(uow, agent_id, deploy_id)
            retried = done(await self.deploys.retry(uow, deploy_id))
            await written(
                uow,
                "retry",
                agent,
                "deploy",
                "retry",
                f"Deploy {deploy_id} of {agent.name}",
                actor,
                hash_after=retried.source_version,
                detail=retried.status,
            )
            return retried


class Webhooks(Resource):
    async def push(self, provider: str, headers: Mapping[str, str | None], body: bytes) -> Pushed:
        """A provider's push: 404 when no agent's source has the repository's address, 403 (the public 401) when
        the signature (GitHub) or token (GitLab) does not fit that repository's webhook secret; otherwise a push
        to the production branch of a source that builds on push starts (or joins) the build of its commit."""
        if len(body) > MAX_WEBHOOK_BYTES:
            raise Unprocessable(413, "the webhook's body is too large")
        payload = json_object(body)
        event_name = headers["X-GitHub-Event"] if provider == "github" else headers["X-Gitlab-Event"]
        if event_name not in PUSH_EVENTS:
            return Pushed(ignored=f"not a push event ({event_name!r})")
        event = parse_push(provider, payload)
        if event is None:
            raise Unprocessable(422, f"the body is not a {provider} push event")
        keys = {repository_key(url) for url in event.urls}
        async with self.runtime.unit_of_work() as uow:
            matches = [
                (source, org_id)
                for source, org_id in await store(uow).external_sources(provider)
                if source.url is not None and repository_key(source.url) in keys
            ]
            if not matches:
                raise NotFound("no agent's source is this repository")
            verified = []
            for source, org_id in matches:
                settings = await store(uow).deploy_settings(source.agent_id)
                if signed(provider, settings.webhook_secret, body, headers):
                    verified.append((source, org_id, settings))
            if not verified:
                what = "signature (X-Hub-Signature-256)" if provider == "github" else "token (X-Gitlab-Token)"
                raise Unprocessable(403, f"the webhook's {what} does not fit the repository's webhook secret")
            delivery = headers["X-GitHub-Delivery"] or headers["X-Gitlab-Event-UUID"]
            answers: list[PushBuilt | PushIgnored] = []
            for source, org_id, settings in verified:
                if event.branch != source.branch or event.commit is None:
                    answers.append(PushIgnored(agent_id=source.agent_id, ignored=f"not a push to {source.branch}"))
                    continue
                if not settings.builds_on_push:
                    answers.append(PushIgnored(agent_id=source.agent_id, ignored="builds on push is off"))
                    continue
                await self.repos.fetch(source)
                if not await self.repos.has_commit(source, event.commit):
                    raise Unprocessable(409, f"commit {event.commit} is not on the remote yet; send the push again")
                ref = delivery or event.commit
                build = await self.deploys.request_build(uow, source, org_id, event.commit, "push", ref, None)
                answers.append(PushBuilt(agent_id=source.agent_id, build_id=build.build_id, status=build.status))
                agent = await uow.workspace.agent(source.agent_id)
                await record_write(
                    uow,
                    "push",
                    org_id=org_id,
                    guild_id=None if agent is None else agent.guild_id,
                    agent_id=source.agent_id,
                    kind="build",
                    action="start",
                    target=f"Build of {source.agent_id if agent is None else agent.name}",
                    actor=provider,  # no person: the provider's signed push
                    hash_after=event.commit,
                    detail=f"{build.build_id}: push {ref}",
                )
            return Pushed(results=answers)


def json_object(body: bytes) -> dict[str, Any]:
    """A webhook's body: a JSON object in UTF-8 (422 otherwise), whatever the event."""
    try:
        payload = json.loads(body.decode())
    except (ValueError, RecursionError):
        raise Unprocessable(422, "the webhook's body is not UTF-8 JSON") from None
    if not isinstance(payload, dict):
        raise Unprocessable(422, "the webhook's body is not a JSON object")
    return payload


def signed(provider: str, secret: str | None, body: bytes, headers: Mapping[str, str | None]) -> bool:
    """Whether the delivery carries the repository's webhook secret: GitHub's HMAC of the body, GitLab's token."""
    if secret is None:
        return False
    if provider == "github":
        return github_signature_ok(secret, body, headers["X-Hub-Signature-256"])
    return gitlab_token_ok(secret, headers["X-Gitlab-Token"])


async def build_of(uow: UnitOfWork, build: Build, *, log: bool = False) -> api.Build:
    """The build as the routes answer it: with its triggers, its deploys and (``log``) its log."""
    deploys = [d.deploy_id for d in await store(uow).deploys_of(build.agent_id) if d.build_id == build.build_id]
    return build_answer(build, await store(uow).triggers(build.build_id), deploys, log=log)


async def deploy_in(uow: UnitOfWork, agent_id: str, deploy_id: str) -> Deploy:
    deploy = await store(uow).deploy(deploy_id)
    if deploy is None or deploy.agent_id != agent_id:
        raise NotFound(f"agent {agent_id!r} has no deploy {deploy_id!r}")
    return deploy


def done(result: Deploy | Refusal) -> DeployAnswer:
    if isinstance(result, Refusal):
        raise refused(result)
    return deploy_answer(result)
