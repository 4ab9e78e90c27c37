"""Costs stay flat as data grows: every statement the services send on an approval round is backed by an index.

The system runs with ``ASSENT_RECORD_SQL`` (each service writes down every distinct statement it sends) on a
database preloaded with many resolved proposals, decisions, turns and inbox rows. After a full round (propose,
refuse, end the step, read the card and the pending items, decline, apply, continue, read the decided cards), each
recorded statement is planned with ``EXPLAIN (GENERIC_PLAN)``, the plan it gets for any parameter values, and the test
fails on a sequential scan of a large table.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from assent.db import create_engine, driver_connection
from assent_devstack.preload import preload
from gateway.adapters import projection as gateway_projection
from gateway.adapters import tables as gateway_tables
from tests.conftest import Endpoints, create_database, new_world, running_stack
from tests.test_memory_edits import memory, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration

ROWS = 20_000
LARGE = 5_000
"""A table with at least this many rows must never be read by a sequential scan on the hot path."""

PLANNED = ("SELECT", "UPDATE", "DELETE", "INSERT", "WITH")
NOT_THE_HOT_PATH = ("alembic_version", "pg_catalog", "information_schema", "pg_advisory")


def seq_scans(plan: dict[str, Any]) -> list[str]:
    """The relations (``schema.table``) a plan (an ``EXPLAIN (VERBOSE, FORMAT JSON)`` node) reads by sequential
    scan."""
    found = [f"{plan['Schema']}.{plan['Relation Name']}"] if plan["Node Type"] == "Seq Scan" else []
    for child in plan.get("Plans", []):
        found += seq_scans(child)
    return found


def test_seq_scans_are_found_in_nested_plans() -> None:
    plan = {
        "Node Type": "Nested Loop",
        "Plans": [
            {"Node Type": "Index Scan", "Relation Name": "projected_proposals", "Schema": "gateway"},
            {"Node Type": "Hash", "Plans": [{"Node Type": "Seq Scan", "Relation Name": "turns", "Schema": "gateway"}]},
        ],
    }
    assert seq_scans(plan) == ["gateway.turns"]


async def test_every_statement_of_a_round_uses_an_index_on_large_tables(endpoints: Endpoints, tmp_path: Path) -> None:
    record = tmp_path / "sql"
    async with running_stack(endpoints, tmp_path, extra_env={"ASSENT_RECORD_SQL": str(record)}) as stack:
        await preload(stack.database_url, ROWS)
        async with stack.http() as http, stack.coach() as coach:
            world = await new_world(http)
            turn = await open_turn(coach, world)
            version = (await memory(http, world.agent_id))["version"]
            declined = await propose(turn, world.agent_id, "Declined.\n", version)
            applied = await propose(turn, world.agent_id, "Applied.\n", version)
            refused = await propose(turn, world.agent_id, "Refused.\n", version + 7)
            assert declined.ok and applied.ok and not refused.ok
            await turn.end_step()
            sid = turn.session.session_id
            await wait_pending(http, sid, 2)
            for result, decision in ((declined, "decline"), (applied, "apply")):
                url = f"/api/studio/sessions/{sid}/edits/{turn.calls[result.tool_call_id].seq}"
                assert (await http.get(url)).status_code == 200
                answer = await http.post(url, json={"decision": decision})
                assert answer.status_code == 200, answer.text
            await turn.continuation()
            for result in (declined, applied):  # decided: their history, from the projection alone
                url = f"/api/studio/sessions/{sid}/edits/{turn.calls[result.tool_call_id].seq}"
                assert (await http.get(url)).json()["resolution"]["told"] is not None
            assert (await http.post(f"/api/studio/sessions/{sid}/continue")).status_code == 200
            await turn.continuation()
            await wait_pending(http, sid, 0)

        statements = {
            line
            for path in sorted(tmp_path.glob("sql.*"))  # noqa: ASYNC240 (a few small files, once)
            for line in path.read_text().splitlines()
            if line.split(" ", 1)[0].upper() in PLANNED and not any(word in line for word in NOT_THE_HOT_PATH)
        }
        url = make_url(stack.database_url)
        conn = await asyncpg.connect(
            host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
        )
        try:
            sizes = {
                f"{row['schema']}.{row['name']}": row["rows"]
                for row in await conn.fetch(
                    "SELECT n.nspname AS schema, c.relname AS name, c.reltuples AS rows FROM pg_class c"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r'"
                )
            }
            assert sizes["gateway.projected_proposals"] >= ROWS and sizes["edits.inbox"] >= ROWS  # the preload took
            # EXPLAIN runs inside a function so that the statement's $n stay unbound: a generic plan, good for
            # any values (bound values, even nulls, would let the planner fold them into a custom plan).
            await conn.execute(
                "CREATE FUNCTION pg_temp.generic_plan(statement text) RETURNS text LANGUAGE plpgsql AS $f$"
                " DECLARE plan text; BEGIN"
                " EXECUTE 'EXPLAIN (GENERIC_PLAN, VERBOSE, FORMAT JSON) ' || statement INTO plan; RETURN plan;"
                " END $f$"
            )
            scans: dict[str, list[str]] = {}
            for statement in sorted(statements):
                plan = json.loads(await conn.fetchval("SELECT pg_temp.generic_plan($1)", statement))
                large = [name for name in seq_scans(plan[0]["Plan"]) if sizes.get(name, 0) >= LARGE]
                if large:
                    scans[statement] = large
        finally:
            await conn.close()
    # The round's own statements: the projection, the owner's proposals, both inboxes, the sessions.
    assert any("gateway.projected_proposals" in s for s in statements) and any(
        "edits.proposals" in s for s in statements
    )
    assert len(statements) >= 20, sorted(statements)
    assert scans == {}, "sequential scans of large tables:\n" + "\n".join(f"{v}: {k}" for k, v in scans.items())


async def test_settling_reads_each_awaited_call_by_index_even_while_the_tables_are_small(endpoints: Endpoints) -> None:
    """A plan is made once per connection and kept while the tables grow (until the next ANALYZE): one made when
    a service starts must not read every proposal to settle a turn (a join with the awaited calls did, whose
    count the planner guesses at a hundred)."""
    database_url = await create_database(endpoints.database_url, f"plans_{uuid.uuid4().hex[:8]}")
    engine = create_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE SCHEMA gateway"))
            await conn.run_sync(gateway_tables.metadata.create_all)
            await conn.execute(
                text(
                    "INSERT INTO gateway.projected_proposals (session_id, seq, proposal_id, tool_call_id, turn_id, step, tool,"
                    " kind, action, section, target, base, proposed_hash, lines, widens, reason, card, trace, status)"
                    " SELECT 's' || (i % 30), i, 'p' || i, 'c' || i, 't', 1, 'studio_edit_memory', 'memory', 'edit',"
                    " 'agents', '{}', '{}', 'h', '{}', false, 'r', '{}', '{}', 'applied' FROM generate_series(1, 300) i"
                )
            )
        async with engine.connect() as conn:
            pg = await driver_connection(conn)
            await pg.execute("ANALYZE")
            # A generic plan, as in the other test: the statement's $1 stays unbound inside a function.
            await pg.execute(
                "CREATE FUNCTION pg_temp.generic_plan(statement text) RETURNS text LANGUAGE plpgsql AS $f$"
                " DECLARE plan text; BEGIN"
                " EXECUTE 'EXPLAIN (GENERIC_PLAN, VERBOSE, FORMAT JSON) ' || statement INTO plan; RETURN plan;"
                " END $f$"
            )
            explained = await pg.fetchval("SELECT pg_temp.generic_plan($1)", gateway_projection.PAUSED)
    finally:
        await engine.dispose()
    plan = json.loads(explained)
    # Every proposal ever made stays in the table: each awaited call's is found by its index, not by reading them all.
    assert "gateway.projected_proposals" not in seq_scans(plan[0]["Plan"]), plan
