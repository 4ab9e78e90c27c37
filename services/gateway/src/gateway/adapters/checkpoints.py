"""The history's signed checkpoints and its retention, in PostgreSQL: the job that signs each organisation's head,
the job that prunes entries older than the retention period, and the reads of the checkpoints.

Both jobs run in every gateway process, beside the rounds and never in them, one at a time across replicas (each
its own transaction-scoped advisory lock: another replica's job skips its turn), like the linker
(:class:`gateway.adapters.history.HistoryLinker`). Neither takes a lock the linker or a round waits on: the signer
only reads the heads and inserts checkpoints; the pruner deletes the oldest entries of a chain, which nothing else
writes, in short transactions of ``batch`` entries.

The pruner takes the role ``assent_history_retention`` (``SET LOCAL ROLE``, on the connection of
``ASSENT_HISTORY_RETENTION_DATABASE_URL`` where it is set): the trigger of migration 0008 refuses a DELETE of
history to every other role. Before it deletes a prefix of a chain it writes a signed ``pruned`` checkpoint of the
prefix's last entry, in the same transaction: the kept chain goes on from that hash, so a prefix removed by anyone
else is found (:meth:`gateway.adapters.history.HistoryReader.verify`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from assent.db import driver_connection

from ..domain.checkpoints import Checkpoint, CheckpointKind, HistoryKeys
from . import tables as t

log = logging.getLogger(__name__)

SIGNER_LOCK = 0x6173_7365_6E74_6832  # "assenth2": one checkpoint signer at a time, across replicas
PRUNER_LOCK = 0x6173_7365_6E74_6833  # "assenth3": one retention job at a time
RETENTION_ROLE = "assent_history_retention"
CHECKPOINT_COLUMNS = ("org_id", "position", "hash", "at", "key_id", "signature", "kind")
SELECT_CHECKPOINTS = f"SELECT id, {', '.join(CHECKPOINT_COLUMNS)} FROM {t.history_checkpoints.fullname}"
INSERT_CHECKPOINTS = (
    f"INSERT INTO {t.history_checkpoints.fullname} ({', '.join(CHECKPOINT_COLUMNS)}) SELECT * FROM unnest("
    "$1::text[], $2::bigint[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::text[])"
)
MOVED_HEADS = f"""
    SELECT h.org_id, h.position, e.hash
    FROM {t.history_heads.fullname} AS h
    JOIN {t.history.fullname} AS e ON e.org_id = h.org_id AND e.position = h.position
    WHERE NOT EXISTS (
        SELECT 1 FROM {t.history_checkpoints.fullname} AS c
        WHERE c.org_id = h.org_id AND c.kind = 'head' AND c.position >= h.position)
    ORDER BY h.org_id LIMIT $1"""
"""The heads that moved since their organisation's newest head checkpoint (a head whose entry was pruned is
proven by the pruned checkpoint)."""


OLD_ENOUGH = (
    f"SELECT h.org_id FROM {t.history_heads.fullname} AS h WHERE EXISTS ("
    f"SELECT 1 FROM {t.history.fullname} AS e WHERE e.org_id = h.org_id AND e.at < $1) ORDER BY h.org_id"
)
"""The organisations with an entry older than the cutoff (each found by the index on organisation and time)."""


def now() -> datetime:
    return datetime.now(UTC)


async def insert(conn: asyncpg.Connection, checkpoints: list[Checkpoint]) -> None:
    await conn.execute(INSERT_CHECKPOINTS, *([getattr(c, name) for c in checkpoints] for name in CHECKPOINT_COLUMNS))


class _Every:
    """A job that runs ``once`` every ``every`` seconds (and again at once while ``once`` answers ``batch``),
    logging a failure and trying again later."""

    name = "history-job"
    again = True
    """Run ``once`` again at once while it did a whole batch."""
    failed = "the history job failed; trying again later"

    def __init__(self, every: float, batch: int) -> None:
        self.every = every
        self.batch = batch
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                while await self.once() >= self.batch and self.again:
                    pass
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning(self.failed, exc_info=True)

    async def once(self) -> int:
        raise NotImplementedError


class CheckpointSigner(_Every):
    """Signs the head of each organisation's chain that moved since its newest checkpoint, every ``every`` seconds,
    up to ``batch`` organisations in one transaction."""

    name = "history-checkpoints"
    failed = "could not sign the history's checkpoints; trying again later"

    def __init__(self, engine: AsyncEngine, keys: HistoryKeys, every: float = 60.0, batch: int = 1000) -> None:
        super().__init__(every, batch)
        self.engine = engine
        self.keys = keys

    async def once(self) -> int:
        """Sign up to ``batch`` heads that moved; answers how many (0: none moved, or another replica signs)."""
        async with self.engine.connect() as sa_conn:
            conn = await driver_connection(sa_conn)
            async with conn.transaction():
                if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", SIGNER_LOCK):
                    return 0
                heads = await conn.fetch(MOVED_HEADS, self.batch)
                at = now()
                signed = [self.keys.sign(h["org_id"], h["position"], h["hash"], at, "head") for h in heads]
                if signed:
                    await insert(conn, signed)
        if signed:
            log.info("signed %d history checkpoints with key %s", len(signed), self.keys.signing_key_id)
        return len(signed)


class RetentionRoleMissing(Exception):
    """The pruner's connection may not take the retention role (or the role does not exist)."""


class HistoryPruner(_Every):
    """Deletes the entries older than ``older_than``, oldest first, ``batch`` at a time per transaction, each
    transaction leaving a signed ``pruned`` checkpoint of the last entry it removed. ``engine`` is the retention
    job's own (``ASSENT_HISTORY_RETENTION_DATABASE_URL``) or the gateway's."""

    name = "history-retention"
    again = False  # a pass goes on until nothing is older than the cutoff
    failed = "could not prune the history; trying again later"

    def __init__(
        self,
        engine: AsyncEngine,
        keys: HistoryKeys,
        older_than: timedelta,
        every: float = 3600.0,
        batch: int = 1000,
    ) -> None:
        super().__init__(every, batch)
        self.engine = engine
        self.keys = keys
        self.older_than = older_than

    async def once(self) -> int:
        """One pass over the organisations with an entry older than the cutoff, batch after batch until none is
        left: answers how many entries were deleted. Each batch is its own transaction, so a pass never holds what
        it deleted long. A pass stops where another replica's job holds the lock."""
        pruned = 0
        cutoff = now() - self.older_than
        async with self.engine.connect() as sa_conn:
            conn = await driver_connection(sa_conn)
            async with conn.transaction():
                await self._take_role(conn)
                orgs = [r["org_id"] for r in await conn.fetch(OLD_ENOUGH, cutoff)]
            for org in orgs:
                n: int | None = self.batch
                while n == self.batch:
                    n = await self._prune(conn, org, cutoff)
                    pruned += n or 0
                if n is None:
                    break  # another replica prunes
        if pruned:
            log.info("pruned %d history entries older than %s", pruned, self.older_than)
        return pruned

    async def _take_role(self, conn: asyncpg.Connection) -> None:
        """Take the retention role for the rest of the transaction."""
        try:
            await conn.execute(f"SET LOCAL ROLE {RETENTION_ROLE}")
        except (asyncpg.InsufficientPrivilegeError, asyncpg.UndefinedObjectError) as error:
            raise RetentionRoleMissing(
                f"the retention job may not take the role {RETENTION_ROLE} ({error.__class__.__name__}): set "
                "ASSENT_HISTORY_RETENTION_DATABASE_URL to a login that is a member of it"
            ) from None

    async def _prune(self, conn: asyncpg.Connection, org: str, cutoff: datetime) -> int | None:
        """Delete the oldest entries of ``org`` older than ``cutoff`` (a prefix of its chain, at most ``batch``),
        after a signed checkpoint of the last one. Answers how many (None: another replica holds the lock)."""
        async with conn.transaction():
            await self._take_role(conn)
            if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", PRUNER_LOCK):
                return None
            rows = await conn.fetch(
                f"SELECT position, hash, at FROM {t.history.fullname} WHERE org_id = $1 ORDER BY position LIMIT $2",
                org,
                self.batch,
            )
            prefix = 0
            for row in rows:  # a prefix: an entry newer than the cutoff keeps every entry after it
                if row["at"] >= cutoff:
                    break
                prefix += 1
            if prefix == 0:
                return 0
            last = rows[prefix - 1]
            await insert(conn, [self.keys.sign(org, last["position"], last["hash"], now(), "pruned")])
            await conn.execute(
                f"DELETE FROM {t.history.fullname} WHERE org_id = $1 AND position <= $2", org, last["position"]
            )
            # Head checkpoints of entries gone prove nothing any more; the pruned checkpoint proves them.
            await conn.execute(
                f"DELETE FROM {t.history_checkpoints.fullname} WHERE org_id = $1 AND kind = 'head' AND position <= $2",
                org,
                last["position"],
            )
            return prefix


# The reads. ------------------------------------------------------------------------------------------------------


CURSOR = r"^k[0-9a-f]{1,15}$"
"""What a cursor of a page of checkpoints looks like: every string of this form names a page (the checkpoints below
the one it names)."""


def encode_cursor(checkpoint_id: int) -> str:
    """The opaque cursor of a page of checkpoints that goes on below ``checkpoint_id``."""
    return f"k{checkpoint_id:x}"


def decode_cursor(cursor: str) -> int:
    """The id a cursor names; ValueError for one of another form."""
    if re.fullmatch(CURSOR, cursor) is None:
        raise ValueError(f"{cursor!r} is not a cursor of these checkpoints")
    return int(cursor[1:], 16)


def checkpoint_of(row: Any) -> Checkpoint:
    return Checkpoint.model_validate({name: row[name] for name in CHECKPOINT_COLUMNS})


async def page(
    engine: AsyncEngine, org_id: str, limit: int, before: int | None = None, kind: CheckpointKind | None = None
) -> tuple[list[Checkpoint], int | None]:
    """Up to ``limit`` of ``org_id``'s checkpoints, newest first, below id ``before``; and the id the next page goes
    on below (None: this was the last)."""
    args: list[Any] = [org_id]
    where = "org_id = $1"
    if kind is not None:
        args.append(kind)
        where += f" AND kind = ${len(args)}"
    if before is not None:
        args.append(before)
        where += f" AND id < ${len(args)}"
    args.append(limit + 1)
    async with engine.connect() as sa_conn:
        rows = await (await driver_connection(sa_conn)).fetch(
            f"{SELECT_CHECKPOINTS} WHERE {where} ORDER BY id DESC LIMIT ${len(args)}", *args
        )
    more = len(rows) > limit
    return [checkpoint_of(row) for row in rows[:limit]], rows[limit - 1]["id"] if more else None
