"""A page of history costs the same however long the history: every shape of page is read by index, in the page's
order, and stops at its size.

On a database with the gateway's migrations and an organisation of many entries (beside other organisations'),
each shape of page the API reads (no filter, each filter, a time range from ``since``, one until ``until``, a window
between both, a cursor, filters with a range) and a chunk of an export is planned with ``EXPLAIN (GENERIC_PLAN)``,
the plan it gets for any values, as ``tests/test_query_plans.py`` plans a round's statements: it must read the
history by the intended index (the filter's, else the primary key) in the page's order, with no sequential scan, no
bitmap scan and no sort of the organisation's entries. Run with real values, a page must touch a few dozen buffers,
not the history's thousands, and show what a plain comparison of the times would. A time range is read as a range
of positions, which holds because the linker never lets an entry's time go back: checked here too.
(``make bench-history`` measures the same shapes at ten million entries.)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from assent.db import create_engine, driver_connection, migrate
from assent.runtime.tables import MIGRATIONS as SHARED_MIGRATIONS
from assent.runtime.tables import VERSION_TABLE
from gateway.adapters.history import HistoryLinker, HistoryReader, Query, export_statement, page_statement
from gateway.entrypoint import MIGRATIONS as GATEWAY_MIGRATIONS
from tests.conftest import Endpoints, create_database

pytestmark = pytest.mark.integration

ORG = "acme"
ENTRIES = 60_000
"""The organisation's entries, one a minute: enough that a plan's choice shows (a scan of them touches thousands of
buffers, a page a few dozen)."""
OTHERS = 20_000
"""Entries of 20 other organisations, interleaved."""
START = datetime(2026, 6, 1, tzinfo=UTC)
LIMIT = 50
PAGE_BUFFERS = 200
"""The most shared buffers a page of 50 may touch: its entries' pages and a few index pages (the history itself
spans thousands)."""

LOAD = """
    INSERT INTO gateway.history (org_id, position, at, type, guild_id, session_id, seq, proposal_id, kind, action,
        agent_id, target, actor, via, decision, outcome, detail, hash_before, hash_after, prev_hash, hash)
    SELECT $3, i, $2::timestamptz + i * interval '1 minute',
        (ARRAY['proposed', 'decided', 'outcome', 'continued', 'written'])[1 + i % 5], 'guild-' || (i % 20),
        'ses-' || (i / 15), i % 15, 'p-' || i, (ARRAY['memory', 'note', 'draft', 'collection', 'guild', 'routine',
        'access', 'source', 'deploy', 'connection_access'])[1 + (i / 3) % 10], 'edit', 'agent-' || (i % 500),
        'Memory of agent-' || (i % 500), 'person-' || (i % 100) || '@example.com', 'card', 'apply',
        CASE WHEN i % 5 = 2 THEN (ARRAY['applied', 'declined', 'stale', 'refused', 'superseded',
        'expired'])[1 + (i / 5) % 6] END, 'a reason', md5(i::text), md5(i::text), md5((i - 1)::text), md5(i::text)
    FROM generate_series(0, $1 - 1) AS i
"""
"""The organisation's entries, one a minute, the filters' values cycling (agents, people, sessions of 15, ...)."""

GENERIC_PLAN = (
    "CREATE OR REPLACE FUNCTION pg_temp.generic_plan(statement text) RETURNS text LANGUAGE plpgsql AS $f$"
    " DECLARE plan text; BEGIN"
    " EXECUTE 'EXPLAIN (GENERIC_PLAN, FORMAT JSON) ' || statement INTO plan; RETURN plan;"
    " END $f$"
)
"""EXPLAIN inside a function keeps the statement's $n unbound: the generic plan, good for any values."""


@pytest.fixture(scope="module")
async def engine(endpoints: Endpoints) -> AsyncIterator[AsyncEngine]:
    """A database with the gateway's tables and :data:`ENTRIES` entries of :data:`ORG`, :data:`OTHERS` of others
    (their hashes are not a chain: no page reads them), analysed."""
    url = await create_database(endpoints.database_url, f"history_plans_{uuid.uuid4().hex[:8]}")
    engine = create_engine(url, pool_size=2)
    try:
        await migrate(engine, SHARED_MIGRATIONS, "gateway", version_table=VERSION_TABLE)
        await migrate(engine, GATEWAY_MIGRATIONS, "gateway")
        async with engine.connect() as sa_conn:
            conn = await driver_connection(sa_conn)
            await conn.execute(
                "INSERT INTO gateway.history (org_id, position, at, type, actor, prev_hash, hash)"
                " SELECT 'other-' || (i % 20), i / 20, $1::timestamptz + i * interval '3 minutes', 'written',"
                " 'someone', md5((i - 1)::text), md5(i::text) FROM generate_series(0, $2 - 1) AS i",
                START,
                OTHERS,
            )
            await conn.execute(LOAD, ENTRIES, START, ORG)
            await conn.execute("ANALYZE gateway.history")
        yield engine
    finally:
        await engine.dispose()


def minute(i: float) -> datetime:
    return START + timedelta(minutes=i)


SHAPES: dict[str, tuple[Query, int | None, str]] = {
    # label: the query, the cursor, the index the page is read by (backwards)
    "no filter": (Query(ORG), None, "history_pkey"),
    **{
        f"{column} alone": (Query(ORG, ((column, value),)), None, f"ix_history_{column}")
        for column, value in (
            ("agent_id", "agent-7"),
            ("guild_id", "guild-3"),
            ("kind", "note"),
            ("actor", "person-42@example.com"),
            ("outcome", "stale"),
            ("session_id", "ses-1000"),
            ("type", "decided"),
        )
    },
    "since": (Query(ORG, since=minute(ENTRIES * 0.9)), None, "history_pkey"),
    "until (the middle)": (Query(ORG, until=minute(ENTRIES * 0.5)), None, "history_pkey"),
    "since + until (early)": (
        Query(ORG, since=minute(ENTRIES * 0.1), until=minute(ENTRIES * 0.1 + 600)),
        None,
        "history_pkey",
    ),
    "cursor (deep)": (Query(ORG), ENTRIES // 20, "history_pkey"),
    "agent + since + until": (
        Query(ORG, (("agent_id", "agent-7"),), since=minute(ENTRIES * 0.1), until=minute(ENTRIES * 0.3)),
        None,
        "ix_history_agent_id",
    ),
    "outcome + until + cursor": (
        Query(ORG, (("outcome", "applied"),), until=minute(ENTRIES * 0.5)),
        ENTRIES // 3,
        "ix_history_outcome",
    ),
}


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(node for child in plan.get("Plans", []) for node in nodes(child))]


def faults(plan: dict[str, Any]) -> list[str]:
    """What a page's plan must not do: a sequential or bitmap scan of the history (every entry the filters select,
    then sorted), or a sort."""
    found = []
    for node in nodes(plan):
        if node["Node Type"] in ("Seq Scan", "Bitmap Heap Scan") and node.get("Relation Name") == "history":
            found.append(node["Node Type"])
        if "Sort" in node["Node Type"]:
            found.append(node["Node Type"])
    return found


def page_scan(plan: dict[str, Any]) -> dict[str, Any]:
    """The scan the page's entries come from: the Limit's outer child (the time range's bounds are init plans)."""
    assert plan["Node Type"] == "Limit", plan
    (scan,) = [child for child in plan["Plans"] if child.get("Parent Relationship") == "Outer"]
    return scan


def test_faults_are_found_in_nested_plans() -> None:
    plan = {
        "Node Type": "Limit",
        "Plans": [
            {
                "Node Type": "Sort",
                "Parent Relationship": "Outer",
                "Plans": [{"Node Type": "Bitmap Heap Scan", "Relation Name": "history"}],
            }
        ],
    }
    assert faults(plan) == ["Sort", "Bitmap Heap Scan"]
    assert page_scan(plan)["Node Type"] == "Sort"


@pytest.mark.parametrize("label", SHAPES)
async def test_each_page_reads_its_index_in_order_and_stops_at_its_size(engine: AsyncEngine, label: str) -> None:
    query, before, index = SHAPES[label]
    sql, args = page_statement(query, LIMIT, before)
    async with engine.connect() as sa_conn:
        conn = await driver_connection(sa_conn)
        await conn.execute(GENERIC_PLAN)
        generic = json.loads(await conn.fetchval("SELECT pg_temp.generic_plan($1)", sql))[0]["Plan"]
        run = (await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args))[0]["Plan"]
        # What a plain comparison of the times selects: the page shows the same entries.
        naive_args: list[Any] = [ORG, *(value for _, value in query.filters)]
        naive = " AND ".join(["org_id = $1", *(f"{name} = ${i}" for i, (name, _) in enumerate(query.filters, 2))])
        for bound, op in ((query.since, ">="), (query.until, "<")):
            if bound is not None:
                naive_args.append(bound)
                naive += f" AND at {op} ${len(naive_args)}"
        if before is not None:
            naive_args.append(before)
            naive += f" AND position < ${len(naive_args)}"
        expected = [
            row[0]
            for row in await conn.fetch(
                f"SELECT position FROM gateway.history WHERE {naive} ORDER BY position DESC LIMIT {LIMIT + 1}",
                *naive_args,
            )
        ]
    assert faults(generic) == [], json.dumps(generic, indent=1)
    scan = page_scan(generic)
    assert (scan["Node Type"], scan.get("Index Name"), scan.get("Scan Direction")) == (
        "Index Scan",
        index,
        "Backward",
    ), json.dumps(generic, indent=1)
    # The time range's bounds: one step each down ix_history_at.
    bounds = [node for node in nodes(generic) if node.get("Index Name") == "ix_history_at"]
    assert len(bounds) == (query.since is not None) + (query.until is not None), json.dumps(generic, indent=1)
    touched = run.get("Shared Hit Blocks", 0) + run.get("Shared Read Blocks", 0)
    assert touched <= PAGE_BUFFERS, (touched, json.dumps(run, indent=1))
    entries, _ = await HistoryReader(engine).page(query, LIMIT, before)
    assert expected and [e.position for e in entries] == expected[:LIMIT]


async def test_a_chunk_of_an_export_reads_the_range_in_order(engine: AsyncEngine) -> None:
    """The last chunk of an export until the middle stops at the range's end instead of reading every later entry."""
    query = Query(ORG, (("kind", "note"),), until=minute(ENTRIES // 2))
    after = ENTRIES // 2 - 100
    sql, args = export_statement(query, after, 1000)
    notes = sum(1 for i in range(after + 1, ENTRIES // 2) if (i // 3) % 10 == 1)  # as LOAD cycles the kinds
    async with engine.connect() as sa_conn:
        conn = await driver_connection(sa_conn)
        await conn.execute(GENERIC_PLAN)
        generic = json.loads(await conn.fetchval("SELECT pg_temp.generic_plan($1)", sql))[0]["Plan"]
        run = (await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args))[0]["Plan"]
    assert faults(generic) == [], json.dumps(generic, indent=1)
    scan = page_scan(generic)
    assert (scan.get("Index Name"), scan.get("Scan Direction")) == ("ix_history_kind", "Forward")
    assert run["Actual Rows"] == notes > 0
    assert run.get("Shared Hit Blocks", 0) + run.get("Shared Read Blocks", 0) <= PAGE_BUFFERS


async def test_the_linker_never_lets_an_entry_s_time_go_back(engine: AsyncEngine) -> None:
    """An entry whose change's time is earlier than the entry before it (learnt late, or another clock) takes that
    entry's time: the times never go back as the positions grow, so a time range is a range of positions. The
    chain holds over the time as linked."""
    org = f"linked_{uuid.uuid4().hex[:6]}"
    at = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
    async with engine.connect() as sa_conn:
        conn = await driver_connection(sa_conn)
        for seconds in (0, 5, 3, 9):  # the third arrives late: its change happened before the second's
            await conn.execute(
                "INSERT INTO gateway.history_unlinked (at, org_id, type, actor) VALUES ($1, $2, 'written', 'olga')",
                at + timedelta(seconds=seconds),
                org,
            )
            assert await HistoryLinker(engine).link_once() == 1  # one by one: the head's time is the one before
        times = [
            row[0]
            for row in await conn.fetch("SELECT at FROM gateway.history WHERE org_id = $1 ORDER BY position", org)
        ]
    assert times == [at + timedelta(seconds=s) for s in (0, 5, 5, 9)]
    reader = HistoryReader(engine)
    assert (await reader.verify(org, None, None)).ok
    entries, _ = await reader.page(Query(org, until=at + timedelta(seconds=5)), LIMIT)
    assert [e.position for e in entries] == [0]
    entries, _ = await reader.page(Query(org, since=at + timedelta(seconds=4), until=at + timedelta(seconds=6)), LIMIT)
    assert [e.position for e in entries] == [2, 1]
