"""Each organisation's policy in PostgreSQL: every version kept (``gateway.policies``, migration 0009), a new version
written with its entry of the history in one transaction, and the proposals a simulation replays the policy over.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from assent.db import driver_connection, json_param
from assent.policy import Policy, Proposed

from . import tables as t

VERSION_COLUMNS = "version, document, hash, set_by, set_at"
CURRENT = f"SELECT {VERSION_COLUMNS} FROM {t.policies.fullname} WHERE org_id = $1 ORDER BY version DESC LIMIT 1"
AT_VERSION = f"SELECT {VERSION_COLUMNS} FROM {t.policies.fullname} WHERE org_id = $1 AND version = $2"
VERSIONS = f"SELECT {VERSION_COLUMNS} FROM {t.policies.fullname} WHERE org_id = $1 ORDER BY version DESC LIMIT $2"
INSERT_VERSION = (
    f"INSERT INTO {t.policies.fullname} (org_id, version, document, hash, set_by, set_at)"
    " VALUES ($1, $2, $3::jsonb, $4, $5, $6)"
)
RECORD_CHANGE = (
    f"INSERT INTO {t.history_unlinked.fullname}"
    " (at, type, org_id, kind, action, target, actor, via, detail, hash_before, hash_after)"
    " VALUES ($1, 'written', $2, 'policy', $3, $4, $5, 'PUT /api/policy', $6, $7, $8)"
)
LAST_PROPOSALS = (
    "SELECT p.session_id, p.seq, p.kind, p.action, p.agent_id, coalesce(a.guild_id, s.source_guild_id) AS guild_id,"
    " p.target ->> 'label' AS label, p.target ->> 'path' AS path,"
    " coalesce((p.lines ->> 'added')::int, 0) + coalesce((p.lines ->> 'removed')::int, 0) AS lines,"
    " p.widens, p.proposed_at, p.status, p.resolved_by, p.resolved_at"
    f" FROM {t.projected_proposals.fullname} AS p"
    f" JOIN {t.sessions.fullname} AS s ON s.session_id = p.session_id"
    f" LEFT OUTER JOIN {t.agents.fullname} AS a ON a.agent_id = p.agent_id"
    " WHERE s.org_id = $1 ORDER BY p.proposed_at DESC, p.session_id, p.seq DESC LIMIT $2"
)
"""The organisation's last ``$2`` proposals, newest first, with what the rules read of each and what became of it."""


def document_hash(policy: Policy) -> str:
    """The hex SHA-256 of a policy's document as JSON with sorted keys and no whitespace."""
    encoded = json.dumps(policy.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()


@dataclass(frozen=True)
class PolicyVersion:
    """One version of an organisation's policy: its number (0: none was ever set, an empty policy), the document, its
    hash, who set it and when."""

    version: int
    policy: Policy
    hash: str
    set_by: str | None
    set_at: datetime | None


EMPTY = PolicyVersion(0, Policy(), document_hash(Policy()), None, None)


class VersionMoved(Exception):
    """The policy is not at the version the change was made against: another admin changed it meanwhile."""

    def __init__(self, current: int) -> None:
        super().__init__(current)
        self.current = current


@dataclass(frozen=True)
class Replayed:
    """A past proposal as the rules read it, and what became of it."""

    session_id: str
    seq: int
    proposed: Proposed
    status: str
    resolved_by: str | None
    resolved_at: datetime | None


def _version(row: asyncpg.Record) -> PolicyVersion:
    document = row["document"]
    if isinstance(document, str):
        document = json.loads(document)
    return PolicyVersion(row["version"], Policy.model_validate(document), row["hash"], row["set_by"], row["set_at"])


class PolicyStore:
    """Reads and writes the policies."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def current(self, org_id: str) -> PolicyVersion:
        """The policy in force (:data:`EMPTY` where none was ever set)."""
        async with self.engine.connect() as conn:
            row = await (await driver_connection(conn)).fetchrow(CURRENT, org_id)
        return EMPTY if row is None else _version(row)

    async def at_version(self, org_id: str, version: int) -> PolicyVersion | None:
        async with self.engine.connect() as conn:
            row = await (await driver_connection(conn)).fetchrow(AT_VERSION, org_id, version)
        return None if row is None else _version(row)

    async def versions(self, org_id: str, limit: int) -> list[PolicyVersion]:
        """The newest ``limit`` versions, newest first."""
        async with self.engine.connect() as conn:
            rows = await (await driver_connection(conn)).fetch(VERSIONS, org_id, limit)
        return [_version(row) for row in rows]

    async def set(self, org_id: str, policy: Policy, expected_version: int, actor: str) -> PolicyVersion:
        """Make ``policy`` the organisation's, as the version after ``expected_version``, recorded in the history in
        the same transaction; :class:`VersionMoved` when the policy in force is not at ``expected_version``."""
        now = datetime.now(UTC)
        digest = document_hash(policy)
        async with self.engine.connect() as sa_conn:
            conn = await driver_connection(sa_conn)
            async with conn.transaction():
                row = await conn.fetchrow(CURRENT + " FOR UPDATE", org_id)
                before = EMPTY if row is None else _version(row)
                if before.version != expected_version:
                    raise VersionMoved(before.version)
                version = expected_version + 1
                try:
                    await conn.execute(
                        INSERT_VERSION, org_id, version, json_param(policy.model_dump(mode="json")), digest, actor, now
                    )
                except asyncpg.UniqueViolationError:  # another admin's first version, at the same moment
                    raise VersionMoved(version) from None
                rules = len(policy.rules)
                await conn.execute(
                    RECORD_CHANGE,
                    now,
                    org_id,
                    "create" if before.version == 0 else "edit",
                    f"Policy, version {version}",
                    actor,
                    f"version {version}: {rules} rule{'' if rules == 1 else 's'}",
                    before.hash if before.version else None,
                    digest,
                )
        return PolicyVersion(version, policy, digest, actor, now)

    async def last_proposals(self, org_id: str, limit: int) -> list[Replayed]:
        """The organisation's last ``limit`` proposals, newest first, for a simulation."""
        async with self.engine.connect() as conn:
            rows = await (await driver_connection(conn)).fetch(LAST_PROPOSALS, org_id, limit)
        return [_replayed(row) for row in rows]


def _replayed(row: asyncpg.Record) -> Replayed:
    values: dict[str, Any] = dict(row)
    proposed = Proposed(
        kind=values["kind"],
        action=values["action"],
        agent_id=values["agent_id"],
        guild_id=values["guild_id"],
        label=values["label"] or "",
        path=values["path"],
        lines=values["lines"],
        widens=values["widens"],
        proposed_at=values["proposed_at"],
    )
    return Replayed(
        session_id=values["session_id"],
        seq=values["seq"],
        proposed=proposed,
        status=values["status"],
        resolved_by=values["resolved_by"],
        resolved_at=values["resolved_at"],
    )


class PolicyBook:
    """The policies a decision reads, each version parsed once: a version never changes, so what was read of it
    holds for as long as the process runs (the oldest read forgotten past ``size``)."""

    def __init__(self, store: PolicyStore, size: int = 256) -> None:
        self.store = store
        self.size = size
        self._read: dict[tuple[str, int], Policy] = {}

    async def at(self, org_id: str, version: int) -> Policy:
        """Version ``version`` of the organisation's policy (an empty policy when there is no such version)."""
        key = (org_id, version)
        policy = self._read.get(key)
        if policy is None:
            found = await self.store.at_version(org_id, version)
            policy = Policy() if found is None else found.policy
            if len(self._read) >= self.size:
                self._read.pop(next(iter(self._read)))
            self._read[key] = policy
        return policy
