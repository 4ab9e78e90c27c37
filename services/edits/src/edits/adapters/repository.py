"""Queries over the edits schema. A repository works inside the caller's transaction (a unit of work's)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, Text, func, literal, select
from sqlalchemy.ext.asyncio import AsyncConnection

from assent.domain import Agent
from assent.hashing import content_hash

from ..domain.model import LiveMemory
from . import tables as t


class EditsRepository:
    """The edits service's own targets: Memory, the guild text and its change log."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def memory(self, agent_id: str, *, for_update: bool = False) -> LiveMemory | None:
        query = select(t.memory).where(t.memory.c.agent_id == agent_id)
        row = (await self.conn.execute(query.with_for_update() if for_update else query)).first()
        return None if row is None else LiveMemory(row.agent_id, row.content, row.version, row.hash)

    async def agent_memory(self, agent_id: str) -> tuple[Agent | None, LiveMemory | None]:
        """The agent (from the workspace directory this service owns) and its live Memory, in one round trip."""
        query = (
            select(t.agents, t.memory.c.content, t.memory.c.version.label("memory_version"), t.memory.c.hash)
            .join(t.memory, t.memory.c.agent_id == t.agents.c.agent_id)
            .where(t.agents.c.agent_id == agent_id)
        )
        row = (await self.conn.execute(query)).first()
        if row is None:
            return None, None
        agent = Agent(
            row.agent_id,
            row.org_id,
            row.guild_id,
            row.name,
            row.live,
            row.task,
            row.revision,
            tuple(row.owners),
            tuple(row.editors),
        )
        return agent, LiveMemory(row.agent_id, row.content, row.memory_version, row.hash)

    async def create_memory(self, agent_id: str, actor: str) -> None:
        await self.conn.execute(
            t.memory.insert().values(agent_id=agent_id, content="", version=0, hash=content_hash(""), updated_by=actor)
        )

    async def write_memory(
        self,
        org_id: str,
        agent_id: str,
        content: str,
        *,
        expected_version: int,
        actor: str,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        studio_session_id: str | None = None,
        studio_seq: int | None = None,
    ) -> int | None:
        """Write a new Memory version if the live one is ``expected_version``; None when it is not.

        Every write adds a revision and a ``file_changes`` row that links back to the request, if any. The
        three writes go to PostgreSQL as one statement.
        """
        new_hash = content_hash(content)
        updated = (
            t.memory.update()
            .where(t.memory.c.agent_id == agent_id, t.memory.c.version == expected_version)
            .values(
                content=content, version=expected_version + 1, hash=new_hash, updated_by=actor, updated_at=func.now()
            )
            .returning(t.memory.c.agent_id, t.memory.c.version)
            .cte("updated")
        )
        revision = (
            t.memory_revisions.insert()
            .from_select(
                ["agent_id", "version", "content", "hash", "author_user_id", "studio_session_id", "studio_seq"],
                select(
                    updated.c.agent_id,
                    updated.c.version,
                    literal(content),
                    literal(new_hash),
                    literal(actor),
                    literal(studio_session_id, Text),
                    literal(studio_seq, Integer),
                ),
            )
            .returning(t.memory_revisions.c.version)
            .cte("revision")
        )
        change = (
            t.file_changes.insert()
            .from_select(
                [
                    "org_id",
                    "agent_id",
                    "path",
                    "version",
                    "change",
                    "actor_user_id",
                    "tool_call_id",
                    "tool_name",
                    "studio_session_id",
                    "studio_seq",
                ],
                select(
                    literal(org_id),
                    literal(agent_id),
                    literal("memory.md"),
                    revision.c.version,
                    literal("update"),
                    literal(actor),
                    literal(tool_call_id, Text),
                    literal(tool_name, Text),
                    literal(studio_session_id, Text),
                    literal(studio_seq, Integer),
                ),
            )
            .returning(t.file_changes.c.change_id)
            .cte("change")
        )
        row = (
            await self.conn.execute(select(revision.c.version).select_from(revision).join(change, literal(True)))
        ).first()
        return None if row is None else int(row.version)

    async def memory_history(self, agent_id: str) -> list[dict[str, Any]]:
        """Every revision of an agent's Memory with the file change that wrote it, oldest first."""
        query = (
            select(
                t.memory_revisions.c.version,
                t.memory_revisions.c.hash,
                t.memory_revisions.c.author_user_id,
                t.memory_revisions.c.created_at,
                t.file_changes.c.tool_call_id,
                t.file_changes.c.tool_name,
                t.file_changes.c.studio_session_id,
                t.file_changes.c.studio_seq,
            )
            .join(
                t.file_changes,
                (t.file_changes.c.agent_id == t.memory_revisions.c.agent_id)
                & (t.file_changes.c.path == "memory.md")
                & (t.file_changes.c.version == t.memory_revisions.c.version),
            )
            .where(t.memory_revisions.c.agent_id == agent_id)
            .order_by(t.memory_revisions.c.version)
        )
        return [dict(row) for row in (await self.conn.execute(query)).mappings()]

    async def update_guild_text(self, guild_id: str, changes: dict[str, str]) -> bool:
        """Set the given text fields of a guild and bump its revision by one; False when there is no guild."""
        updated = await self.conn.execute(
            t.guilds.update()
            .where(t.guilds.c.guild_id == guild_id)
            .values(**changes, revision=t.guilds.c.revision + 1)
            .returning(t.guilds.c.guild_id)
        )
        return updated.first() is not None

    async def log_guild_change(
        self,
        guild_id: str,
        field: str,
        actor: str,
        *,
        tool_call_id: str | None,
        session_id: str | None,
        seq: int | None,
    ) -> None:
        await self.conn.execute(
            t.guild_changes.insert().values(
                guild_id=guild_id,
                field=field,
                changed_by=actor,
                tool_call_id=tool_call_id,
                studio_session_id=session_id,
                studio_seq=seq,
            )
        )

    async def guild_changes(self, guild_id: str) -> list[dict[str, Any]]:
        query = (
            select(
                t.guild_changes.c.field,
                t.guild_changes.c.changed_by,
                t.guild_changes.c.tool_call_id,
                t.guild_changes.c.studio_session_id,
                t.guild_changes.c.studio_seq,
                t.guild_changes.c.changed_at,
            )
            .where(t.guild_changes.c.guild_id == guild_id)
            .order_by(t.guild_changes.c.change_id)
        )
        return [dict(row) for row in (await self.conn.execute(query)).mappings()]
