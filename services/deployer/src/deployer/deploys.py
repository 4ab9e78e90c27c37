"""Builds and deploys: the use cases, and the workers that run them as durable jobs.

Contracts a caller may rely on:

- one commit of an agent has one build, whoever asks first (a push, the poller, an approval, a retry); every
  asker is recorded as a trigger of that build;
- a build or deploy is a row of ``jobs``; a worker claims one with ``FOR UPDATE SKIP LOCKED`` and holds the lock
  until the job's result is committed, so a worker killed mid-job (``kill -9``) leaves it queued and another (or
  the restarted service) runs it again; its result is written, and its final event emitted, once;
- at most ``concurrency`` jobs run at once per process;
- a deploy whose build fails, or whose target does not take it, is ``failed`` with an error naming its commit (the
  commit stays, the proposal stays approved); :meth:`Deploys.retry` starts it again;
- a target may see the same call twice for one deploy after a crash (see :mod:`.adapters.targets`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from assent.domain import Refusal
from assent.faults import crash_point
from assent.runtime.uow import UnitOfWork
from deployer_contract.messages import (
    BuildFinished,
    BuildProgressed,
    BuildStarted,
    DeployFailed,
    DeployLive,
    DeployPromoted,
    DeployStarted,
    IssueFixLinked,
)
from deployer_contract.topics import DEPLOYS_EVENTS

from .adapters.artifacts import Artifacts, pack
from .adapters.git import GitError, GitRepos, Source
from .adapters.repository import Build, Deploy, DeployerRepository, Job
from .adapters.targets import DeployOrder, DeployTarget, TargetError, Targets
from .domain import checks
from .domain.activity import DeployLinks, FailedDeployLinks, FixLinks, RequestedDeployLinks
from .domain.deploys import deploy_error, promotion_refusal, retry_refusal

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 5


def store(uow: UnitOfWork) -> DeployerRepository:
    return uow.store(DeployerRepository)


def deploy_id_for(proposal_id: str) -> str:
    """The deploy an approval starts: the same for every delivery of the approval."""
    return "dep_" + uuid.uuid5(uuid.NAMESPACE_URL, f"deploy/{proposal_id}").hex[:20]


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


class Deploys:
    def __init__(
        self,
        repos: GitRepos,
        artifacts: Artifacts,
        targets: Targets,
        schemas: Mapping[checks.FileFormat, Mapping[str, Any]],
        *,
        concurrency: int = 2,
        poll_seconds: float = 60.0,
        idle_seconds: float = 5.0,
    ) -> None:
        self.repos = repos
        self.artifacts = artifacts
        self.targets = targets
        self.schemas = schemas
        self.concurrency = concurrency
        self.poll_seconds = poll_seconds
        self.idle_seconds = idle_seconds
        self.wake = asyncio.Event()
        self.next_job_in: float | None = None
        """Seconds until the next queued job comes due, as the last look that found none saw it (None: none)."""

    def _wake(self, uow: UnitOfWork) -> None:
        async def wake() -> None:
            self.wake.set()

        uow.on_commit(wake)

    # --- starting builds and deploys ----------------------------------------------------------------------

    async def request_build(
        self, uow: UnitOfWork, source: Source, org_id: str, commit: str, trigger: str, ref: str, actor: str | None
    ) -> Build:
        build, made = await store(uow).ensure_build(new_id("bld"), source.agent_id, org_id, commit, trigger, ref, actor)
        if made:
            self._wake(uow)
        return build

    async def start_deploy(
        self,
        uow: UnitOfWork,
        source: Source,
        org_id: str,
        commit: str,
        actor: str,
        *,
        deploy_id: str,
        proposal_id: str | None = None,
        issue_id: str | None = None,
    ) -> Deploy:
        """Deploy ``commit``: its build (shared with a push of the same commit), then its target. With an
        ``issue_id`` the deploy is linked to the issue as its fix."""
        repo = store(uow)
        existing = await repo.deploy(deploy_id)
        if existing is not None:
            return existing
        build = await self.request_build(
            uow, source, org_id, commit, "approval" if proposal_id else "manual", proposal_id or deploy_id, actor
        )
        # Locked: a build finishing now either sees this deploy once committed, or has finished before this reads it.
        build = await repo.build(build.build_id, for_update=True) or build
        settings = await repo.deploy_settings(source.agent_id)
        target = (settings.target or self.targets.default).kind
        deploy = await repo.add_deploy(
            deploy_id=deploy_id,
            agent_id=source.agent_id,
            org_id=org_id,
            build_id=build.build_id,
            source_version=commit,
            proposal_id=proposal_id,
            issue_id=issue_id,
            status="pending",
            target=target,
            auto_promote=settings.auto_promote,
            requested_by=actor,
        )
        links = RequestedDeployLinks(
            deploy=f"/api/agents/{source.agent_id}/deploys/{deploy_id}",
            build=f"/api/agents/{source.agent_id}/builds/{build.build_id}",
            commit=commit,
            proposal=None if proposal_id is None else f"/api/agents/{source.agent_id}/proposals/{proposal_id}",
            proposal_id=proposal_id,
        )
        await repo.add_activity(
            org_id, source.agent_id, "deploy", actor, f"deploy of {commit[:12]} requested ({target})", links
        )
        if issue_id is not None:
            await repo.link_fix(issue_id, deploy_id)
            issue = await repo.issue(issue_id)
            await repo.add_activity(
                org_id,
                source.agent_id,
                "link fix",
                actor,
                f"deploy {deploy_id} of {commit[:12]} linked as the fix of issue #{issue.number if issue else '?'}",
                FixLinks(**dict(links), issue=f"/api/workspace/agents/{source.agent_id}/issues/{issue_id}"),
            )
            await uow.emit(
                DEPLOYS_EVENTS,
                source.agent_id,
                IssueFixLinked(
                    org_id=org_id,
                    agent_id=source.agent_id,
                    issue_id=issue_id,
                    deploy_id=deploy_id,
                    source_version=commit,
                    proposal_id=proposal_id or deploy_id,
                    actor=actor,
                ),
            )
        if build.status == "succeeded":
            await repo.enqueue("deploy", deploy_id)
            self._wake(uow)
        elif build.status == "failed":
            deploy = await self._fail(uow, deploy, f"its build {build.build_id} failed: {build.error}")
        return deploy

    async def _fail(self, uow: UnitOfWork, deploy: Deploy, reason: str) -> Deploy:
        error = deploy_error(deploy.source_version, reason)
        repo = store(uow)
        failed = await repo.update_deploy(deploy.deploy_id, status="failed", error=error)
        await uow.emit(
            DEPLOYS_EVENTS,
            deploy.agent_id,
            DeployFailed(
                org_id=deploy.org_id,
                agent_id=deploy.agent_id,
                deploy_id=deploy.deploy_id,
                source_version=deploy.source_version,
                error=error,
                proposal_id=deploy.proposal_id,
            ),
        )
        await repo.add_activity(
            deploy.org_id,
            deploy.agent_id,
            "deploy failed",
            None,
            error,
            FailedDeployLinks(
                deploy=f"/api/agents/{deploy.agent_id}/deploys/{deploy.deploy_id}",
                commit=deploy.source_version,
                proposal_id=deploy.proposal_id,
            ),
        )
        return failed

    # --- what people do to a deploy -----------------------------------------------------------------------

    async def retry(self, uow: UnitOfWork, deploy_id: str) -> Deploy | Refusal:
        repo = store(uow)
        deploy = await repo.deploy(deploy_id, for_update=True)
        if deploy is None:
            return Refusal(404, "unknown_deploy", f"there is no deploy {deploy_id!r}")
        refusal = retry_refusal(deploy.status, deploy_id)
        if refusal is not None:
            return refusal
        build = await repo.build(deploy.build_id, for_update=True)
        assert build is not None
        deploy = await repo.update_deploy(deploy_id, status="pending", error=None)
        if build.status == "failed":
            await repo.update_build(build.build_id, status="queued", error=None)
            await repo.enqueue("build", build.build_id)
        elif build.status == "succeeded":
            await repo.enqueue("deploy", deploy_id)
        self._wake(uow)
        return deploy

    async def promote(self, uow: UnitOfWork, deploy_id: str, actor: str) -> Deploy | Refusal:
        repo = store(uow)
        deploy = await repo.deploy(deploy_id, for_update=True)
        if deploy is None:
            return Refusal(404, "unknown_deploy", f"there is no deploy {deploy_id!r}")
        refusal = promotion_refusal(deploy.status, deploy_id)
        if refusal is not None:
            return refusal
        try:
            order = await self._order(uow, deploy)
            await (await self._target(uow, deploy.agent_id)).promote(order)
        except TargetError as exc:
            return Refusal(
                502, "target_refused", f"deploy {deploy_id} of {deploy.source_version[:12]} was not promoted: {exc}"
            )
        await uow.emit(
            DEPLOYS_EVENTS,
            deploy.agent_id,
            DeployPromoted(
                org_id=deploy.org_id,
                agent_id=deploy.agent_id,
                deploy_id=deploy_id,
                source_version=deploy.source_version,
                actor=actor,
            ),
        )
        await repo.add_activity(
            deploy.org_id,
            deploy.agent_id,
            "promote",
            actor,
            f"promoted deploy {deploy_id} of {deploy.source_version[:12]}",
            DeployLinks(deploy=f"/api/agents/{deploy.agent_id}/deploys/{deploy_id}", commit=deploy.source_version),
        )
        return await self._live(uow, deploy, order, actor)

    async def _live(self, uow: UnitOfWork, deploy: Deploy, order: DeployOrder, promoted_by: str | None) -> Deploy:
        repo = store(uow)
        live = await repo.update_deploy(
            deploy.deploy_id, status="live", promoted_by=promoted_by, live_at=datetime.now(UTC), error=None
        )
        await repo.add_deployment(deploy.agent_id, deploy.source_version, promoted_by or deploy.requested_by)
        await uow.emit(
            DEPLOYS_EVENTS,
            deploy.agent_id,
            DeployLive(
                org_id=deploy.org_id,
                agent_id=deploy.agent_id,
                deploy_id=deploy.deploy_id,
                source_version=deploy.source_version,
                artifact_digest=order.artifact_digest,
                promoted_by=promoted_by,
            ),
        )
        return live

    async def _target(self, uow: UnitOfWork, agent_id: str) -> DeployTarget:
        """The agent's target now (its Deploys settings, else the service's default)."""
        return self.targets.get((await store(uow).deploy_settings(agent_id)).target)

    async def _order(self, uow: UnitOfWork, deploy: Deploy) -> DeployOrder:
        repo = store(uow)
        build = await repo.build(deploy.build_id)
        assert build is not None and build.artifact_digest is not None
        return DeployOrder(
            deploy_id=deploy.deploy_id,
            org_id=deploy.org_id,
            agent_id=deploy.agent_id,
            source_version=deploy.source_version,
            artifact_digest=build.artifact_digest,
            artifact_path=str(self.artifacts.path(build.artifact_digest)),
        )

    # --- the jobs -----------------------------------------------------------------------------------------

    async def _run_build(self, uow: UnitOfWork, job: Job, unit_of_work: Callable[[], Any]) -> None:
        repo = store(uow)
        build = await repo.build(job.ref)
        if build is None or build.status in ("succeeded", "failed"):
            await repo.finish_job(job.job_id)
            return
        source = await repo.source(build.agent_id)
        if source is None:
            raise GitError(f"agent {build.agent_id!r} has no source repository any more")
        async with unit_of_work() as step:
            started = await store(step).update_build(
                build.build_id, status="running", attempts=build.attempts + 1, started_at=datetime.now(UTC)
            )
            await step.emit(
                DEPLOYS_EVENTS,
                build.agent_id,
                BuildStarted(
                    org_id=build.org_id,
                    agent_id=build.agent_id,
                    build_id=build.build_id,
                    source_version=build.source_version,
                    attempt=started.attempts,
                    triggers=tuple(t.trigger for t in await store(step).triggers(build.build_id)),
                ),
            )
        crash_point("deployer.build.started")
        files = await self.repos.blobs(source, build.source_version)
        lines = [f"build {build.build_id} of {build.source_version} (attempt {started.attempts})"]
        problems = []
        for path, _, data in files:
            try:
                text = data.decode()
            except UnicodeDecodeError:
                lines.append(f"skip {path}: not UTF-8 text")
                continue
            refusal = checks.check_file(path, text, self.schemas)
            if refusal is None:
                lines.append(f"ok   {path}")
            else:
                lines.append(f"FAIL {path}: {refusal.message}")
                problems.append(refusal.message)
        digest = None
        if not problems:
            await self._progress(unit_of_work, build, "checked", f"{len(files)} files checked")
            data = pack(files)
            digest = await asyncio.to_thread(self.artifacts.store, data)
            lines.append(f"packed {len(files)} files, {len(data)} bytes: {digest}")
            await self._progress(unit_of_work, build, "packed", digest)
        error = None if not problems else f"{len(problems)} file(s) failed the checks: " + "; ".join(problems[:5])
        finished = await repo.update_build(
            build.build_id,
            status="failed" if problems else "succeeded",
            artifact_digest=digest,
            log="\n".join([*lines, error or "succeeded"]) + "\n",
            error=error,
            finished_at=datetime.now(UTC),
        )
        await uow.emit(
            DEPLOYS_EVENTS,
            build.agent_id,
            BuildFinished(
                org_id=build.org_id,
                agent_id=build.agent_id,
                build_id=build.build_id,
                source_version=build.source_version,
                status=finished.status,
                artifact_digest=digest,
                error=error,
            ),
        )
        for deploy in await repo.deploys_of_build(build.build_id, "pending"):
            if error is None:
                await repo.enqueue("deploy", deploy.deploy_id)
            else:
                await self._fail(uow, deploy, f"its build {build.build_id} failed: {error}")
        await repo.finish_job(job.job_id)

    async def _progress(self, unit_of_work: Callable[[], Any], build: Build, step: str, detail: str) -> None:
        async with unit_of_work() as uow:
            await uow.emit(
                DEPLOYS_EVENTS,
                build.agent_id,
                BuildProgressed(
                    org_id=build.org_id,
                    agent_id=build.agent_id,
                    build_id=build.build_id,
                    source_version=build.source_version,
                    step=step,
                    detail=detail,
                ),
            )

    async def _run_deploy(self, uow: UnitOfWork, job: Job) -> None:
        repo = store(uow)
        deploy = await repo.deploy(job.ref, for_update=True)
        if deploy is None or deploy.status != "pending":
            await repo.finish_job(job.job_id)
            return
        deploy = await repo.update_deploy(deploy.deploy_id, attempts=deploy.attempts + 1)
        try:
            order = await self._order(uow, deploy)
            target = await self._target(uow, deploy.agent_id)
            await target.start(order)
        except TargetError as exc:
            await self._fail(uow, deploy, str(exc))
            await repo.finish_job(job.job_id)
            return
        started = await repo.update_deploy(deploy.deploy_id, status="started", started_at=datetime.now(UTC))
        await uow.emit(
            DEPLOYS_EVENTS,
            deploy.agent_id,
            DeployStarted(
                org_id=deploy.org_id,
                agent_id=deploy.agent_id,
                deploy_id=deploy.deploy_id,
                build_id=deploy.build_id,
                source_version=deploy.source_version,
                artifact_digest=order.artifact_digest,
                target=deploy.target,
                proposal_id=deploy.proposal_id,
            ),
        )
        if deploy.auto_promote:
            try:
                await target.promote(order)
            except TargetError as exc:
                await self._fail(uow, started, str(exc))
                await repo.finish_job(job.job_id)
                return
            await self._live(uow, started, order, None)
        await repo.finish_job(job.job_id)

    async def run_one(self, unit_of_work: Callable[[], Any]) -> bool:
        """Claim and run one job; False when none was waiting."""
        failure: tuple[Job, str] | None = None
        async with unit_of_work() as uow:
            job = await store(uow).claim_job()
            if job is None:
                self.next_job_in = await store(uow).seconds_to_next_job()
                return False
            try:
                async with uow.conn.begin_nested():
                    if job.kind == "build":
                        await self._run_build(uow, job, unit_of_work)
                    else:
                        await self._run_deploy(uow, job)
            except (GitError, OSError, TargetError) as exc:
                failure = (job, f"{type(exc).__name__}: {exc}")
            except Exception as exc:
                log.exception("job %s %s failed", job.kind, job.ref)
                failure = (job, f"{type(exc).__name__}: {exc}")
            if failure is not None:
                attempts = await store(uow).postpone_job(job.job_id, failure[1], 2.0 * (job.attempts + 1), MAX_ATTEMPTS)
                if attempts >= MAX_ATTEMPTS:
                    await self._give_up(uow, job, failure[1])
        return True

    async def _give_up(self, uow: UnitOfWork, job: Job, error: str) -> None:
        repo = store(uow)
        if job.kind == "build":
            build = await repo.update_build(job.ref, status="failed", error=error, finished_at=datetime.now(UTC))
            for deploy in await repo.deploys_of_build(build.build_id, "pending"):
                await self._fail(uow, deploy, f"its build {build.build_id} failed: {error}")
        else:
            waiting = await repo.deploy(job.ref)
            if waiting is not None and waiting.status == "pending":
                await self._fail(uow, waiting, error)

    # --- the workers and the poller -----------------------------------------------------------------------

    async def _worker(self, unit_of_work: Callable[[], Any], *, polls: bool) -> None:
        """Run jobs while there are any; then wait to be woken (a job made by this process). The worker that
        ``polls`` also looks again when the next queued job comes due (a retry), and every ``idle_seconds`` at most
        for jobs made elsewhere (by another replica whose workers were busy, or that died). One worker looks on its
        own while all are idle, so an idle deployer costs one query a period, not one per worker; a worker that
        found a job wakes the others, as there may be more."""
        while True:
            self.wake.clear()  # before the look: a job made during it wakes the wait below
            try:
                if await self.run_one(unit_of_work):
                    self.wake.set()
                    continue
            except Exception:
                log.warning("the job worker failed; trying again", exc_info=True)
            timeout = None
            if polls:
                due = self.next_job_in
                timeout = self.idle_seconds if due is None else min(self.idle_seconds, max(due, 0.0))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout)

    async def poll_once(self, unit_of_work: Callable[[], Any]) -> int:
        """Fetch every remote that builds on push; a new production head starts its build. Returns how many."""
        async with unit_of_work() as uow:
            polled = await store(uow).sources_building_on_push()
        started = 0
        for source, seen in polled:
            try:
                head = await self.repos.head(source)
            except GitError:
                log.warning("could not fetch the source of %s", source.agent_id, exc_info=True)
                continue
            if head is None or head == seen.last_seen_head:
                continue
            async with unit_of_work() as uow:
                org_id = await store(uow).org_of(source.agent_id)
                if org_id is None:
                    continue
                await self.request_build(uow, source, org_id, head, "poll", head, None)
                await store(uow).save_deploy_settings(source.agent_id, "poller", last_seen_head=head)
            started += 1
        return started

    async def _poller(self, unit_of_work: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                await self.poll_once(unit_of_work)
            except Exception:
                log.warning("polling the remotes failed; trying again", exc_info=True)

    @contextlib.asynccontextmanager
    async def running(self, unit_of_work: Callable[[], Any]) -> AsyncIterator[None]:
        """The job workers (``concurrency`` of them) and, when ``poll_seconds`` > 0, the poller."""
        tasks = [
            asyncio.create_task(self._worker(unit_of_work, polls=i == 0), name=f"deploy-worker-{i}")
            for i in range(self.concurrency)
        ]
        if self.poll_seconds > 0:
            tasks.append(asyncio.create_task(self._poller(unit_of_work), name="deploy-poller"))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
