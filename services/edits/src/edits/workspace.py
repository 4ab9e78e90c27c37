"""Direct workspace operations: create orgs, guilds and agents, and write Memory as a person would.

These are not proposals: they are the operator's (or a test's) own changes to live state, the kind of
change a pending request must never overwrite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from assent.hashing import content_hash

from .adapters import repository as repo
from .adapters import tables as t


class NotFound(LookupError):
    pass


class Conflict(Exception):
    pass


@dataclass(frozen=True)
class MemoryView:
    agent_id: str
    content: str
    version: int
    hash: str


async def create_org(engine: AsyncEngine, org_id: str, name: str) -> None:
    async with engine.begin() as conn:
        created = await conn.execute(
            insert(t.orgs).values(org_id=org_id, name=name).on_conflict_do_nothing().returning(t.orgs.c.org_id)
        )
        if created.first() is None:
            raise Conflict(f"org {org_id!r} already exists")


async def create_guild(engine: AsyncEngine, guild_id: str, org_id: str, name: str) -> None:
    async with engine.begin() as conn:
        if (await conn.execute(select(t.orgs.c.org_id).where(t.orgs.c.org_id == org_id))).first() is None:
            raise NotFound(f"org {org_id!r} does not exist")
        created = await conn.execute(
            insert(t.guilds)
            .values(guild_id=guild_id, org_id=org_id, name=name)
            .on_conflict_do_nothing()
            .returning(t.guilds.c.guild_id)
        )
        if created.first() is None:
            raise Conflict(f"guild {guild_id!r} already exists")


async def create_agent(
    engine: AsyncEngine, agent_id: str, org_id: str, guild_id: str | None, name: str, memory: str, actor: str
) -> MemoryView:
    """Create an agent with its Memory at version 0 (empty), then version 1 when ``memory`` is given."""
    async with engine.begin() as conn:
        if guild_id is not None:
            guild = (await conn.execute(select(t.guilds).where(t.guilds.c.guild_id == guild_id))).first()
            if guild is None or guild.org_id != org_id:
                raise NotFound(f"guild {guild_id!r} does not exist in org {org_id!r}")
        elif (await conn.execute(select(t.orgs.c.org_id).where(t.orgs.c.org_id == org_id))).first() is None:
            raise NotFound(f"org {org_id!r} does not exist")
        created = await conn.execute(
            insert(t.agents)
            .values(agent_id=agent_id, org_id=org_id, guild_id=guild_id, name=name)
            .on_conflict_do_nothing()
            .returning(t.agents.c.agent_id)
        )
        if created.first() is None:
            raise Conflict(f"agent {agent_id!r} already exists")
        await conn.execute(
            t.memory.insert().values(agent_id=agent_id, content="", version=0, hash=content_hash(""), updated_by=actor)
        )
        if memory:
            await repo.write_memory(conn, agent_id, memory, expected_version=0, actor=actor)
        live = await repo.get_memory(conn, agent_id)
    assert live is not None
    return MemoryView(live.agent_id, live.content, live.version, live.hash)


async def get_agent(engine: AsyncEngine, agent_id: str) -> dict[str, Any]:
    async with engine.connect() as conn:
        agent = await repo.get_agent(conn, agent_id)
    if agent is None:
        raise NotFound(f"agent {agent_id!r} does not exist")
    return {
        "agent_id": agent.agent_id,
        "org_id": agent.org_id,
        "guild_id": agent.guild_id,
        "name": agent.name,
        "live": agent.live,
    }


async def update_agent(engine: AsyncEngine, agent_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Move an agent to another guild (or none) or retire it (``live: false``)."""
    async with engine.begin() as conn:
        agent = await repo.get_agent(conn, agent_id)
        if agent is None:
            raise NotFound(f"agent {agent_id!r} does not exist")
        if changes.get("guild_id") is not None:
            guild = (await conn.execute(select(t.guilds).where(t.guilds.c.guild_id == changes["guild_id"]))).first()
            if guild is None or guild.org_id != agent.org_id:
                raise NotFound(f"guild {changes['guild_id']!r} does not exist in org {agent.org_id!r}")
        if changes:
            await conn.execute(t.agents.update().where(t.agents.c.agent_id == agent_id).values(**changes))
    return await get_agent(engine, agent_id)


async def read_memory(engine: AsyncEngine, agent_id: str) -> MemoryView:
    async with engine.connect() as conn:
        live = await repo.get_memory(conn, agent_id)
    if live is None:
        raise NotFound(f"agent {agent_id!r} does not exist")
    return MemoryView(live.agent_id, live.content, live.version, live.hash)


async def write_memory(
    engine: AsyncEngine, agent_id: str, content: str, expected_version: int | None, actor: str
) -> MemoryView:
    """Write Memory directly; with ``expected_version``, refuse (Conflict) when the live version differs."""
    async with engine.begin() as conn:
        live = await repo.get_memory(conn, agent_id, for_update=True)
        if live is None:
            raise NotFound(f"agent {agent_id!r} does not exist")
        if expected_version is not None and expected_version != live.version:
            raise Conflict(f"Memory of {agent_id!r} is at version {live.version}, not {expected_version}")
        version = await repo.write_memory(conn, agent_id, content, expected_version=live.version, actor=actor)
    assert version is not None  # the row is locked at live.version
    return MemoryView(agent_id, content, version, content_hash(content))


async def memory_history(engine: AsyncEngine, agent_id: str) -> list[dict[str, Any]]:
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
        .join(t.file_changes, t.file_changes.c.revision_id == t.memory_revisions.c.revision_id)
        .where(t.memory_revisions.c.agent_id == agent_id)
        .order_by(t.memory_revisions.c.version)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return [dict(row) for row in rows]
