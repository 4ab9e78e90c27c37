"""The deployer's queries over its own tables, in the unit of work's transaction (``uow.store(DeployerRepository)``).

:class:`FakeDeployerRepository` in the unit tests mirrors the methods the handlers use."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import TypeAdapter
from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from assent.runtime.uow import StoredProposal
from deployer_contract.deploys import Target

from ..domain.activity import ActivityEntry, DeployLinks, What
from ..domain.deploys import DeployStatus
from . import tables as t
from .git import Source


@dataclass(frozen=True)
class Deployment:
    deployment_id: int
    agent_id: str
    source_version: str | None
    deployed_by: str
    deployed_at: datetime


IssueStatus = Literal["open", "fixed", "closed"]


@dataclass(frozen=True)
class Issue:
    issue_id: str
    agent_id: str
    org_id: str
    number: int
    title: str
    text: str
    status: IssueStatus
    evals: dict[str, str]
    created_by: str
    updated_by: str
    fix_deploy_id: str | None = None


def _source(row: Any) -> Source:
    return Source(row.agent_id, row.mode, row.branch, row.url, row.provider)


def _issue(row: Any) -> Issue:
    return Issue(
        row.issue_id,
        row.agent_id,
        row.org_id,
        row.number,
        row.title,
        row.text,
        row.status,
        dict(row.evals),
        row.created_by,
        row.updated_by,
        row.fix_deploy_id,
    )


# --- builds, deploys, jobs, activity --------------------------------------------------------------------


TARGET: TypeAdapter[Target] = TypeAdapter(Target)


@dataclass(frozen=True)
class DeploySettings:
    agent_id: str
    builds_on_push: bool = False
    auto_promote: bool = True
    target: Target | None = None
    webhook_secret: str | None = None
    last_seen_head: str | None = None


@dataclass(frozen=True)
class Build:
    build_id: str
    agent_id: str
    org_id: str
    source_version: str
    status: str
    artifact_digest: str | None
    log: str
    error: str | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class BuildTrigger:
    """Who or what asked for a build: a push (``ref``: the delivery), the poller, an approval (``ref``: the
    proposal), a person."""

    trigger: str
    ref: str
    actor: str | None
    at: datetime


@dataclass(frozen=True)
class Deploy:
    deploy_id: str
    agent_id: str
    org_id: str
    build_id: str
    source_version: str
    proposal_id: str | None
    issue_id: str | None
    status: DeployStatus
    target: str
    auto_promote: bool
    error: str | None
    attempts: int
    requested_by: str
    promoted_by: str | None
    created_at: datetime
    started_at: datetime | None
    live_at: datetime | None


@dataclass(frozen=True)
class Job:
    job_id: int
    kind: str
    ref: str
    attempts: int


class DeploysRepository:
    """Builds, deploys, jobs, settings and activity (mixed into :class:`DeployerRepository`)."""

    conn: AsyncConnection

    async def deploy_settings(self, agent_id: str) -> DeploySettings:
        row = (
            await self.conn.execute(select(t.deploy_settings).where(t.deploy_settings.c.agent_id == agent_id))
        ).first()
        if row is None:
            return DeploySettings(agent_id)
        target = None if row.target is None else TARGET.validate_python(row.target)
        return DeploySettings(
            row.agent_id, row.builds_on_push, row.auto_promote, target, row.webhook_secret, row.last_seen_head
        )

    async def save_deploy_settings(self, agent_id: str, actor: str, **fields: Any) -> DeploySettings:
        statement = insert(t.deploy_settings).values(agent_id=agent_id, updated_by=actor, **fields)
        await self.conn.execute(
            statement.on_conflict_do_update(
                index_elements=["agent_id"], set_={**fields, "updated_by": actor, "updated_at": func.now()}
            )
        )
        return await self.deploy_settings(agent_id)

    async def sources_building_on_push(self) -> list[tuple[Source, DeploySettings]]:
        rows = await self.conn.execute(
            select(t.repositories, t.deploy_settings.c.last_seen_head)
            .join(t.deploy_settings, t.deploy_settings.c.agent_id == t.repositories.c.agent_id)
            .where(t.deploy_settings.c.builds_on_push)
        )
        return [(_source(row), DeploySettings(row.agent_id, True, last_seen_head=row.last_seen_head)) for row in rows]

    async def external_sources(self, provider: str) -> list[tuple[Source, str]]:
        """Every external source of ``provider`` with its organisation."""
        rows = await self.conn.execute(
            select(t.repositories).where(t.repositories.c.mode == "external", t.repositories.c.provider == provider)
        )
        return [(_source(row), row.org_id) for row in rows]

    async def org_of(self, agent_id: str) -> str | None:
        return await self.conn.scalar(select(t.repositories.c.org_id).where(t.repositories.c.agent_id == agent_id))

    # --- builds -------------------------------------------------------------------------------------

    async def ensure_build(
        self, build_id: str, agent_id: str, org_id: str, commit: str, trigger: str, ref: str, actor: str | None
    ) -> tuple[Build, bool]:
        """The build of ``commit`` (made now, with its job, if there is none: returned True), with ``trigger``
        recorded. Two callers at once get the same build: the unique constraint decides which one made it."""
        made = await self.conn.scalar(
            insert(t.builds)
            .values(build_id=build_id, agent_id=agent_id, org_id=org_id, source_version=commit, status="queued")
            .on_conflict_do_nothing(constraint="uq_builds_agent_id_source_version")
            .returning(t.builds.c.build_id)
        )
        build = await self.build_of_commit(agent_id, commit)
        assert build is not None
        await self.conn.execute(
            insert(t.build_triggers)
            .values(build_id=build.build_id, trigger=trigger, ref=ref, actor=actor)
            .on_conflict_do_nothing()
        )
        if made is not None:
            await self.enqueue("build", build.build_id)
        return build, made is not None

    async def build_of_commit(self, agent_id: str, commit: str) -> Build | None:
        row = (
            await self.conn.execute(
                select(t.builds).where(t.builds.c.agent_id == agent_id, t.builds.c.source_version == commit)
            )
        ).first()
        return None if row is None else Build(**row._mapping)

    async def build(self, build_id: str, *, for_update: bool = False) -> Build | None:
        query = select(t.builds).where(t.builds.c.build_id == build_id)
        row = (await self.conn.execute(query.with_for_update() if for_update else query)).first()
        return None if row is None else Build(**row._mapping)

    async def builds_of(self, agent_id: str) -> list[Build]:
        rows = await self.conn.execute(
            select(t.builds).where(t.builds.c.agent_id == agent_id).order_by(t.builds.c.created_at.desc())
        )
        return [Build(**row._mapping) for row in rows]

    async def triggers(self, build_id: str) -> list[BuildTrigger]:
        rows = await self.conn.execute(
            select(t.build_triggers)
            .where(t.build_triggers.c.build_id == build_id)
            .order_by(t.build_triggers.c.created_at, t.build_triggers.c.trigger)
        )
        return [BuildTrigger(r.trigger, r.ref, r.actor, r.created_at) for r in rows]

    async def update_build(self, build_id: str, **fields: Any) -> Build:
        row = (
            await self.conn.execute(
                t.builds.update().where(t.builds.c.build_id == build_id).values(**fields).returning(*t.builds.c)
            )
        ).one()
        return Build(**row._mapping)

    # --- deploys ------------------------------------------------------------------------------------

    async def add_deploy(self, **values: Any) -> Deploy:
        """A new deploy (a redelivered approval finds the one it made: the id is the proposal's)."""
        await self.conn.execute(insert(t.deploys).values(**values).on_conflict_do_nothing())
        found = await self.deploy(values["deploy_id"])
        assert found is not None
        return found

    async def deploy(self, deploy_id: str, *, for_update: bool = False) -> Deploy | None:
        query = select(t.deploys).where(t.deploys.c.deploy_id == deploy_id)
        row = (await self.conn.execute(query.with_for_update() if for_update else query)).first()
        return None if row is None else Deploy(**row._mapping)

    async def deploys_of(self, agent_id: str) -> list[Deploy]:
        rows = await self.conn.execute(
            select(t.deploys).where(t.deploys.c.agent_id == agent_id).order_by(t.deploys.c.created_at.desc())
        )
        return [Deploy(**row._mapping) for row in rows]

    async def deploys_of_build(self, build_id: str, status: str) -> list[Deploy]:
        rows = await self.conn.execute(
            select(t.deploys)
            .where(t.deploys.c.build_id == build_id, t.deploys.c.status == status)
            .order_by(t.deploys.c.created_at)
            .with_for_update()
        )
        return [Deploy(**row._mapping) for row in rows]

    async def update_deploy(self, deploy_id: str, **fields: Any) -> Deploy:
        row = (
            await self.conn.execute(
                t.deploys.update().where(t.deploys.c.deploy_id == deploy_id).values(**fields).returning(*t.deploys.c)
            )
        ).one()
        return Deploy(**row._mapping)

    async def link_fix(self, issue_id: str, deploy_id: str) -> None:
        await self.conn.execute(
            t.issues.update().where(t.issues.c.issue_id == issue_id).values(fix_deploy_id=deploy_id)
        )

    # --- jobs ---------------------------------------------------------------------------------------

    async def enqueue(self, kind: str, ref: str) -> None:
        """Queue the job (again, when it ran before: a retry)."""
        statement = insert(t.jobs).values(kind=kind, ref=ref, status="queued")
        await self.conn.execute(
            statement.on_conflict_do_update(
                constraint="uq_jobs_kind_ref",
                set_={"status": "queued", "attempts": 0, "available_at": func.now(), "last_error": None},
            )
        )

    async def claim_job(self) -> Job | None:
        """The next queued job that no other worker holds, locked for this transaction."""
        row = (
            await self.conn.execute(
                select(t.jobs.c.job_id, t.jobs.c.kind, t.jobs.c.ref, t.jobs.c.attempts)
                .where(t.jobs.c.status == "queued", t.jobs.c.available_at <= func.now())
                .order_by(t.jobs.c.job_id)
                .limit(1)
                .with_for_update(skip_locked=True)
            )
        ).first()
        return None if row is None else Job(row.job_id, row.kind, row.ref, row.attempts)

    async def seconds_to_next_job(self) -> float | None:
        """Seconds until the earliest queued job comes due (negative when one is due); None when none is queued."""
        due = await self.conn.scalar(
            select(func.extract("epoch", func.min(t.jobs.c.available_at) - func.now())).where(
                t.jobs.c.status == "queued"
            )
        )
        return None if due is None else float(due)

    async def finish_job(self, job_id: int, status: str = "done", error: str | None = None) -> None:
        await self.conn.execute(
            t.jobs.update().where(t.jobs.c.job_id == job_id).values(status=status, last_error=error)
        )

    async def postpone_job(self, job_id: int, error: str, seconds: float, give_up_after: int) -> int:
        """Count a failed attempt; the job waits ``seconds``, or fails after ``give_up_after`` attempts."""
        attempts = await self.conn.scalar(
            t.jobs.update()
            .where(t.jobs.c.job_id == job_id)
            .values(
                attempts=t.jobs.c.attempts + 1,
                last_error=error,
                available_at=func.now() + func.make_interval(0, 0, 0, 0, 0, 0, seconds),
            )
            .returning(t.jobs.c.attempts)
        )
        if attempts >= give_up_after:
            await self.finish_job(job_id, "failed", error)
        return int(attempts)

    # --- activity -----------------------------------------------------------------------------------

    async def add_activity(
        self, org_id: str, agent_id: str, what: What, who: str | None, detail: str, links: DeployLinks
    ) -> None:
        await self.conn.execute(
            t.activity.insert().values(
                org_id=org_id, agent_id=agent_id, what=what, who=who, detail=detail, links=links.model_dump(mode="json")
            )
        )

    async def activity_of(self, org_id: str, agent_id: str | None, limit: int) -> list[ActivityEntry]:
        query = select(t.activity).where(t.activity.c.org_id == org_id)
        if agent_id is not None:
            query = query.where(t.activity.c.agent_id == agent_id)
        rows = await self.conn.execute(
            query.order_by(t.activity.c.at.desc(), t.activity.c.activity_id.desc()).limit(limit)
        )
        return [
            ActivityEntry(
                who=r.who,
                what=r.what,
                when=r.at.isoformat(),
                agent_id=r.agent_id,
                proposal_id=r.links.get("proposal_id"),
                detail=r.detail,
                links={k: v for k, v in r.links.items() if k != "proposal_id"},
            )
            for r in rows
        ]


class DeployerRepository(DeploysRepository):
    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    # --- repositories and deployments -----------------------------------------------------------------

    async def source(self, agent_id: str) -> Source | None:
        row = (await self.conn.execute(select(t.repositories).where(t.repositories.c.agent_id == agent_id))).first()
        return None if row is None else _source(row)

    async def save_source(self, source: Source, org_id: str, actor: str) -> None:
        values = {
            "agent_id": source.agent_id,
            "org_id": org_id,
            "mode": source.mode,
            "branch": source.branch,
            "url": source.url,
            "provider": source.provider,
            "created_by": actor,
        }
        statement = insert(t.repositories).values(**values)
        await self.conn.execute(
            statement.on_conflict_do_update(
                index_elements=["agent_id"], set_={k: statement.excluded[k] for k in values if k != "created_by"}
            )
        )

    async def latest_deployment(self, agent_id: str) -> Deployment | None:
        row = (
            await self.conn.execute(
                select(t.deployments)
                .where(t.deployments.c.agent_id == agent_id)
                .order_by(t.deployments.c.deployment_id.desc())
                .limit(1)
            )
        ).first()
        return None if row is None else Deployment(**row._mapping)

    async def add_deployment(self, agent_id: str, source_version: str | None, actor: str) -> Deployment:
        row = (
            await self.conn.execute(
                t.deployments.insert()
                .values(agent_id=agent_id, source_version=source_version, deployed_by=actor)
                .returning(*t.deployments.c)
            )
        ).one()
        return Deployment(**row._mapping)

    # --- chats ----------------------------------------------------------------------------------------

    async def waiting(self, session_id: str) -> str | None:
        return await self.conn.scalar(
            select(t.chats.c.waiting_proposal_id).where(t.chats.c.session_id == session_id).with_for_update()
        )

    async def set_waiting(self, session_id: str, proposal_id: str) -> None:
        statement = insert(t.chats).values(session_id=session_id, waiting_proposal_id=proposal_id)
        await self.conn.execute(
            statement.on_conflict_do_update(index_elements=["session_id"], set_={"waiting_proposal_id": proposal_id})
        )

    async def turn_baseline(self, session_id: str, turn_id: str, current: str | None) -> str | None:
        """The reply's baseline, recording ``current`` when this is the reply's first call."""
        await self.conn.execute(
            insert(t.chat_turns)
            .values(session_id=session_id, turn_id=turn_id, baseline_proposal_id=current)
            .on_conflict_do_nothing()
        )
        return await self.conn.scalar(
            select(t.chat_turns.c.baseline_proposal_id).where(
                t.chat_turns.c.session_id == session_id, t.chat_turns.c.turn_id == turn_id
            )
        )

    async def set_turn_baseline(self, session_id: str, turn_id: str, proposal_id: str) -> None:
        await self.conn.execute(
            t.chat_turns.update()
            .where(t.chat_turns.c.session_id == session_id, t.chat_turns.c.turn_id == turn_id)
            .values(baseline_proposal_id=proposal_id)
        )

    async def turn_failure(self, session_id: str, turn_id: str, tool_call_id: str) -> int:
        """How many of the reply's calls a file check refused before ``tool_call_id``, recording it when it is new
        (a call sent again keeps its place). The reply's row exists (:meth:`turn_baseline`); the session is locked."""
        c = t.chat_turns.c
        where = (c.session_id == session_id, c.turn_id == turn_id)
        failed = list(await self.conn.scalar(select(c.failed_calls).where(*where).with_for_update()) or [])
        if tool_call_id in failed:
            return failed.index(tool_call_id)
        await self.conn.execute(t.chat_turns.update().where(*where).values(failed_calls=[*failed, tool_call_id]))
        return len(failed)

    async def record_reads(self, session_id: str, hashes: dict[str, str | None], source_version: str) -> None:
        if not hashes:
            return
        statement = insert(t.chat_reads).values(
            [
                {"session_id": session_id, "path": p, "hash": h, "source_version": source_version}
                for p, h in hashes.items()
            ]
        )
        await self.conn.execute(
            statement.on_conflict_do_update(
                index_elements=["session_id", "path"],
                set_={"hash": statement.excluded.hash, "source_version": statement.excluded.source_version},
            )
        )

    async def reads(self, session_id: str) -> dict[str, str | None]:
        rows = await self.conn.execute(
            select(t.chat_reads.c.path, t.chat_reads.c.hash).where(t.chat_reads.c.session_id == session_id)
        )
        return {row.path: row.hash for row in rows}

    # --- proposals (the shared table, this service's rows) ---------------------------------------------

    async def proposals_of_agent(self, agent_id: str) -> list[tuple[StoredProposal, datetime]]:
        """The agent's source proposals, newest first, with when each was proposed."""
        p = t.proposals
        rows = await self.conn.execute(
            select(p).where(p.c.agent_id == agent_id, p.c.kind == "source").order_by(p.c.created_at.desc())
        )
        fields = StoredProposal.__dataclass_fields__
        return [(StoredProposal(**{name: getattr(row, name) for name in fields}), row.created_at) for row in rows]

    async def has_chat_proposal(self, agent_id: str) -> bool:
        """Whether the agent has a source proposal from chat (an agent's chat or the builder chat), whatever its
        status; an issue's fix is not one."""
        p = t.proposals
        found = await self.conn.scalar(
            select(p.c.proposal_id)
            .where(p.c.agent_id == agent_id, p.c.kind == "source", p.c.payload["issue_id"].astext.is_(None))
            .limit(1)
        )
        return found is not None

    # --- issues ---------------------------------------------------------------------------------------

    async def issue(self, issue_id: str) -> Issue | None:
        row = (await self.conn.execute(select(t.issues).where(t.issues.c.issue_id == issue_id))).first()
        return None if row is None else _issue(row)

    async def issues_of(self, agent_id: str) -> list[Issue]:
        rows = await self.conn.execute(
            select(t.issues).where(t.issues.c.agent_id == agent_id).order_by(t.issues.c.number)
        )
        return [_issue(row) for row in rows]

    async def add_issue(
        self, issue_id: str, agent_id: str, org_id: str, title: str, text: str, evals: dict[str, str], actor: str
    ) -> Issue:
        latest = await self.conn.scalar(
            select(func.coalesce(func.max(t.issues.c.number), 0)).where(t.issues.c.agent_id == agent_id)
        )
        number = int(latest or 0) + 1
        row = (
            await self.conn.execute(
                t.issues.insert()
                .values(
                    issue_id=issue_id,
                    agent_id=agent_id,
                    org_id=org_id,
                    number=number,
                    title=title,
                    text=text,
                    status="open",
                    evals=evals,
                    created_by=actor,
                    updated_by=actor,
                )
                .returning(*t.issues.c)
            )
        ).one()
        return _issue(row)

    async def update_issue(self, issue_id: str, actor: str, **fields: Any) -> Issue:
        row = (
            await self.conn.execute(
                t.issues.update()
                .where(t.issues.c.issue_id == issue_id)
                .values(**fields, updated_by=actor, updated_at=func.now())
                .returning(*t.issues.c)
            )
        ).one()
        return _issue(row)
