"""The approval round, measured beside its raw floors in the same run.

    uv run python bench/approval_round.py [--rounds 200] [--concurrency 8] [--seconds 10] [--no-telemetry]

Legs, each timed per round:
- propose → visible: the coach publishes ``studio_edit_memory`` until the gateway announces the committed
  request on its live event stream (``GET …/events``), after which ``GET …/edits/{seq}`` shows it;
- apply → 200: once the turn has paused, the operator's ``POST …/edits/{seq}`` until its answer;
- round: propose → visible → apply → 200 → ``TurnContinuation`` at the coach.

Then ``--concurrency`` sessions run rounds at once for ``--seconds``: the sustained rounds per second.

Raw floors, measured on the same machine in the same run:
- a raw aiokafka produce → consume round trip (acks=all, idempotent, one partition);
- a raw asyncpg commit of one row plus one outbox row.

Each leg crosses Kafka twice and commits twice (propose: coach → edits → gateway; apply: gateway → edits →
gateway), so its floor is 2 x Kafka round trip + 2 x commit. Servers come from ``KAFKA_BOOTSTRAP_SERVERS``,
``DATABASE_URL`` and ``REDIS_URL`` when set, otherwise from the local devstack.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from sqlalchemy.engine import make_url

from assent.coach import CoachClient
from assent_devstack.system import build_system

TOKEN = "bench-token"
ORG = "bench"
WARM_UP = 300  # a freshly started broker's JVM is slow until its hot paths are compiled


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(samples: list[float]) -> tuple[float, float]:
    return pct(samples, 0.5) * 1000, pct(samples, 0.99) * 1000


async def kafka_round_trips(bootstrap: str, n: int) -> list[float]:
    topic = f"bench.raw.{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, 1, 1)])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=500)
    await producer.start()
    await consumer.start()
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    await consumer.seek_to_end(tp)
    await consumer.position(tp)
    samples = []
    try:
        for i in range(n + WARM_UP):
            start = time.perf_counter()
            await producer.send_and_wait(topic, b"x" * 600, key=b"k")
            await consumer.getone()
            if i >= WARM_UP:
                samples.append(time.perf_counter() - start)
    finally:
        await consumer.stop()
        await producer.stop()
    return samples


async def pg_commits(database_url: str, n: int) -> list[float]:
    url = make_url(database_url)
    conn = await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
    )
    samples = []
    try:
        await conn.execute(
            "CREATE TEMP TABLE row_ (id uuid primary key, body text);"
            "CREATE TEMP TABLE outbox_ (id bigserial primary key, payload bytea, headers jsonb)"
        )
        for i in range(n + 20):
            start = time.perf_counter()
            async with conn.transaction():
                await conn.execute("INSERT INTO row_ VALUES ($1, $2)", uuid.uuid4(), "x" * 200)
                await conn.execute("INSERT INTO outbox_ (payload, headers) VALUES ($1, '{}')", b"x" * 600)
            if i >= 20:
                samples.append(time.perf_counter() - start)
    finally:
        await conn.close()
    return samples


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def sse_events(http: httpx.AsyncClient, url: str, into: asyncio.Queue[tuple[str, dict]]) -> None:
    async with http.stream("GET", url, timeout=None) as response:
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                await into.put((name, json.loads(line[6:])))


async def session_rounds(
    http: httpx.AsyncClient, coach: CoachClient, *, rounds: int | None = None, until: float | None = None
) -> dict[str, list[float]]:
    """Approval rounds, one after another, in a session of its own on an agent of its own.

    Runs ``rounds`` measured rounds (after 10 to warm up), or as many as fit before ``until``.
    """
    legs: dict[str, list[float]] = {"propose → visible": [], "apply → 200": [], "round": []}
    n = uuid.uuid4().hex[:8]
    created = await http.post("/api/workspace/orgs", json={"org_id": ORG, "name": "Bench"})
    if created.status_code != 409:  # the token's organisation, made by the first session
        created.raise_for_status()
    for path, body in (
        ("/api/workspace/guilds", {"guild_id": f"g{n}", "org_id": ORG, "name": "Bench"}),
        ("/api/workspace/agents", {"agent_id": f"a{n}", "org_id": ORG, "guild_id": f"g{n}", "name": "B"}),
    ):
        (await http.post(path, json=body)).raise_for_status()
    session = await coach.open_session(org_id=ORG, source_guild_id=f"g{n}", operator_user_id="bench")
    while (await http.get(f"/api/studio/sessions/{session.session_id}/pending")).status_code == 404:
        await asyncio.sleep(0.01)  # the session's stream is its organisation's once the gateway knows it
    events: asyncio.Queue[tuple[str, dict]] = asyncio.Queue()
    reader = asyncio.create_task(sse_events(http, f"/api/studio/sessions/{session.session_id}/events", events))
    try:
        assert (await events.get())[0] == "ready"
        warm_up = 10 if rounds is not None else 0
        i = 0
        while (rounds is not None and i < rounds + warm_up) or (until is not None and time.perf_counter() < until):
            turn = session.begin_turn()
            start = time.perf_counter()
            call = await turn.send(
                "studio_edit_memory",
                {"agent_id": f"a{n}", "content": f"line {i}\n" * 20, "base_version": i, "reason": "bench"},
            )
            url = f"/api/studio/sessions/{session.session_id}/edits/{call.seq}"
            while True:
                name, event = await events.get()
                if name == "request.proposed" and event["seq"] == call.seq:
                    break
            visible = time.perf_counter()
            await turn.result(call)
            await turn.end_step()
            while (await events.get())[0] != "turn.step_ended":
                pass  # the operator decides a paused turn, as in the product
            applying = time.perf_counter()
            answer = await http.post(url, json={"decision": "apply"})
            applied = time.perf_counter()
            assert answer.status_code == 200, answer.text
            await turn.continuation()
            done = time.perf_counter()
            if i == 0:
                assert (await http.get(url)).json()["status"] == "applied"
            if i >= warm_up:
                legs["propose → visible"].append(visible - start)
                legs["apply → 200"].append(applied - applying)
                legs["round"].append((visible - start) + (done - applying))
            i += 1
    finally:
        reader.cancel()
    return legs


async def approval_rounds(
    system_url: str, kafka: str, prefix: str, rounds: int, concurrency: int, seconds: float
) -> tuple[dict[str, list[float]], list[float], float]:
    """Sequential rounds for latency, then ``concurrency`` sessions at once for ``seconds`` for throughput."""
    limits = httpx.Limits(max_connections=4 * concurrency + 10)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(base_url=system_url, headers=headers, limits=limits, timeout=60) as http,
        CoachClient(kafka, topic_prefix=prefix) as coach,
    ):
        legs = await session_rounds(http, coach, rounds=rounds)
        started = time.perf_counter()
        loaded = await asyncio.gather(
            *(session_rounds(http, coach, until=started + seconds) for _ in range(concurrency))
        )
        elapsed = time.perf_counter() - started
    under_load = [sample for worker in loaded for sample in worker["round"]]
    return legs, under_load, len(under_load) / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8, help="sessions at once for the throughput run")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the throughput run")
    parser.add_argument("--no-telemetry", action="store_true", help="run the services with OTEL_SDK_DISABLED=true")
    args = parser.parse_args()

    devstack = None
    given = [os.environ.get(k) for k in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL", "REDIS_URL")]
    if all(given):
        kafka, database_url, redis_url = given  # type: ignore[misc]
    else:
        from assent_devstack import start_all

        devstack = start_all(Path(tempfile.mkdtemp(prefix="assent-bench-")))
        env = devstack.env()
        kafka, database_url, redis_url = env["KAFKA_BOOTSTRAP_SERVERS"], env["DATABASE_URL"], env["REDIS_URL"]
    assert kafka and database_url and redis_url
    name = f"bench_{uuid.uuid4().hex[:8]}"
    url = make_url(database_url)
    admin = await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
    )
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    bench_db = url.set(database=name).render_as_string(hide_password=False)
    system = build_system(
        kafka_bootstrap_servers=kafka,
        database_url=bench_db,
        redis_url=redis_url,
        log_dir=Path(tempfile.mkdtemp(prefix="assent-bench-logs-")),
        topic_prefix=f"{name}.",
        api_tokens=json.dumps({TOKEN: {"user": "bench", "org": ORG, "roles": ["admin"]}}),
        extra_env={"ASSENT_LOG_LEVEL": "WARNING", **({"OTEL_SDK_DISABLED": "true"} if args.no_telemetry else {})},
    )
    system.start()
    try:
        await asyncio.sleep(2)
        rest = {s.module: rss_mib(s.process.pid) for s in (system.edits, system.gateway) if s.process}
        kafka_rt = await kafka_round_trips(kafka, args.rounds * 2)
        commits = await pg_commits(bench_db, args.rounds * 2)
        legs, under_load, per_second = await approval_rounds(
            system.gateway.url, kafka, f"{name}.", args.rounds, args.concurrency, args.seconds
        )
        busy = {s.module: rss_mib(s.process.pid) for s in (system.edits, system.gateway) if s.process}
    finally:
        system.stop()
        if devstack is not None:
            devstack.stop()

    k50, k99 = ms(kafka_rt)
    c50, c99 = ms(commits)
    floor50, floor99 = 2 * k50 + 2 * c50, 2 * k99 + 2 * c99
    print(f"\nApproval round, {args.rounds} rounds, one replica per service, {os.cpu_count()} cores\n")
    print(f"{'measure':<28}{'p50 ms':>10}{'p99 ms':>10}{'p50 / floor':>14}{'p99 / floor':>14}")
    print(f"{'raw Kafka round trip':<28}{k50:>10.2f}{k99:>10.2f}")
    print(f"{'raw asyncpg commit':<28}{c50:>10.2f}{c99:>10.2f}")
    print(f"{'leg floor (2 RT + 2 commit)':<28}{floor50:>10.2f}{floor99:>10.2f}")
    for leg, samples in legs.items():
        p50, p99 = ms(samples)
        f50, f99 = (floor50, floor99) if leg != "round" else (2 * floor50, 2 * floor99)
        print(f"{leg:<28}{p50:>10.2f}{p99:>10.2f}{p50 / f50:>13.1f}x{p99 / f99:>13.1f}x")
    l50, l99 = ms(under_load)
    print(
        f"\nSustained: {per_second:.0f} rounds/s with {args.concurrency} sessions at once for {args.seconds:.0f} s"
        f" (round p50 {l50:.1f} ms, p99 {l99:.1f} ms; nothing lost: every round's apply answered 200 and its"
        " turn continued)"
    )
    print("\nTargets (DESIGN §6): round p50 ≤ 10 ms, p99 ≤ 25 ms; each leg within 3x of its floor; 1,000 rounds/s.")
    print(
        "RSS MiB at rest / after the run (target < 150 at rest): "
        + ", ".join(f"{m} {rest[m]:.0f} / {busy[m]:.0f}" for m in rest)
    )
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
