"""The history in PostgreSQL: the linker that chains the entries, and the reads (pages, export, verify).

Entries are written in the transaction of the change they record, to ``gateway.history_unlinked`` (migration 0007).
:class:`HistoryLinker` moves them, oldest first, into ``gateway.history``: each at its organisation's next position
with the hash of the one before (:func:`gateway.domain.audit.link`), the heads moved on, the unlinked rows deleted,
in one transaction. One linker runs at a time in a deployment (a transaction-scoped advisory lock: another gateway
replica's linker skips its turn), so the chain is never forked. The linker runs beside the rounds, never in them: a
round pays only for the INSERT of its entries.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from assent.contracts import WorkspaceWritten
from assent.db import driver_connection
from assent.faults import crash_point

from ..domain.audit import GENESIS, HASHED_FIELDS, Break, Entry, first_break, link
from . import tables as t

log = logging.getLogger(__name__)

LINKER_LOCK = 0x6173_7365_6E74_6831  # "assenth1": one linker at a time, across replicas
ENTRY_FIELDS = tuple(name for name in HASHED_FIELDS if name not in ("org_id", "position", "prev_hash"))
"""What an unlinked row carries of an entry (its place in the chain is the linker's)."""

UNLINKED = (
    "SELECT u.id, coalesce(u.org_id, s.org_id) AS org_id,"
    " coalesce(u.guild_id, a.guild_id, s.source_guild_id) AS guild_id, "
    + ", ".join(f"u.{name}" for name in ENTRY_FIELDS if name != "guild_id")
    + f" FROM {t.history_unlinked.fullname} AS u"
    f" LEFT OUTER JOIN {t.sessions.fullname} AS s ON s.session_id = u.session_id"
    f" LEFT OUTER JOIN {t.agents.fullname} AS a ON a.agent_id = u.agent_id"
    " ORDER BY u.id LIMIT $1"
)
"""The oldest unlinked entries, each with its organisation and guild (from its session and agent where the change
did not name them)."""

HEADS = f"SELECT org_id, position, hash FROM {t.history_heads.fullname} WHERE org_id = ANY($1::text[]) FOR UPDATE"
ENTRY_COLUMNS = ("org_id", "position", *ENTRY_FIELDS, "prev_hash", "hash")
_TYPES = {"position": "bigint", "at": "timestamptz", "seq": "integer"}
INSERT_ENTRIES = (
    f"INSERT INTO {t.history.fullname} ({', '.join(ENTRY_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"${i}::{_TYPES.get(name, 'text')}[]" for i, name in enumerate(ENTRY_COLUMNS, start=1))
    + ")"
)
MOVE_HEADS = (
    f"INSERT INTO {t.history_heads.fullname} (org_id, position, hash)"
    " SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])"
    " ON CONFLICT (org_id) DO UPDATE SET position = excluded.position, hash = excluded.hash"
)
FORGET_UNLINKED = f"DELETE FROM {t.history_unlinked.fullname} WHERE id = ANY($1::bigint[])"


class HistoryLinker:
    """Chains the unlinked entries every ``every`` seconds, ``batch`` at a time, until none is left."""

    def __init__(self, engine: AsyncEngine, every: float = 1.0, batch: int = 2000) -> None:
        self.engine = engine
        self.every = every
        self.batch = batch
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="history-linker")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            try:
                while await self.link_once() == self.batch:
                    pass
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("could not link the history's new entries; trying again", exc_info=True)
            await asyncio.sleep(self.every)

    async def link_once(self) -> int:
        """Link up to ``batch`` of the oldest unlinked entries; answers how many were read (0: none waits, or another
        linker holds the lock). An entry whose organisation is not known yet (its session's copy has not arrived)
        waits, and so do the later entries of its session."""
        async with self.engine.connect() as sa_conn:
            conn = await driver_connection(sa_conn)
            async with conn.transaction():
                if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", LINKER_LOCK):
                    return 0
                rows = await conn.fetch(UNLINKED, self.batch)
                waiting = {row["session_id"] for row in rows if row["org_id"] is None}
                ready = [row for row in rows if row["org_id"] is not None and row["session_id"] not in waiting]
                if not ready:
                    return 0
                orgs = sorted({row["org_id"] for row in ready})
                heads = {row["org_id"]: (row["position"], row["hash"]) for row in await conn.fetch(HEADS, orgs)}
                entries = []
                for row in ready:
                    org = row["org_id"]
                    position, prev = heads.get(org, (-1, GENESIS))
                    entry = link(org, position + 1, prev, {name: row[name] for name in ENTRY_FIELDS})
                    heads[org] = (entry.position, entry.hash)
                    entries.append(entry)
                await conn.execute(
                    INSERT_ENTRIES, *([getattr(entry, name) for entry in entries] for name in ENTRY_COLUMNS)
                )
                await conn.execute(MOVE_HEADS, orgs, [heads[org][0] for org in orgs], [heads[org][1] for org in orgs])
                await conn.execute(FORGET_UNLINKED, [row["id"] for row in ready])
                crash_point("gateway.history.before_commit")
            crash_point("gateway.history.after_commit")
            return len(rows)


# Direct writes. --------------------------------------------------------------------------------------------------

WRITTEN_COLUMNS = (
    ("at", "timestamptz"),
    ("org_id", "text"),
    ("guild_id", "text"),
    ("agent_id", "text"),
    ("kind", "text"),
    ("action", "text"),
    ("target", "text"),
    ("actor", "text"),
    ("via", "text"),
    ("detail", "text"),
    ("hash_before", "text"),
    ("hash_after", "text"),
)
"""What a direct write's entry takes from its :class:`~assent.contracts.WorkspaceWritten`, and the type of each."""
FILE_WRITTEN = (
    f"INSERT INTO {t.history_unlinked.fullname} (type, {', '.join(name for name, _ in WRITTEN_COLUMNS)})"
    f" SELECT 'written', {', '.join(f'r.{name}' for name, _ in WRITTEN_COLUMNS)}"
    f" FROM unnest({', '.join(f'${i}::{kind}[]' for i, (_, kind) in enumerate(WRITTEN_COLUMNS, start=1))})"
    f" WITH ORDINALITY AS r({', '.join(name for name, _ in WRITTEN_COLUMNS)}, n) ORDER BY r.n"
)
"""The entries of a batch of direct writes, in the batch's order, as unlinked entries (no session, seq or proposal):
one statement for the batch."""


class WrittenEntries:
    """Files direct writes as unlinked entries of their organisations' history, in the consumer's transaction (the
    linker chains them as it chains the rest)."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def file(self, written: Sequence[WorkspaceWritten]) -> None:
        if not written:
            return
        columns = [[getattr(message, name) for message in written] for name, _ in WRITTEN_COLUMNS]
        await (await driver_connection(self.conn)).execute(FILE_WRITTEN, *columns)


# The reads. ------------------------------------------------------------------------------------------------------

FILTERS = ("agent_id", "guild_id", "kind", "actor", "outcome", "session_id", "type")
"""The columns a page of history can be filtered on (each equal to one value), besides a time range."""


@dataclass(frozen=True)
class Query:
    """Which entries of an organisation: those equal to each filter given, at or after ``since`` and before
    ``until``, before the cursor's position (newest first) or, for an export, from ``after`` on (oldest first)."""

    org_id: str
    filters: tuple[tuple[str, str], ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    def where(self, args: list[Any]) -> str:
        """The WHERE clause, its values appended to ``args``."""
        args.append(self.org_id)
        clauses = [f"org_id = ${len(args)}"]
        for name, value in self.filters:
            if name not in FILTERS:
                raise ValueError(f"history cannot be filtered on {name!r}")
            args.append(value)
            clauses.append(f"{name} = ${len(args)}")
        if self.since is not None:
            args.append(self.since)
            clauses.append(f"at >= ${len(args)}")
        if self.until is not None:
            args.append(self.until)
            clauses.append(f"at < ${len(args)}")
        return " AND ".join(clauses)


SELECT_ENTRIES = f"SELECT {', '.join(HASHED_FIELDS)}, hash FROM {t.history.fullname}"


def encode_cursor(position: int) -> str:
    """The opaque cursor of a page that goes on below ``position``."""
    return base64.urlsafe_b64encode(f"h1:{position}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The position a cursor names; ValueError for a cursor this gateway did not make."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        tag, _, position = text.partition(":")
        if tag != "h1" or not position.isdigit():
            raise ValueError
        return int(position)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValueError(f"{cursor!r} is not a cursor of this history") from None


class HistoryReader:
    """Reads an organisation's history."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def page(self, query: Query, limit: int, before: int | None = None) -> tuple[list[Entry], int | None]:
        """Up to ``limit`` entries, newest first, below position ``before`` (None: from the newest); and the
        position the next page goes on below (None: this was the last). New entries arrive above the first page's:
        a cursor is stable while they do."""
        args: list[Any] = []
        where = query.where(args)
        if before is not None:
            args.append(before)
            where += f" AND position < ${len(args)}"
        args.append(limit + 1)
        sql = f"{SELECT_ENTRIES} WHERE {where} ORDER BY position DESC LIMIT ${len(args)}"
        async with self.engine.connect() as sa_conn:
            rows = await (await driver_connection(sa_conn)).fetch(sql, *args)
        entries = [Entry.model_validate(dict(row)) for row in rows[:limit]]
        more = len(rows) > limit
        return entries, entries[-1].position if more and entries else None

    async def export(self, query: Query, chunk: int = 1000) -> AsyncIterator[Entry]:
        """Every entry the query selects, oldest first, read ``chunk`` at a time (each chunk its own statement, so
        an export holds no transaction open)."""
        after = -1
        while True:
            args: list[Any] = []
            where = query.where(args)
            args.append(after)
            args.append(chunk)
            sql = f"{SELECT_ENTRIES} WHERE {where} AND position > ${len(args) - 1} ORDER BY position LIMIT ${len(args)}"
            async with self.engine.connect() as sa_conn:
                rows = await (await driver_connection(sa_conn)).fetch(sql, *args)
            for row in rows:
                yield Entry.model_validate(dict(row))
            if len(rows) < chunk:
                return
            after = rows[-1]["position"]

    async def verify(self, org_id: str, first: int | None, last: int | None, chunk: int = 5000) -> Verified:
        """Check the chain of ``org_id`` from position ``first`` (None: its oldest kept entry) to ``last`` (None: its
        head): each entry matches its hash and names the one before it, and no position is missing."""
        async with self.engine.connect() as sa_conn:
            conn = await driver_connection(sa_conn)
            head = await conn.fetchrow(
                f"SELECT position, hash FROM {t.history_heads.fullname} WHERE org_id = $1", org_id
            )
            oldest = await conn.fetchval(f"SELECT min(position) FROM {t.history.fullname} WHERE org_id = $1", org_id)
            unlinked = await conn.fetchrow(
                f"SELECT count(*) AS n, min(at) AS oldest FROM {t.history_unlinked.fullname} WHERE org_id = $1",
                org_id,
            )
            start = max(first if first is not None else 0, oldest if oldest is not None else 0)
            end = head["position"] if head is not None else -1
            if last is not None:
                end = min(end, last)
            prev_hash = GENESIS
            if start > 0:
                before = await conn.fetchval(
                    f"SELECT hash FROM {t.history.fullname} WHERE org_id = $1 AND position = $2", org_id, start - 1
                )
                # The entry before the range is gone (pruned, or removed): the range's first entry is trusted as
                # the chain's start (a checkpoint proves what came before it); its link is not checked.
                prev_hash = before
            checked, broken, position = 0, None, start
            while position <= end and broken is None:
                rows = await conn.fetch(
                    f"{SELECT_ENTRIES} WHERE org_id = $1 AND position >= $2 AND position <= $3 ORDER BY position"
                    " LIMIT $4",
                    org_id,
                    position,
                    end,
                    chunk,
                )
                entries = [Entry.model_validate(dict(row)) for row in rows]
                if prev_hash is None and entries:
                    prev_hash = entries[0].prev_hash
                if not entries:
                    broken = Break(position=position, reason="gap", detail=f"entries {position} to {end} are missing")
                    break
                broken, n, prev_hash = first_break(entries, prev_hash or GENESIS, position)
                checked += n
                position += n
                if len(entries) < chunk and broken is None and position <= end:
                    broken = Break(position=position, reason="gap", detail=f"entries {position} to {end} are missing")
        return Verified(
            org_id=org_id,
            first=start,
            last=end,
            checked=checked,
            ok=broken is None,
            first_break=broken,
            head=None if head is None else head["hash"],
            unlinked=unlinked["n"],
            oldest_unlinked_at=unlinked["oldest"],
        )


@dataclass(frozen=True)
class Verified:
    """What ``verify`` found: the range checked, how many entries fit, the first that did not (None: all fit), the
    chain's head hash, and how many entries wait to be linked (the oldest since when)."""

    org_id: str
    first: int
    last: int
    checked: int
    ok: bool
    first_break: Break | None
    head: str | None
    unlinked: int
    oldest_unlinked_at: datetime | None
