"""The desk's reads of the projection, and the store of idempotency keys, in PostgreSQL.

Fixed statement texts run on an asyncpg connection (prepared once per connection), as
:mod:`gateway.adapters.projection` does. Every read is walled by the organisation the caller's token names.
"""

from __future__ import annotations

from typing import TypeVar

import asyncpg
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection

from assent.db import driver_connection

from ..domain.desk import Item, SessionNames, SessionRow
from ..domain.proposals import Proposal
from . import tables as t
from .projection import POLICY_CONTEXT, READ_COLUMNS, read_proposal

Row = TypeVar("Row", bound=BaseModel)

ITEM_COLUMNS = (
    "r.session_id, r.seq, r.proposal_id, r.turn_id, r.kind, r.action, r.section, r.agent_id, r.target, r.base,"
    " r.lines, r.widens, r.stale, r.card ->> 'apply_label' AS apply_label, r.reason, r.proposed_at,"
    " v.require, v.expires_at, CASE WHEN v.escalated_at IS NOT NULL THEN v.escalation_rule END AS escalation_rule,"
    " CASE WHEN v.escalated_at IS NOT NULL THEN v.escalate_to END AS escalated_to,"
    f" CASE WHEN v.require IS NULL THEN 0 ELSE (SELECT count(*) FROM {t.approvals.fullname} AS ap"
    " WHERE ap.proposal_id = r.proposal_id) END AS approvals"
)
"""A pending item's columns, as the tray lists it: with what the policy's verdict ``v`` says of it (approvals
required and counted, its deadline, its escalation)."""
VERDICT = f" LEFT OUTER JOIN {t.policy_verdicts.fullname} AS v ON v.proposal_id = r.proposal_id"

NAMES = (
    "c.name AS coach_name, c.channel AS coach_channel, c.model AS coach_model,"
    f" ARRAY(SELECT DISTINCT n.agent_id FROM {t.projected_proposals.fullname} AS n"
    " WHERE n.session_id = s.session_id AND n.agent_id IS NOT NULL ORDER BY n.agent_id) AS agents,"
    " f.label AS first_label, f.reason AS first_reason"
)
"""The names people know a session ``s`` by (:class:`~gateway.domain.desk.SessionNames`); the statement joins
:data:`NAMES_FROM`."""
NAMES_FROM = (
    f" LEFT OUTER JOIN {t.session_coaches.fullname} AS c ON c.session_id = s.session_id"
    f" LEFT OUTER JOIN LATERAL (SELECT r.target ->> 'label' AS label, r.reason FROM {t.projected_proposals.fullname}"
    " AS r WHERE r.session_id = s.session_id ORDER BY r.seq LIMIT 1) AS f ON true"
)

SESSIONS = (
    "SELECT s.session_id, s.operator_user_id AS operator_id, s.source_guild_id,"
    " CASE WHEN s.closed_at IS NULL THEN 'open' ELSE 'closed' END AS state,"
    f" (SELECT count(*) FROM {t.projected_proposals.fullname} AS r"
    " WHERE r.session_id = s.session_id AND r.status = 'pending')"
    f" AS waiting_on, s.opened_at, s.closed_at, {NAMES}, count(*) OVER () AS total"
    f" FROM {t.sessions.fullname} AS s" + NAMES_FROM + " WHERE s.org_id = $1"
    " AND ($2::text IS NULL OR (s.closed_at IS NULL) = ($2 = 'open'))"
    " AND ($5::text IS NULL OR starts_with(s.session_id, $5))"
    " ORDER BY s.opened_at DESC, s.session_id DESC LIMIT $3 OFFSET $4"
)
"""A page of an organisation's sessions (``$2``: open, closed or either; ``$5``: only the ids that start so), newest
first, each with how many decisions it waits on and its names; ``total`` counts every session that matches."""

SESSION_NAMES = f"SELECT {NAMES} FROM {t.sessions.fullname} AS s" + NAMES_FROM + " WHERE s.session_id = $1"
"""A session's names, as the tray says them."""

PENDING_ACROSS = (
    f"SELECT {ITEM_COLUMNS}, count(*) OVER () AS total"
    f" FROM {t.projected_proposals.fullname} AS r JOIN {t.sessions.fullname} AS s ON s.session_id = r.session_id"
    + VERDICT
    + " WHERE s.org_id = $1 AND r.status = 'pending'"
    " AND ($2::text IS NULL OR r.section = $2) AND ($3::text IS NULL OR r.agent_id = $3)"
    " AND ($6::text[] IS NULL OR (v.escalated_at IS NOT NULL AND v.escalate_to ?| $6::text[]))"
    " ORDER BY s.opened_at DESC, r.session_id, r.seq LIMIT $4 OFFSET $5"
)
"""A page of an organisation's open proposals across its sessions (by section ``$2`` and agent ``$3`` when given):
the newest session's first, each session's in seq order; with roles ``$6``, only those escalated to one of them."""

SESSION_PENDING = (
    f"SELECT {ITEM_COLUMNS} FROM {t.projected_proposals.fullname} AS r"
    + VERDICT
    + " WHERE r.session_id = $1 AND r.status = 'pending'"
    " ORDER BY r.seq"
)
"""A session's open proposals, as the tray lists them."""

OPEN_PROPOSALS = (
    "SELECT "
    + ", ".join(f"r.{name}" for name in READ_COLUMNS)
    + POLICY_CONTEXT
    + f" FROM {t.projected_proposals.fullname} AS r JOIN {t.sessions.fullname} AS s ON s.session_id = r.session_id"
    f" LEFT OUTER JOIN {t.agents.fullname} AS a ON a.agent_id = r.agent_id"
    " WHERE r.session_id = $1 AND r.status = 'pending' ORDER BY r.seq"
)
"""A session's open proposals whole, as a decision needs them (:func:`gateway.handlers.decide`)."""

CLAIM_KEY = (
    f"INSERT INTO {t.idempotency_keys.fullname} AS k (org_id, user_id, key, fingerprint) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (org_id, user_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, claimed_at = now(),"
    " status = NULL, content_type = NULL, body = NULL, answered_at = NULL"
    " WHERE k.claimed_at < now() - make_interval(secs => $5)"
    " OR (k.answered_at IS NULL AND k.claimed_at < now() - make_interval(secs => $6))"
    " RETURNING true"
)
"""Claim a person's key for an HTTP request: a new key, one kept longer than its time to live (``$5`` s), or one whose
request never answered within ``$6`` s (its gateway stopped meanwhile). Returns a row when claimed."""

READ_KEY = (
    f"SELECT fingerprint, status, content_type, body FROM {t.idempotency_keys.fullname}"
    " WHERE org_id = $1 AND user_id = $2 AND key = $3"
)

ANSWER_KEY = (
    f"UPDATE {t.idempotency_keys.fullname} SET status = $4, content_type = $5, body = $6, answered_at = now()"
    " WHERE org_id = $1 AND user_id = $2 AND key = $3"
)

RELEASE_KEY = f"DELETE FROM {t.idempotency_keys.fullname} WHERE org_id = $1 AND user_id = $2 AND key = $3"


class DeskStore:
    """The desk's statements over one asyncpg connection."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    @classmethod
    async def over(cls, conn: AsyncConnection) -> DeskStore:
        return cls(await driver_connection(conn))

    async def sessions(
        self, org_id: str, state: str | None, limit: int, offset: int, prefix: str | None = None
    ) -> tuple[list[SessionRow], int]:
        """:data:`SESSIONS`: the page's sessions, and how many match in all."""
        rows = await self.conn.fetch(SESSIONS, org_id, state, limit, offset, prefix)
        if rows or offset == 0:
            total = int(rows[0]["total"]) if rows else 0
            return [SessionRow.model_validate({**row, **SessionNames.of(row).model_dump()}) for row in rows], total
        first = await self.conn.fetchrow(SESSIONS, org_id, state, 1, 0, prefix)  # a page past the end carries no total
        return [], 0 if first is None else int(first["total"])

    async def pending_across(
        self,
        org_id: str,
        section: str | None,
        agent_id: str | None,
        limit: int,
        offset: int,
        escalated_to: list[str] | None = None,
    ) -> tuple[list[Item], int]:
        """:data:`PENDING_ACROSS`: the page's items, and how many match in all."""
        rows = await self.conn.fetch(PENDING_ACROSS, org_id, section, agent_id, limit, offset, escalated_to)
        if rows or offset == 0:
            return _page(Item, rows)
        first = await self.conn.fetchrow(PENDING_ACROSS, org_id, section, agent_id, 1, 0, escalated_to)
        return [], 0 if first is None else int(first["total"])

    async def session_names(self, session_id: str) -> SessionNames:
        """:data:`SESSION_NAMES` (a session that does not exist: no names)."""
        row = await self.conn.fetchrow(SESSION_NAMES, session_id)
        return SessionNames() if row is None else SessionNames.of(row)

    async def session_pending(self, session_id: str) -> list[Item]:
        return [Item.model_validate(dict(row)) for row in await self.conn.fetch(SESSION_PENDING, session_id)]

    async def open_proposals(self, session_id: str) -> list[Proposal]:
        return [read_proposal(row) for row in await self.conn.fetch(OPEN_PROPOSALS, session_id)]


def _page(model: type[Row], rows: list[asyncpg.Record]) -> tuple[list[Row], int]:
    """The rows of a page as ``model`` (each row's ``total`` left out), and the ``total`` they carry."""
    total = int(rows[0]["total"]) if rows else 0
    return [model.model_validate(dict(row)) for row in rows], total


class KeyStore:
    """The first answer to each HTTP request a person sent with an ``Idempotency-Key``, over one asyncpg connection
    (each statement commits on its own)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    async def claim(
        self, who: tuple[str, str], key: str, fingerprint: str, keep_seconds: float, abandon_seconds: float
    ) -> bool:
        """Whether this HTTP request now holds the key (:data:`CLAIM_KEY`)."""
        return bool(await self.conn.fetchval(CLAIM_KEY, *who, key, fingerprint, keep_seconds, abandon_seconds))

    async def read(self, who: tuple[str, str], key: str) -> asyncpg.Record | None:
        """The key's fingerprint, and its first answer (status None while it is being answered)."""
        return await self.conn.fetchrow(READ_KEY, *who, key)

    async def answer(self, who: tuple[str, str], key: str, status: int, content_type: str, body: bytes) -> None:
        await self.conn.execute(ANSWER_KEY, *who, key, status, content_type, body)

    async def release(self, who: tuple[str, str], key: str) -> None:
        """Forget the key: its HTTP request changed nothing that a retry must not redo (an outage)."""
        await self.conn.execute(RELEASE_KEY, *who, key)
