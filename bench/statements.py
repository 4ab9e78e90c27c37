"""PostgreSQL's statements and transactions per approval round, read from ``pg_stat_statements``.

Needs servers given by ``KAFKA_BOOTSTRAP_SERVERS``, ``DATABASE_URL`` and ``REDIS_URL`` whose PostgreSQL loads
``pg_stat_statements`` (``shared_preload_libraries = 'pg_stat_statements'`` and ``pg_stat_statements.track = all``
in its ``postgresql.conf``: nested statements, those of triggers and functions, are counted too; how with the
devstack: docs/explanation/performance.md). Starts a system of its own (a database and topics, removed after), warms
it, then runs ``--rounds`` approval rounds one after another (each followed by one ``GET …/pending``, as the
benchmark's latency figures are), or with ``--concurrency N`` N sessions at once for ``--seconds``; then leaves it
as long with nothing to do. Prints each statement's executions per round (with those at rest subtracted), the
transactions committed per round, and with ``--postmaster`` (PostgreSQL's pid) the CPU per round of its processes,
each backend by the service whose connection it serves.

PostgreSQL 18 counts statements that differ only in their tables' schema as one (every service's inbox claim, every
relay's delete): such a line is all services' together, shown with the text of the first one it saw.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import uvloop
from approval_round import Bench, BenchSession, Servers, Systems, cpu_seconds, with_children
from sqlalchemy.engine import make_url

QUERY = """
SELECT s.query, s.calls, s.rows, s.total_exec_time, s.toplevel, s.plans, s.total_plan_time
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1
"""


Stats = tuple[dict[tuple[str, bool], tuple[int, int, float, int, float]], int]
"""Per statement text and level (top-level or nested): executions, rows, milliseconds executing, plans made and
milliseconds planning (these two counted only with ``pg_stat_statements.track_planning = on``); and transactions
committed."""


async def snapshot(conn: asyncpg.Connection, db: str) -> Stats:
    """What ``pg_stat_statements`` and ``pg_stat_database`` have counted in database ``db`` so far."""
    rows = await conn.fetch(QUERY, db)
    stats: dict[tuple[str, bool], tuple[int, int, float, int, float]] = {}
    for r in rows:
        key = (" ".join(r["query"].split()), r["toplevel"])
        c, n, t, p, pt = stats.get(key, (0, 0, 0.0, 0, 0.0))
        stats[key] = (
            c + r["calls"],
            n + r["rows"],
            t + r["total_exec_time"],
            p + r["plans"],
            pt + r["total_plan_time"],
        )
    commits = await conn.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", db)
    return stats, commits


def diff(after: Stats, before: Stats) -> Stats:
    """What was counted between two snapshots; statements that did not run are left out."""
    out = {}
    for key, now in after[0].items():
        then = before[0].get(key, (0, 0, 0.0, 0, 0.0))
        if now[0] - then[0]:
            out[key] = tuple(a - b for a, b in zip(now, then, strict=True))  # type: ignore[assignment]
    return out, after[1] - before[1]


def port_owners() -> dict[int, int]:
    """Local TCP port → the pid of the process whose socket it is (``ss``)."""
    out = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True, check=False).stdout
    owners = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 6 or "pid=" not in fields[-1]:
            continue
        port = int(fields[3].rpartition(":")[2])
        owners[port] = int(fields[-1].split("pid=")[1].split(",")[0])
    return owners


async def processes(conn: asyncpg.Connection, db: str, services: dict[str, list[int]]) -> dict[int, str]:
    """PostgreSQL's processes: each client backend of ``db`` by the service whose connection it serves, the rest by
    their type."""
    rows = await conn.fetch("SELECT pid, backend_type, datname, client_port FROM pg_stat_activity")
    owners = port_owners()
    service_of = {pid: name for name, pids in services.items() for pid in pids}
    names = {}
    for r in rows:
        if r["backend_type"] == "client backend":
            if r["datname"] != db:
                continue
            names[r["pid"]] = "backend of " + service_of.get(owners.get(r["client_port"] or 0, 0), "?")
        else:
            names[r["pid"]] = r["backend_type"]
    return names


def cpu_of(postmaster: int) -> dict[int, float]:
    """The CPU seconds of PostgreSQL's live processes, by pid."""
    return {pid: cpu_seconds(pid) for pid in with_children(postmaster)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--width", type=int, default=160, help="characters of each statement's text shown")
    parser.add_argument(
        "--concurrency", type=int, default=0, help="instead, sessions at once for --seconds (the throughput run)"
    )
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--postmaster", type=int, default=0, help="PostgreSQL's pid: its processes' CPU per round")
    args = parser.parse_args()
    if not all(os.environ.get(k) for k in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL", "REDIS_URL")):
        sys.exit(
            "give the servers (KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL, REDIS_URL),"
            " their PostgreSQL loading pg_stat_statements"
        )
    servers = Servers.start([])
    systems = Systems(servers)
    log_dir = Path(tempfile.mkdtemp(prefix="assent-statements-"))
    system, prefix, bench_db = await systems.new(log_dir)
    bench = Bench(system, servers.kafka, prefix, bench_db)
    url = make_url(bench_db)
    conn = await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
    )
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        await asyncio.sleep(2)
        await bench.throughput(8, 3.0)
        if args.concurrency:
            async with bench.clients() as (gateways, coach):
                sessions = [BenchSession(gateways[0], bench.headers, coach) for _ in range(args.concurrency)]
                await asyncio.gather(*(s.open() for s in sessions))
                await asyncio.gather(*(s.run(rounds=1) for s in sessions))
                first = await snapshot(conn, url.database)
                cpu_first = cpu_of(args.postmaster) if args.postmaster else {}
                before = sum(s.rounds for s in sessions)
                started = time.perf_counter()
                await asyncio.gather(*(s.run(until=started + args.seconds) for s in sessions))
                took = time.perf_counter() - started
                second = await snapshot(conn, url.database)
                cpu_second = cpu_of(args.postmaster) if args.postmaster else {}
                kinds = await processes(conn, url.database, bench.pids())
                args.rounds = sum(s.rounds for s in sessions) - before
                for s in sessions:
                    await s.close()
            await asyncio.sleep(took)
            third = await snapshot(conn, url.database)
        else:
            async with bench.probe() as block:
                await block(10)
                first = await snapshot(conn, url.database)
                started = time.perf_counter()
                await block(args.rounds)
                took = time.perf_counter() - started
                second = await snapshot(conn, url.database)
                await asyncio.sleep(took)
                third = await snapshot(conn, url.database)
    finally:
        await conn.close()
        system.stop()
        await systems.remove()
        shutil.rmtree(log_dir, ignore_errors=True)
    working, commits = diff(second, first)
    resting, rest_commits = diff(third, second)
    n = args.rounds
    each = f"{args.concurrency} sessions at once" if args.concurrency else "one at a time, each with a GET …/pending"
    print(f"{n} rounds ({each}) in {took:.1f} s, then {took:.1f} s at rest")
    print(f"transactions committed: {commits / n:.2f} per round; at rest {rest_commits / n:.2f} per round's time")
    if args.concurrency and args.postmaster:
        by_kind: dict[str, float] = {}
        for pid, seconds in cpu_second.items():
            kind = kinds.get(pid, "exited or other") if pid != args.postmaster else "postmaster"
            by_kind[kind] = by_kind.get(kind, 0.0) + seconds - cpu_first.get(pid, 0.0)
        total = sum(by_kind.values())
        print(f"PostgreSQL's live processes, CPU ms per round: {1000 * total / n:.2f}")
        for kind, seconds in sorted(by_kind.items(), key=lambda kv: -kv[1]):
            print(f"  {1000 * seconds / n:6.3f}  {kind}")
    lines = []
    plans = sum(v[3] for v in working.values()) - sum(v[3] for v in resting.values())
    planning = sum(v[4] for v in working.values()) - sum(v[4] for v in resting.values())
    print(f"plans made per round, at rest subtracted: {plans / n:.2f}, {planning / n:.3f} ms")
    planned = sorted(working.items(), key=lambda kv: -kv[1][4])
    for (query, _), (_, _, _, p, pt) in planned[:8]:
        if p:
            print(f"  {p / n:6.2f} plans {pt / n:6.3f} ms  {query[: args.width]}")
    for key, (c, rows, t, _, _) in working.items():
        r = resting.get(key, (0, 0, 0.0, 0, 0.0))
        lines.append(((c - r[0]) / n, c / n, r[0] / n, rows / n, t / n, key))
    lines.sort(key=lambda line: -line[0])
    top = sum(line[0] for line in lines if line[5][1])
    nested = sum(line[0] for line in lines if not line[5][1])
    print(f"statements per round, at rest subtracted: {top:.2f} top-level, {nested:.2f} nested (triggers, functions)")
    print(f"{'net':>6} {'calls':>6} {'rest':>6} {'rows':>6} {'ms':>6}  lvl statement")
    for net, c, r, rows, t, (query, toplevel) in lines:
        level = "top" if toplevel else "nst"
        print(f"{net:6.2f} {c:6.2f} {r:6.2f} {rows:6.2f} {t:6.3f}  {level} {query[: args.width]}")


if __name__ == "__main__":
    uvloop.run(main())
