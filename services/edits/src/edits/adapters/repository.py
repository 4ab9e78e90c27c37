"""Queries over the edits schema. Every function runs inside the caller's transaction."""

from __future__ import annotations

from typing import Any

from assent.hashing import content_hash
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from ..domain.model import Agent, LiveMemory, Request, Session
from . import tables as t


async def get_session(conn: AsyncConnection, session_id: str) -> Session | None:
    row = (await conn.execute(select(t.sessions).where(t.sessions.c.session_id == session_id))).first()
    if row is None:
        return None
    return Session(row.session_id, row.org_id, row.source_guild_id, row.operator_user_id)


async def save_session(conn: AsyncConnection, session: Session) -> None:
    await conn.execute(
        insert(t.sessions)
        .values(
            session_id=session.session_id,
            org_id=session.org_id,
            source_guild_id=session.source_guild_id,
            operator_user_id=session.operator_user_id,
        )
        .on_conflict_do_nothing()
    )


async def get_agent(conn: AsyncConnection, agent_id: str) -> Agent | None:
    row = (await conn.execute(select(t.agents).where(t.agents.c.agent_id == agent_id))).first()
    if row is None:
        return None
    return Agent(row.agent_id, row.org_id, row.guild_id, row.name, row.live)


async def get_memory(conn: AsyncConnection, agent_id: str, *, for_update: bool = False) -> LiveMemory | None:
    query = select(t.memory).where(t.memory.c.agent_id == agent_id)
    if for_update:
        query = query.with_for_update()
    row = (await conn.execute(query)).first()
    if row is None:
        return None
    return LiveMemory(row.agent_id, row.content, row.version, row.hash)


async def write_memory(
    conn: AsyncConnection,
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

    Every write adds a revision and a ``file_changes`` row that links back to the request, if any.
    """
    new_hash = content_hash(content)
    updated = (
        await conn.execute(
            t.memory.update()
            .where(t.memory.c.agent_id == agent_id, t.memory.c.version == expected_version)
            .values(content=content, version=expected_version + 1, hash=new_hash, updated_by=actor)
            .returning(t.memory.c.version)
        )
    ).first()
    if updated is None:
        return None
    version: int = updated.version
    revision_id = (
        await conn.execute(
            t.memory_revisions.insert()
            .values(
                agent_id=agent_id,
                version=version,
                content=content,
                hash=new_hash,
                author_user_id=actor,
                studio_session_id=studio_session_id,
                studio_seq=studio_seq,
            )
            .returning(t.memory_revisions.c.revision_id)
        )
    ).scalar_one()
    await conn.execute(
        t.file_changes.insert().values(
            agent_id=agent_id,
            path="memory.md",
            revision_id=revision_id,
            change="update",
            actor_user_id=actor,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            studio_session_id=studio_session_id,
            studio_seq=studio_seq,
        )
    )
    return version


def _request(row: Any) -> Request:
    return Request(
        proposal_id=row.proposal_id,
        session_id=row.session_id,
        seq=row.seq,
        tool_call_id=row.tool_call_id,
        tool=row.tool,
        kind=row.kind,
        agent_id=row.agent_id,
        base_version=row.base_version,
        base_hash=row.base_hash,
        proposed_hash=row.proposed_hash,
        content=row.arguments.get("content", ""),
        edit_status=row.edit_status,
        stale=row.stale,
        resolved_by_user_id=row.resolved_by_user_id,
        edit_resolved_at=row.edit_resolved_at,
        edit_version=row.edit_version,
    )


async def get_request(conn: AsyncConnection, proposal_id: str, *, for_update: bool = False) -> Request | None:
    query = select(t.requests).where(t.requests.c.proposal_id == proposal_id)
    if for_update:
        query = query.with_for_update()
    row = (await conn.execute(query)).first()
    return None if row is None else _request(row)


async def get_agent_memory(conn: AsyncConnection, agent_id: str) -> tuple[Agent | None, LiveMemory | None]:
    """The agent and its live Memory in one round trip."""
    query = (
        select(t.agents, t.memory.c.content, t.memory.c.version, t.memory.c.hash)
        .join(t.memory, t.memory.c.agent_id == t.agents.c.agent_id)
        .where(t.agents.c.agent_id == agent_id)
    )
    row = (await conn.execute(query)).first()
    if row is None:
        return None, None
    return (
        Agent(row.agent_id, row.org_id, row.guild_id, row.name, row.live),
        LiveMemory(row.agent_id, row.content, row.version, row.hash),
    )


async def request_clashing(conn: AsyncConnection, session_id: str, seq: int, tool_call_id: str) -> Request | None:
    """A request already at this session's ``seq`` or for this tool call, if any."""
    query = select(t.requests).where(
        ((t.requests.c.session_id == session_id) & (t.requests.c.seq == seq))
        | (t.requests.c.tool_call_id == tool_call_id)
    )
    row = (await conn.execute(query.limit(1))).first()
    return None if row is None else _request(row)
