"""The history in PostgreSQL: the linker that chains the entries, and the reads (pages, export, verify).

Entries are written in the transaction of the change they record, to ``gateway.history_unlinked`` (migration 0007).
:class:`HistoryLinker` moves them, oldest first, into ``gateway.history``: each at its organisation's next position
with the hash of the one before (:func:`gateway.domain.audit.link`), the heads moved on, the unlinked rows deleted,
in one transaction. One linker runs at a time in a deployment (a transaction-scoped advisory lock: another gateway
replica's linker skips its turn), so the chain is never forked. The linker runs beside the rounds, never in them: a
round pays only for the INSERT of its entries.

An entry's time never goes back as its position grows: one whose change's own time is earlier than the entry before
it (a change learnt late: its session's copy had not arrived; or another machine's clock) takes that entry's time.
So a time range is a range of positions, and a page within one is read by position, from the range's last entry
down (:meth:`Query.where`), however much history lies outside it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from assent.contracts import WorkspaceWritten
from assent.db import driver_connection
from assent.faults import crash_point

from ..domain.audit import GENESIS, HASHED_FIELDS, Break, Entry, first_break, link, timestamp
from ..domain.checkpoints import Checkpoint, HistoryKeys
from . import tables as t
from .checkpoints import SELECT_CHECKPOINTS, checkpoint_of

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

HEADS = (
    f"SELECT h.org_id, h.position, h.hash, e.at FROM {t.history_heads.fullname} AS h"
    f" LEFT OUTER JOIN {t.history.fullname} AS e ON e.org_id = h.org_id AND e.position = h.position"
    " WHERE h.org_id = ANY($1::text[]) FOR UPDATE OF h"
)
"""Each organisation's head: its last position, its hash, and its time (an entry is never earlier)."""
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
                heads = {
                    row["org_id"]: (row["position"], row["hash"], row["at"]) for row in await conn.fetch(HEADS, orgs)
                }
                entries = []
                for row in ready:
                    org = row["org_id"]
                    position, prev, last_at = heads.get(org, (-1, GENESIS, None))
                    fields = {name: row[name] for name in ENTRY_FIELDS}
                    if last_at is not None and fields["at"] < last_at:
                        fields["at"] = last_at  # never earlier than the entry before: see the module's docstring
                    entry = link(org, position + 1, prev, fields)
                    heads[org] = (entry.position, entry.hash, entry.at)
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
        """The WHERE clause, its values appended to ``args``.

        A time range is read as the range of positions it covers: an organisation's entries never go back in time
        as their positions grow (the linker keeps them so), so the entries from ``since`` on are those from the
        first entry at or after it, and those before ``until`` are those up to the last entry before it. Each bound
        is one step down ``ix_history_at`` (organisation, time, position); the page is then read by position (the
        primary key, or the filter's index, which ends with the position) from its upper bound down, and stops at
        its size or at its lower bound. Compared by time instead, a page before ``until`` would walk down every
        entry after ``until`` first, and one within a window would collect the window's every entry and sort
        them."""
        args.append(self.org_id)
        org = f"${len(args)}"
        clauses = [f"org_id = {org}"]
        for name, value in self.filters:
            if name not in FILTERS:
                raise ValueError(f"history cannot be filtered on {name!r}")
            args.append(value)
            clauses.append(f"{name} = ${len(args)}")
        if self.since is not None:
            args.append(self.since)
            clauses.append(
                f"position >= (SELECT position FROM {t.history.fullname} WHERE org_id = {org} AND at >= ${len(args)}"
                " ORDER BY at, position LIMIT 1)"
            )
        if self.until is not None:
            args.append(self.until)
            clauses.append(
                f"position <= (SELECT position FROM {t.history.fullname} WHERE org_id = {org} AND at < ${len(args)}"
                " ORDER BY at DESC, position DESC LIMIT 1)"
            )
        return " AND ".join(clauses)


SELECT_ENTRIES = f"SELECT {', '.join(HASHED_FIELDS)}, hash FROM {t.history.fullname}"


CURSOR = r"^c[0-9a-f]{1,15}$"
"""What a cursor looks like: every string of this form names a position (a page below it)."""


def encode_cursor(position: int) -> str:
    """The opaque cursor of a page that goes on below ``position``."""
    return f"c{position:x}"


def decode_cursor(cursor: str) -> int:
    """The position a cursor names; ValueError for one of another form."""
    if re.fullmatch(CURSOR, cursor) is None:
        raise ValueError(f"{cursor!r} is not a cursor of this history")
    return int(cursor[1:], 16)


def page_statement(query: Query, limit: int, before: int | None = None) -> tuple[str, list[Any]]:
    """The statement that reads a page (:meth:`HistoryReader.page`), and its values: up to ``limit + 1`` entries,
    newest first, so that the page knows whether another follows."""
    args: list[Any] = []
    where = query.where(args)
    if before is not None:
        args.append(before)
        where += f" AND position < ${len(args)}"
    args.append(limit + 1)
    return f"{SELECT_ENTRIES} WHERE {where} ORDER BY position DESC LIMIT ${len(args)}", args


def export_statement(query: Query, after: int, chunk: int) -> tuple[str, list[Any]]:
    """The statement that reads a chunk of an export (:meth:`HistoryReader.export`), and its values: up to ``chunk``
    entries after position ``after``, oldest first."""
    args: list[Any] = []
    where = query.where(args)
    args += [after, chunk]
    return f"{SELECT_ENTRIES} WHERE {where} AND position > ${len(args) - 1} ORDER BY position LIMIT ${len(args)}", args


class HistoryReader:
    """Reads an organisation's history; ``keys`` check its checkpoints' signatures."""

    def __init__(self, engine: AsyncEngine, keys: HistoryKeys | None = None) -> None:
        self.engine = engine
        self.keys = keys or HistoryKeys()

    async def page(self, query: Query, limit: int, before: int | None = None) -> tuple[list[Entry], int | None]:
        """Up to ``limit`` entries, newest first, below position ``before`` (None: from the newest); and the
        position the next page goes on below (None: this was the last). New entries arrive above the first page's:
        a cursor is stable while they do."""
        sql, args = page_statement(query, limit, before)
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
            sql, args = export_statement(query, after, chunk)
            async with self.engine.connect() as sa_conn:
                rows = await (await driver_connection(sa_conn)).fetch(sql, *args)
            for row in rows:
                yield Entry.model_validate(dict(row))
            if len(rows) < chunk:
                return
            after = rows[-1]["position"]

    async def verify(self, org_id: str, first: int | None, last: int | None, chunk: int = 5000) -> Verified:
        """Check the chain of ``org_id`` from position ``first`` (None: its oldest kept entry) to ``last`` (None: its
        head): each entry matches its hash and names the one before it, and no position is missing; the chain's
        oldest kept entry goes on from the newest ``pruned`` checkpoint (an organisation's first entry, from
        :data:`GENESIS`); every ``head`` checkpoint in the range holds (its signature, under a key this gateway
        knows, and the hash of the entry at its position); and, for a range to the head, no head checkpoint names an
        entry past it. Read in one snapshot, so a prune or a link meanwhile does not show as a break."""
        async with self.engine.connect() as sa_conn:
            conn = await driver_connection(sa_conn)
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                return await self._verify(conn, org_id, first, last, chunk)

    async def _verify(self, conn: Any, org_id: str, first: int | None, last: int | None, chunk: int) -> Verified:
        head = await conn.fetchrow(f"SELECT position, hash FROM {t.history_heads.fullname} WHERE org_id = $1", org_id)
        unlinked = await conn.fetchrow(
            f"SELECT count(*) AS n, min(at) AS oldest FROM {t.history_unlinked.fullname} WHERE org_id = $1", org_id
        )
        pruned_row = await conn.fetchrow(
            f"{SELECT_CHECKPOINTS} WHERE org_id = $1 AND kind = 'pruned' ORDER BY position DESC, id DESC LIMIT 1",
            org_id,
        )
        pruned = None if pruned_row is None else checkpoint_of(pruned_row)
        kept_from = 0 if pruned is None else pruned.position + 1
        head_position = head["position"] if head is not None else -1
        end = head_position if last is None else min(head_position, last)
        checks: list[CheckedCheckpoint] = []  # the newest pruned one, the newest head one that held, one that did not
        failed: Break | None = None  # the first checkpoint that does not hold; the chain's own break comes first

        if pruned is not None:
            why = self.keys.check(pruned)
            if why is None and pruned.position > head_position:
                why = f"it names entry {pruned.position}, past the chain's head ({head_position})"
            if why is None and head is not None and pruned.position == head_position and head["hash"] != pruned.hash:
                why = f"the head of the chain, entry {head_position}, is not the entry it names"
            checks.append(CheckedCheckpoint(**pruned.model_dump(), ok=why is None, detail=why))
            if why is not None:
                failed = Break(
                    position=pruned.position,
                    reason="checkpoint",
                    detail=f"the pruned checkpoint of entry {pruned.position} does not hold: {why}",
                )

        if first is None or first <= kept_from:
            # From the chain's start: what the newest pruned checkpoint names, or the genesis.
            start, prev_hash = kept_from, GENESIS if pruned is None else pruned.hash
        else:
            start = first
            # The entry before the range: when it is missing, the range's first entry is taken as it is (the gap is
            # outside the range; a check from the start finds it).
            prev_hash = await conn.fetchval(
                f"SELECT hash FROM {t.history.fullname} WHERE org_id = $1 AND position = $2", org_id, start - 1
            )
        checked, broken, position, signed = 0, None, start, 0
        held: CheckedCheckpoint | None = None  # the newest head checkpoint that held
        wrong: CheckedCheckpoint | None = None  # the first that did not
        while position <= end and broken is None and wrong is None:
            rows = await conn.fetch(
                f"{SELECT_ENTRIES} WHERE org_id = $1 AND position >= $2 AND position <= $3 ORDER BY position LIMIT $4",
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
            # Every head checkpoint of the entries that fit: a chain rewritten from some entry on and hashed again
            # fits itself, but not what was signed before.
            fit = {entry.position: entry.hash for entry in entries[:n]}
            for row in await conn.fetch(
                f"{SELECT_CHECKPOINTS} WHERE org_id = $1 AND kind = 'head' AND position >= $2 AND position < $3"
                " ORDER BY position, id",
                org_id,
                position,
                position + n,
            ):
                checkpoint = checkpoint_of(row)
                signed += 1
                why = self.keys.check(checkpoint)
                if why is None and fit[checkpoint.position] != checkpoint.hash:
                    why = (
                        f"entry {checkpoint.position} is not the entry signed at {timestamp(checkpoint.at)}: the chain"
                        " was rewritten at or before it"
                    )
                if why is not None:
                    wrong = CheckedCheckpoint(**checkpoint.model_dump(), ok=False, detail=why)
                    n = checkpoint.position - position
                    break
                held = CheckedCheckpoint(**checkpoint.model_dump(), ok=True, detail=None)
            checked += n
            position += n
            if len(entries) < chunk and broken is None and wrong is None and position <= end:
                broken = Break(position=position, reason="gap", detail=f"entries {position} to {end} are missing")

        if last is None and broken is None and wrong is None:
            # A head checkpoint past the head: the chain lost its tail (and its head was moved back).
            row = await conn.fetchrow(
                f"{SELECT_CHECKPOINTS} WHERE org_id = $1 AND kind = 'head' AND position > $2"
                " ORDER BY position DESC, id DESC LIMIT 1",
                org_id,
                end,
            )
            if row is not None:
                checkpoint = checkpoint_of(row)
                signed += 1
                why = self.keys.check(checkpoint) or (
                    f"it names entry {checkpoint.position}, signed at {timestamp(checkpoint.at)}, but the chain ends"
                    f" at entry {end}: entries {end + 1} to {checkpoint.position} are gone"
                )
                wrong = CheckedCheckpoint(**checkpoint.model_dump(), ok=False, detail=why)
        checks += [c for c in (held, wrong) if c is not None]
        if wrong is not None and failed is None:
            failed = Break(
                position=min(wrong.position, end + 1),
                reason="checkpoint",
                detail=f"the checkpoint of entry {wrong.position} does not hold: {wrong.detail}",
            )
        broken = broken or failed
        return Verified(
            org_id=org_id,
            first=start,
            last=end,
            checked=checked,
            ok=broken is None,
            first_break=broken,
            head=None if head is None else head["hash"],
            kept_from=kept_from,
            checkpoints=checks,
            checkpoints_checked=signed + (pruned is not None),
            signing_key_id=self.keys.signing_key_id,
            unlinked=unlinked["n"],
            oldest_unlinked_at=unlinked["oldest"],
        )


class CheckedCheckpoint(Checkpoint):
    """A checkpoint ``verify`` checked: ``ok`` when it holds, else ``detail`` says why not."""

    ok: bool
    detail: str | None


@dataclass(frozen=True)
class Verified:
    """What ``verify`` found: the range checked, how many entries fit, the first that did not (None: all fit), the
    chain's head hash, where the kept chain starts (after the newest pruned checkpoint), the checkpoints checked,
    the key that signs now (None: none), and how many entries wait to be linked (the oldest since when)."""

    org_id: str
    first: int
    last: int
    checked: int
    ok: bool
    first_break: Break | None
    head: str | None
    kept_from: int
    checkpoints: list[CheckedCheckpoint]
    checkpoints_checked: int
    signing_key_id: str | None
    unlinked: int
    oldest_unlinked_at: datetime | None
