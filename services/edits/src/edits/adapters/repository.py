"""Queries over the edits schema. Every function runs inside the caller's transaction."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, Text, func, literal, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from assent.hashing import content_hash

from ..domain.model import Agent, LiveMemory, Request, Session
from . import tables as t


async def get_session(conn: AsyncConnection, session_id: str) -> Session | None:
    row = (await conn.execute(select(t.sessions).where(t.sessions.c.session_id == session_id))).first()
    if row is None:
        return None
    return Session(row.session_id, row.org_id, row.source_guild_id, row.operator_user_id, row.closed_at is not None)


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

    Every write adds a revision and a ``file_changes`` row that links back to the request, if any. The three
    writes go to PostgreSQL as one statement.
    """
    new_hash = content_hash(content)
    updated = (
        t.memory.update()
        .where(t.memory.c.agent_id == agent_id, t.memory.c.version == expected_version)
        .values(content=content, version=expected_version + 1, hash=new_hash, updated_by=actor, updated_at=func.now())
        .returning(t.memory.c.agent_id, t.memory.c.version)
        .cte("updated")
    )
    revision = (
        insert(t.memory_revisions)
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
        .returning(t.memory_revisions.c.revision_id, t.memory_revisions.c.version)
        .cte("revision")
    )
    change = (
        insert(t.file_changes)
        .from_select(
            [
                "agent_id",
                "path",
                "revision_id",
                "change",
                "actor_user_id",
                "tool_call_id",
                "tool_name",
                "studio_session_id",
                "studio_seq",
            ],
            select(
                literal(agent_id),
                literal("memory.md"),
                revision.c.revision_id,
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
    row = (await conn.execute(select(revision.c.version).select_from(revision).join(change, literal(True)))).first()
    return None if row is None else int(row.version)


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


async def get_request_for_decision(conn: AsyncConnection, proposal_id: str) -> tuple[Request | None, LiveMemory | None]:
    """The request and its agent's live Memory, both locked until the transaction ends, in one round trip."""
    query = (
        select(
            t.requests,
            t.memory.c.content.label("live_content"),
            t.memory.c.version.label("live_version"),
            t.memory.c.hash.label("live_hash"),
        )
        .join(t.memory, t.memory.c.agent_id == t.requests.c.agent_id)
        .where(t.requests.c.proposal_id == proposal_id)
        .with_for_update()
    )
    row = (await conn.execute(query)).first()
    if row is None:
        return None, None
    return _request(row), LiveMemory(row.agent_id, row.live_content, row.live_version, row.live_hash)


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
