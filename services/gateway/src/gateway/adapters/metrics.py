"""The gateway's pending decisions as a Prometheus gauge, read from its projection at each scrape.

``assent_pending_decisions{org, section}``: the proposals waiting for a person's decision, per organisation and
section. ``org`` is :func:`org_label` of the organisation's id, never the id or the name: organisations choose
their ids (``acme``), and a monitoring stack is read by people who serve every organisation, so a label that
names a customer would tell them who uses Assent and how much. Every replica reports the whole count (it is read
from the shared projection, not counted by the replica), so dashboards take ``max``, not ``sum``, across replicas.
"""

from __future__ import annotations

import hashlib

from prometheus_client import Gauge
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from . import tables

PENDING_DECISIONS = Gauge(
    "assent_pending_decisions",
    "Proposals waiting for a person's decision, by organisation (a hash of its id) and section",
    ["org", "section"],
)


def org_label(org_id: str) -> str:
    """The ``org`` label of an organisation: the first 16 hex digits of the SHA-256 of its id.

    The same on every replica and across restarts, so an organisation's series go on; an operator finds an
    organisation's with ``printf %s "$ORG_ID" | sha256sum | cut -c1-16``. It hides ids from a reader of the
    metrics, not from one who can guess an id and hash it.
    """
    return hashlib.sha256(org_id.encode()).hexdigest()[:16]


class PendingDecisions:
    """Sets :data:`PENDING_DECISIONS` from the projection: one grouped count over the pending proposals (a partial
    index holds only those), and removes the series of what is no longer pending anywhere."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.reported: set[tuple[str, str]] = set()
        proposals, sessions = tables.projected_proposals, tables.sessions
        self.query = (
            select(sessions.c.org_id, proposals.c.section, func.count())
            .select_from(proposals.join(sessions, sessions.c.session_id == proposals.c.session_id))
            .where(proposals.c.status == "pending")
            .group_by(sessions.c.org_id, proposals.c.section)
        )

    async def refresh(self) -> None:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(self.query)).all()
        counts: dict[tuple[str, str], int] = {}
        for org_id, section, count in rows:
            key = (org_label(org_id), section)
            counts[key] = counts.get(key, 0) + count
        for gone in self.reported - counts.keys():
            PENDING_DECISIONS.remove(*gone)
        for key, count in counts.items():
            PENDING_DECISIONS.labels(*key).set(count)
        self.reported = set(counts)
