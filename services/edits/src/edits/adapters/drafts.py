"""Queries over Task drafts: the drafts, their versions, the Task they publish to, and the notes a draft embeds.

A repository works inside the caller's transaction (a unit of work's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from assent.domain import Agent
from assent.hashing import content_hash
from edits_contract.workspace import FileChange

from ..domain.drafts import Draft, DraftVersion
from . import tables as t

d, v = t.task_drafts, t.task_draft_versions


def _version(row: Any) -> DraftVersion:
    return DraftVersion(row.version, row.content, row.hash, row.author, row.created_at)


class DraftsRepository:
    """Task drafts by id, by the message that drafted them, and by agent; and the Task they publish to."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def _drafts(self, query: Select[Any]) -> list[Draft]:
        rows = list(await self.conn.execute(query))
        if not rows:
            return []
        newest = {
            row.draft_id: _version(row)
            for row in await self.conn.execute(
                select(v)
                .where(v.c.draft_id.in_([row.draft_id for row in rows]))
                .order_by(v.c.draft_id, v.c.version.desc())
                .distinct(v.c.draft_id)
            )
        }
        return [
            Draft(
                draft_id=row.draft_id,
                org_id=row.org_id,
                agent_id=row.agent_id,
                session_id=row.session_id,
                created_message_seq=row.created_message_seq,
                turn_id=row.turn_id,
                proposal_id=row.proposal_id,
                tool_call_id=row.tool_call_id,
                base_hash=row.base_hash,
                rationale=row.rationale,
                status=row.status,
                newest=newest[row.draft_id],
                replaced_by=row.replaced_by,
                published_by_user_id=row.published_by_user_id,
                discarded_by_user_id=row.discarded_by_user_id,
                published_version=row.published_version,
                resolved_at=row.resolved_at,
                created_at=row.created_at,
            )
            for row in rows
        ]

    async def draft(self, draft_id: str, *, for_update: bool = False) -> Draft | None:
        query = select(d).where(d.c.draft_id == draft_id)
        found = await self._drafts(query.with_for_update() if for_update else query)
        return found[0] if found else None

    async def at_seq(self, session_id: str, seq: int, *, for_update: bool = False) -> Draft | None:
        """The draft the coach's message at ``seq`` of the session made."""
        query = select(d).where(d.c.session_id == session_id, d.c.created_message_seq == seq)
        found = await self._drafts(query.with_for_update() if for_update else query)
        return found[0] if found else None

    async def waiting(self, session_id: str, agent_id: str) -> list[Draft]:
        """The agent's pending drafts of the session."""
        return await self._drafts(
            select(d).where(d.c.session_id == session_id, d.c.agent_id == agent_id, d.c.status == "pending")
        )

    async def of_agent(self, agent_id: str) -> list[Draft]:
        """Every draft of the agent, newest first."""
        return await self._drafts(
            select(d).where(d.c.agent_id == agent_id).order_by(d.c.created_at.desc(), d.c.draft_id)
        )

    async def versions(self, draft_id: str) -> list[DraftVersion]:
        query = select(v).where(v.c.draft_id == draft_id).order_by(v.c.version)
        return [_version(row) for row in await self.conn.execute(query)]

    async def create(self, draft: Draft) -> None:
        """Store a new draft and its version 1 (the coach's); a draft already stored is left as it is."""
        created = await self.conn.execute(
            insert(d)
            .values(
                draft_id=draft.draft_id,
                org_id=draft.org_id,
                agent_id=draft.agent_id,
                session_id=draft.session_id,
                created_message_seq=draft.created_message_seq,
                turn_id=draft.turn_id,
                proposal_id=draft.proposal_id,
                tool_call_id=draft.tool_call_id,
                base_hash=draft.base_hash,
                rationale=draft.rationale,
            )
            .on_conflict_do_nothing()
            .returning(d.c.draft_id)
        )
        if created.first() is not None:
            await self.add_version(draft.draft_id, draft.newest.version, draft.newest.content, draft.newest.author)

    async def add_version(self, draft_id: str, version: int, content: str, author: str) -> None:
        await self.conn.execute(
            v.insert().values(
                draft_id=draft_id, version=version, content=content, hash=content_hash(content), author=author
            )
        )

    async def resolve(self, draft_id: str, status: str, **fields: Any) -> None:
        """Mark a draft ``status`` (published, discarded, superseded) with who and what (``fields``)."""
        await self.conn.execute(
            d.update().where(d.c.draft_id == draft_id).values(status=status, resolved_at=datetime.now(UTC), **fields)
        )

    async def agent(self, agent_id: str, *, for_update: bool = False) -> Agent | None:
        """The agent with its Task; ``for_update`` holds its row until the transaction ends (publishing)."""
        query = select(t.agents).where(t.agents.c.agent_id == agent_id)
        row = (await self.conn.execute(query.with_for_update() if for_update else query)).first()
        if row is None:
            return None
        return Agent(
            row.agent_id,
            row.org_id,
            row.guild_id,
            row.name,
            row.live,
            row.task,
            row.revision,
            tuple(row.owners or ()),
            tuple(row.editors or ()),
        )

    async def set_task(self, agent_id: str, task: str) -> int:
        """Write the agent's Task, one revision up; answers the new revision."""
        row = (
            await self.conn.execute(
                t.agents.update()
                .where(t.agents.c.agent_id == agent_id)
                .values(task=task, revision=t.agents.c.revision + 1)
                .returning(t.agents.c.revision)
            )
        ).one()
        return int(row.revision)

    async def existing_notes(self, org_id: str, display_paths: Iterable[str]) -> set[str]:
        """Which of ``display_paths`` name a live note of the organisation."""
        paths: Sequence[str] = sorted(set(display_paths))
        if not paths:
            return set()
        query = select(t.notes.c.display_path).where(t.notes.c.org_id == org_id, t.notes.c.display_path.in_(paths))
        return {row.display_path for row in await self.conn.execute(query)}

    async def log_task_change(
        self,
        org_id: str,
        agent_id: str,
        revision: int,
        *,
        actor: str,
        tool_call_id: str,
        tool_name: str,
        studio_session_id: str,
        studio_seq: int,
    ) -> None:
        """A ``file_changes`` row for the Task a published draft wrote (path ``agent/<id>/task.md``)."""
        await self.conn.execute(
            t.file_changes.insert().values(
                org_id=org_id,
                agent_id=agent_id,
                path=f"agent/{agent_id}/task.md",
                version=revision,
                change="update",
                actor_user_id=actor,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                studio_session_id=studio_session_id,
                studio_seq=studio_seq,
            )
        )

    async def task_changes(self, agent_id: str) -> list[FileChange]:
        """The ``file_changes`` rows of the agent's Task, oldest first."""
        c = t.file_changes
        query = (
            select(
                c.c.agent_id,
                c.c.path,
                c.c.version,
                c.c.change,
                c.c.actor_user_id,
                c.c.tool_call_id,
                c.c.tool_name,
                c.c.studio_session_id,
                c.c.studio_seq,
                c.c.created_at,
            )
            .where(c.c.agent_id == agent_id, c.c.path == func.concat("agent/", agent_id, "/task.md"))
            .order_by(c.c.change_id)
        )
        return [FileChange.model_validate(dict(row)) for row in (await self.conn.execute(query)).mappings()]
