"""Applying a collection edit to a collection of many records, measured on a real PostgreSQL.

    uv run python bench/collection_apply.py [--records 100000] [--runs 3]

A fresh database gets the edits service's tables (its migrations), an organisation, a guild and a collection of
``--records`` records (columns ``order_id`` text, ``amount`` text, ``note`` text, ``code`` text; about one amount in
five does not convert to an integer). Each run then times, on a fresh copy of the records:

- **card**: the counts a proposal's card shows (``CollectionsRepository.counts``: one aggregate query, and one
  more for a column that becomes unique), as ``studio_edit_collection`` reads them when it proposes;
- **apply**: the writes an apply makes, in one transaction through to its commit: the definition
  (``CollectionsRepository.update``), the records (``transform``: ``note`` leaves, ``code`` becomes ``ref``,
  ``amount`` becomes an integer where it converts), the change log entry; then checks the records as the card said.

These are the very repository calls the collection kind's apply makes inside the decision's transaction (the
session lock, the proposal row and the outbox row around them are the approval round's, measured by
``approval_round.py``).

With ``--system``, the same change goes through the whole running system once: the services start on a database and
topics of their own, the collection is made through the workspace API and filled with the records in SQL, the coach
proposes the edit with ``studio_edit_collection`` (timed until its widget: the card's counts are read then), and the
operator applies it with ``POST …/edits/{seq}`` (timed until its 200, which waits for the owner's outcome).

The servers come from ``KAFKA_BOOTSTRAP_SERVERS``, ``DATABASE_URL`` and ``REDIS_URL`` (the devstack's by default:
``make up``); the databases are dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
from sqlalchemy import text
from sqlalchemy.engine import make_url

from assent.coach import CoachClient
from assent.db import create_engine, migrate
from assent.runtime.tables import MIGRATIONS as SHARED_MIGRATIONS
from assent.runtime.tables import VERSION_TABLE
from assent_devstack.system import build_system
from edits.adapters.collections import CollectionsRepository
from edits.domain.collections import Column, ColumnPlan, ColumnSpec, plan_columns, updated
from edits.domain.model import WriteOrigin

ROOT = Path(__file__).resolve().parents[1]
EDITS_MIGRATIONS = ROOT / "services" / "edits" / "migrations"
COLUMNS = (
    ColumnSpec(name="order_id", type="text", required=True, unique=True),
    ColumnSpec(name="amount", type="text"),
    ColumnSpec(name="note", type="text"),
    ColumnSpec(name="code", type="text"),
)
WANTED = [
    Column(name="order_id", type="text", required=True, unique=True),
    Column(name="amount", type="integer", required=True),
    Column(name="ref", type="text", rename_from="code", unique=True),
]


def server(name: str) -> str:
    if name in os.environ:
        return os.environ[name]
    env = ROOT / ".devstack" / "env"
    for line in env.read_text().splitlines() if env.exists() else []:
        if line.startswith(f"{name}="):
            return line.split("=", 1)[1].strip().strip('"')
    raise SystemExit(f"set {name}, or start the devstack (make up)")


def database_url() -> str:
    return server("DATABASE_URL")


FILL = (
    "INSERT INTO edits.collection_records (collection_id, data, updated_by) "
    "SELECT :cid, jsonb_strip_nulls(jsonb_build_object('order_id', 'A' || n, 'amount', "
    "CASE WHEN n % 5 = 0 THEN 'n/a' ELSE (n % 1000)::text END, 'note', "
    "CASE WHEN n % 3 = 0 THEN NULL ELSE 'note ' || n END, 'code', 'c' || (n % 50000))), 'bench' "
    "FROM generate_series(1, :records) AS n"
)
"""The records, set-wise: one amount in five is not a whole number; every third record has no note."""


async def admin(url: str, sql: str) -> None:
    u = make_url(url)
    conn = await asyncpg.connect(host=u.host, port=u.port, user=u.username, password=u.password, database=u.database)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def run(records: int, runs: int) -> None:
    base = database_url()
    name = f"bench_collections_{uuid.uuid4().hex[:8]}"
    await admin(base, f'CREATE DATABASE "{name}"')
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    engine = create_engine(url)
    try:
        await migrate(engine, SHARED_MIGRATIONS, "edits", version_table=VERSION_TABLE)
        await migrate(engine, EDITS_MIGRATIONS, "edits")
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO edits.orgs (org_id, name) VALUES ('acme', 'Acme')"))
            await conn.execute(
                text("INSERT INTO edits.guilds (guild_id, org_id, name) VALUES ('support', 'acme', 'S')")
            )
        plan = plan_columns(COLUMNS, WANTED, edit=True)
        assert isinstance(plan, ColumnPlan)
        cards, applies = [], []
        for i in range(runs):
            async with engine.begin() as conn:
                store = CollectionsRepository(conn)
                cid = await store.create(
                    "acme", f"refunds_{i}", "Track refunds", "guild", "support", COLUMNS, (), actor="bench"
                )
                assert cid is not None
                await conn.execute(text(FILL), {"cid": cid, "records": records})
            await asyncio.sleep(0)
            async with engine.connect() as conn:
                await conn.execute(text("ANALYZE edits.collection_records"))
                await conn.commit()
            started = time.perf_counter()
            async with engine.begin() as conn:
                counts = await CollectionsRepository(conn).counts(cid, plan)
            cards.append(time.perf_counter() - started)
            assert counts.total == records and counts.unconvertible[("amount", "integer")] == records // 5
            started = time.perf_counter()
            async with engine.begin() as conn:
                store = CollectionsRepository(conn)
                live = await store.get(cid, for_update=True)
                assert live is not None
                await store.update(cid, f"returns_{i}", "Track refunds", plan.after, actor="bench")
                changed = await store.transform(cid, plan, actor="bench")
                logged = updated(live, f"returns_{i}", "Track refunds", plan.after, plan, changed)
                await store.log(cid, "acme", "update", logged, origin=WriteOrigin("bench"))
            applies.append(time.perf_counter() - started)
            assert changed == records
            async with engine.connect() as conn:
                wrong = await conn.execute(
                    text(
                        "SELECT count(*) FROM edits.collection_records WHERE collection_id = :cid AND "
                        "(data ? 'note' OR data ? 'code' OR NOT data ? 'ref' OR "
                        "(jsonb_typeof(data -> 'amount') <> 'number' AND data ->> 'amount' <> 'n/a'))"
                    ),
                    {"cid": cid},
                )
                assert wrong.scalar_one() == 0, "the records are not as the card said"
            print(f"run {i + 1}: card {cards[-1] * 1000:.0f} ms, apply {applies[-1] * 1000:.0f} ms ({changed} records)")
        print(
            f"{records} records, {runs} runs: card counts median {statistics.median(cards) * 1000:.0f} ms; "
            f"apply (one transaction, to its commit) median {statistics.median(applies) * 1000:.0f} ms, "
            f"max {max(applies) * 1000:.0f} ms"
        )
    finally:
        await engine.dispose()
        await admin(base, f'DROP DATABASE IF EXISTS "{name}"')


async def through_the_system(records: int) -> None:
    """Propose and apply the edit once through the running services (see the module's docstring)."""
    base = database_url()
    kafka = server("KAFKA_BOOTSTRAP_SERVERS")
    name = f"bench_collections_{uuid.uuid4().hex[:8]}"
    await admin(base, f'CREATE DATABASE "{name}"')
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    token = uuid.uuid4().hex
    logs = Path(tempfile.mkdtemp(prefix="assent-bench-collections-"))
    system = build_system(
        kafka_bootstrap_servers=kafka,
        database_url=url,
        redis_url=server("REDIS_URL"),
        log_dir=logs,
        topic_prefix=f"{name}.",
        api_tokens=json.dumps({token: {"user": "olga", "org": "acme", "roles": ["admin"]}}),
        extra_env={"ASSENT_LOG_LEVEL": "WARNING"},
    )
    await asyncio.to_thread(system.start)
    engine = create_engine(url)
    try:
        async with (
            httpx.AsyncClient(
                base_url=system.gateway.url, headers={"Authorization": f"Bearer {token}"}, timeout=120
            ) as http,
            CoachClient(kafka, topic_prefix=f"{name}.") as coach,
        ):
            for path, body in (
                ("/api/workspace/orgs", {"org_id": "acme", "name": "Acme"}),
                ("/api/workspace/guilds", {"guild_id": "support", "org_id": "acme", "name": "Support"}),
            ):
                assert (await http.post(path, json=body)).status_code == 201
            made = await http.post(
                "/api/workspace/orgs/acme/collections",
                json={
                    "name": "refunds",
                    "purpose": "Track refunds",
                    "scope": "guild",
                    "guild_id": "support",
                    "columns": [c.model_dump() for c in COLUMNS],
                },
            )
            assert made.status_code == 201, made.text
            cid = made.json()["collection_id"]
            async with engine.begin() as conn:
                await conn.execute(text(FILL), {"cid": cid, "records": records})
            table = (await http.get(f"/api/workspace/orgs/acme/collections/{cid}", params={"limit": 1})).json()
            session = await coach.open_session(org_id="acme", source_guild_id="support", operator_user_id="olga")
            turn = session.begin_turn()
            started = time.perf_counter()
            result = await turn.call(
                "studio_edit_collection",
                {
                    "action": "edit",
                    "collection": cid,
                    "base_updated_at": table["updated_at"],
                    "columns": [c.model_dump(exclude_none=True) for c in WANTED],
                    "reason": "bench",
                },
            )
            proposed = time.perf_counter() - started
            assert result.ok, result.error
            seq = turn.calls[result.tool_call_id].seq
            await turn.end_step()
            while True:
                pending = await http.get(f"/api/studio/sessions/{session.session_id}/pending")
                if pending.status_code == 200 and pending.json()["waiting_on"] == 1:
                    break
                await asyncio.sleep(0.1)
            started = time.perf_counter()
            applied = await http.post(
                f"/api/studio/sessions/{session.session_id}/edits/{seq}", json={"decision": "apply"}
            )
            took = time.perf_counter() - started
            assert applied.status_code == 200, applied.text
            changed = applied.json()["effects"]["records_changed"]
            assert changed == records
            print(
                f"through the system, {records} records: propose → widget {proposed * 1000:.0f} ms (the card's "
                f"counts included); apply → 200 {took * 1000:.0f} ms ({changed} records changed)"
            )
    finally:
        await engine.dispose()
        await asyncio.to_thread(system.stop)
        await admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(logs, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--system", action="store_true", help="also once through the running services")
    args = parser.parse_args()
    asyncio.run(run(args.records, args.runs))
    if args.system:
        asyncio.run(through_the_system(args.records))


if __name__ == "__main__":
    main()
