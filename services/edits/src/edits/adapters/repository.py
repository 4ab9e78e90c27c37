"""Queries over the edits schema. A repository works inside the caller's transaction (a unit of work's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from assent.db import driver_connection
from assent.domain import Agent
from assent.hashing import content_hash
from assent.runtime.uow import agent_from_row
from edits_contract.workspace import GuildChange, MemoryRevision

from ..domain.model import LiveMemory
from . import tables as t

# The statements of proposing and applying a Memory edit run on the asyncpg connection inside the unit of work's
# transaction (assent.db.driver_connection): fixed texts, prepared once per connection, on every round.

_MEMORY = f"SELECT agent_id, content, version, hash FROM {t.memory.fullname} WHERE agent_id = $1"
_MEMORY_FOR_UPDATE = f"{_MEMORY} FOR UPDATE"

_AGENTS_WITH_MEMORY = (
    "SELECT a.agent_id, a.org_id, a.guild_id, a.name, a.live, a.task, a.revision, a.owners, a.editors,"
    " m.content, m.version AS memory_version, m.hash"
    f" FROM {t.agents.fullname} AS a JOIN {t.memory.fullname} AS m ON m.agent_id = a.agent_id"
)
_AGENT_MEMORY = f"{_AGENTS_WITH_MEMORY} WHERE a.agent_id = $1"
"""An agent with its live Memory."""
_AGENT_MEMORIES = f"{_AGENTS_WITH_MEMORY} WHERE a.agent_id = ANY($1::text[])"
"""The agents of ``$1`` with their live Memory."""

_WRITE_MEMORY = (
    "WITH updated AS ("
    f" UPDATE {t.memory.fullname} SET content = $3, version = coalesce($5::integer, version + 1), hash = $6,"
    " updated_by = $7, updated_at = now()"
    " WHERE agent_id = $2 AND ($4::integer IS NULL OR version = $4) AND ($12::text IS NULL OR hash = $12)"
    " RETURNING agent_id, version"
    "), revision AS ("
    f" INSERT INTO {t.memory_revisions.fullname}"
    " (agent_id, version, content, hash, author_user_id, studio_session_id, studio_seq)"
    " SELECT updated.agent_id, updated.version, $3::text, $6::text, $7::text, $10::text, $11::integer FROM updated"
    " RETURNING version"
    "), change AS ("
    f" INSERT INTO {t.file_changes.fullname} (org_id, agent_id, path, version, change, actor_user_id, tool_call_id,"
    " tool_name, studio_session_id, studio_seq)"
    " SELECT $1::text, $2::text, 'memory.md', revision.version, 'update', $7::text, $8::text, $9::text, $10::text,"
    " $11::integer FROM revision"
    " RETURNING change_id"
    ")"
    " SELECT revision.version FROM revision JOIN change ON true"
)
"""A new Memory version if the live one is version ``$4`` (when given) and has hash ``$12`` (when given), with its
revision and its ``file_changes`` row, in one statement: ``$1`` org, ``$2`` agent, ``$3`` content, ``$5`` the new
version (``$4`` + 1, or the live one's + 1 when ``$4`` is not given), ``$6`` its hash, ``$7`` actor, then the request
it came from (``$8`` tool call id, ``$9`` tool name, ``$10`` session, ``$11`` seq). No row when the Memory moved.
The row is locked by the update itself, which checks its condition again on the row as committed."""


def _agent_memory(row: Any) -> tuple[Agent | None, LiveMemory | None]:
    """An agent and its live Memory from a row of :data:`_AGENTS_WITH_MEMORY` (none from no row)."""
    if row is None:
        return None, None
    return agent_from_row(row), LiveMemory(row["agent_id"], row["content"], row["memory_version"], row["hash"])


class EditsRepository:
    """The edits service's own targets: Memory, the guild text and its change log."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn
        self._read_ahead: dict[str, tuple[Agent | None, LiveMemory | None]] = {}
        """What :meth:`read_agent_memories` read, by agent id, until this repository writes that Memory."""

    async def memory(self, agent_id: str, *, for_update: bool = False) -> LiveMemory | None:
        query = _MEMORY_FOR_UPDATE if for_update else _MEMORY
        row = await (await driver_connection(self.conn)).fetchrow(query, agent_id)
        return None if row is None else LiveMemory(row["agent_id"], row["content"], row["version"], row["hash"])

    async def agent_memory(self, agent_id: str) -> tuple[Agent | None, LiveMemory | None]:
        """The agent (from the workspace directory this service owns) and its live Memory, in one round trip, or
        none when :meth:`read_agent_memories` read them."""
        ahead = self._read_ahead.get(agent_id)
        if ahead is not None:
            return ahead
        return _agent_memory(await (await driver_connection(self.conn)).fetchrow(_AGENT_MEMORY, agent_id))

    async def read_agent_memories(self, agent_ids: Sequence[str]) -> None:
        """Read the agents of ``agent_ids`` with their live Memory in one round trip, for :meth:`agent_memory` to
        answer from (an agent that does not exist, or has no Memory, as such)."""
        wanted = [agent_id for agent_id in agent_ids if agent_id not in self._read_ahead]
        if not wanted:
            return
        rows = await (await driver_connection(self.conn)).fetch(_AGENT_MEMORIES, wanted)
        self._read_ahead.update(dict.fromkeys(wanted, (None, None)))
        self._read_ahead.update({row["agent_id"]: _agent_memory(row) for row in rows})

    async def create_memory(self, agent_id: str, actor: str) -> None:
        self._read_ahead.pop(agent_id, None)
        await self.conn.execute(
            t.memory.insert().values(agent_id=agent_id, content="", version=0, hash=content_hash(""), updated_by=actor)
        )

    async def write_memory(
        self,
        org_id: str,
        agent_id: str,
        content: str,
        *,
        expected_version: int | None = None,
        expected_hash: str | None = None,
        actor: str,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        studio_session_id: str | None = None,
        studio_seq: int | None = None,
    ) -> int | None:
        """Write a new Memory version if the live one is ``expected_version`` and has ``expected_hash`` (each only
        when given; at least one is); returns the new version, or None when the live Memory is not as expected.

        Every write adds a revision and a ``file_changes`` row that links back to the request, if any. The
        three writes go to PostgreSQL as one statement.
        """
        if expected_version is None and expected_hash is None:
            raise ValueError("a Memory write names the version or the hash it replaces")
        self._read_ahead.pop(agent_id, None)
        version = await (await driver_connection(self.conn)).fetchval(
            _WRITE_MEMORY,
            org_id,
            agent_id,
            content,
            expected_version,
            None if expected_version is None else expected_version + 1,
            content_hash(content),
            actor,
            tool_call_id,
            tool_name,
            studio_session_id,
            studio_seq,
            expected_hash,
        )
        return None if version is None else int(version)

    async def memory_content_at(self, agent_id: str, version: int) -> str | None:
        """The content of version ``version`` of an agent's Memory (version 0, the empty Memory an agent is created
        with, keeps no revision); None when no such revision is kept."""
        if version == 0:
            return ""
        query = select(t.memory_revisions.c.content).where(
            (t.memory_revisions.c.agent_id == agent_id) & (t.memory_revisions.c.version == version)
        )
        content = (await self.conn.execute(query)).scalar_one_or_none()
        return None if content is None else str(content)

    async def memory_history(self, agent_id: str) -> list[MemoryRevision]:
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
        return [MemoryRevision.model_validate(dict(row)) for row in (await self.conn.execute(query)).mappings()]

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

    async def guild_changes(self, guild_id: str) -> list[GuildChange]:
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
        return [GuildChange.model_validate(dict(row)) for row in (await self.conn.execute(query)).mappings()]
