"""The deployer's queries over its own tables, in the unit of work's transaction (``uow.store("deployer")``).

:class:`FakeDeployerRepository` in the unit tests mirrors the methods the handlers use."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from assent.runtime.uow import StoredProposal

from . import tables as t
from .git import Source


@dataclass(frozen=True)
class Deployment:
    deployment_id: int
    agent_id: str
    source_version: str | None
    deployed_by: str
    deployed_at: datetime


@dataclass(frozen=True)
class Issue:
    issue_id: str
    agent_id: str
    org_id: str
    number: int
    title: str
    text: str
    status: str
    evals: dict[str, str]
    created_by: str
    updated_by: str

    def as_json(self) -> dict[str, Any]:
        return {
            "issue_id": self.issue_id,
            "agent_id": self.agent_id,
            "number": self.number,
            "title": self.title,
            "text": self.text,
            "status": self.status,
            "evals": self.evals,
            "created_by": self.created_by,
            "updated_by": self.updated_by,
        }


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
    )


class DeployerRepository:
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
        number = (
            await self.conn.scalar(
                select(func.coalesce(func.max(t.issues.c.number), 0)).where(t.issues.c.agent_id == agent_id)
            )
        ) + 1
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
