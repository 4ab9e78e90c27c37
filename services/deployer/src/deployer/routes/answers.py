"""The deployer's rows as its public routes answer them (the models of :mod:`deployer_contract.source` and
:mod:`deployer_contract.deploys`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from deployer_contract import deploys as api_deploys
from deployer_contract import source as api_source

from ..adapters.repository import Build, BuildTrigger, Deploy, DeploySettings, Issue


def when(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def deploy_answer(deploy: Deploy) -> api_source.Deploy:
    return api_source.Deploy(
        deploy_id=deploy.deploy_id,
        agent_id=deploy.agent_id,
        build_id=deploy.build_id,
        source_version=deploy.source_version,
        proposal_id=deploy.proposal_id,
        issue_id=deploy.issue_id,
        status=deploy.status,
        live=deploy.status == "live",
        target=deploy.target,
        auto_promote=deploy.auto_promote,
        error=deploy.error,
        requested_by=deploy.requested_by,
        promoted_by=deploy.promoted_by,
        created_at=deploy.created_at.isoformat(),
        started_at=when(deploy.started_at),
        live_at=when(deploy.live_at),
        links=api_source.DeployLinks(
            deploy=f"/api/agents/{deploy.agent_id}/deploys/{deploy.deploy_id}",
            build=f"/api/agents/{deploy.agent_id}/builds/{deploy.build_id}",
        ),
    )


def build_answer(
    build: Build, triggers: Iterable[BuildTrigger], deploys: Iterable[str], *, log: bool = False
) -> api_deploys.Build:
    """A build with its triggers and deploys; read on its own (``log``), with its log too."""
    return api_deploys.Build(
        build_id=build.build_id,
        agent_id=build.agent_id,
        source_version=build.source_version,
        status=build.status,
        artifact_digest=build.artifact_digest,
        error=build.error,
        attempts=build.attempts,
        created_at=build.created_at.isoformat(),
        started_at=when(build.started_at),
        finished_at=when(build.finished_at),
        triggers=[
            api_deploys.Trigger(trigger=t.trigger, ref=t.ref, actor=t.actor, at=t.at.isoformat()) for t in triggers
        ],
        deploys=list(deploys),
        log=build.log if log else None,
    )


def issue_answer(issue: Issue) -> api_source.Issue:
    return api_source.Issue(
        issue_id=issue.issue_id,
        agent_id=issue.agent_id,
        number=issue.number,
        title=issue.title,
        text=issue.text,
        status=issue.status,
        evals=issue.evals,
        created_by=issue.created_by,
        updated_by=issue.updated_by,
        fix_deploy_id=issue.fix_deploy_id,
    )


def settings_answer(settings: DeploySettings) -> api_deploys.DeploySettings:
    """The settings; a webhook target without its token, and the webhook secret only as whether there is one."""
    target = settings.target
    return api_deploys.DeploySettings(
        agent_id=settings.agent_id,
        builds_on_push=settings.builds_on_push,
        auto_promote=settings.auto_promote,
        target=api_deploys.ShownWebhookTarget(kind="webhook", url=target.url)
        if isinstance(target, api_deploys.WebhookTarget)
        else target,
        webhook_secret_set=settings.webhook_secret is not None,
    )
