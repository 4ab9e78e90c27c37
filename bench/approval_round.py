"""The approval round, measured beside its raw floors in the same run.

    uv run python bench/approval_round.py [--rounds 200] [--concurrency 8] [--seconds 10] [--no-telemetry]

Legs, each timed per round:
- propose → visible: the coach publishes ``studio_edit_memory`` until the gateway announces the committed
  request on its live event stream (``GET …/events``), after which ``GET …/edits/{seq}`` shows it;
- apply → 200: once the turn has paused, the operator's ``POST …/edits/{seq}`` until its answer;
- round: propose → visible → apply → 200 → ``TurnContinuation`` at the coach.

Then ``--concurrency`` sessions run rounds at once for ``--seconds``: the sustained rounds per second.

Nothing is measured until the whole system has run the same load for ``WARM_UP_SECONDS`` (the memory at rest is
read before): a freshly started broker's JVM, and the services' and the database's caches, are slow until they
are warm, and the figures are of the system as it runs, not as it starts. The preloaded figures are measured
warm too, after the throughput runs of one replica each (the run with two replicas comes after, on the preloaded
database), and compared with those of a second system of its own on an empty database, warmed the same way: the
two are measured in turn, block by block, so that the machine's drift weighs on both alike.

The benchmark itself (the coach, the operators' HTTP clients, the raw floors) runs on uvloop, as the services do.

Raw floors, measured on the same machine in the same run:
- a raw aiokafka produce → consume round trip (acks=all, idempotent, one partition);
- a raw asyncpg commit of one row plus one outbox row.

Beside them, for context only: a raw hop between two processes (half of a round trip through an echo in another
process), after 1 ms and after 10 ms idle between hops. Each of the system's hops is between processes, and on a
virtual machine waking an idle process costs more the longer it slept, up to more than the whole in-process round
trip.

Each leg's floor is the Kafka hops and the commits it cannot avoid, each at its raw cost (:data:`FLOORS`): propose
crosses Kafka twice (coach → edits → gateway) and commits twice (the owner's proposal, the gateway's request);
apply crosses twice (gateway → edits → gateway) and commits three times (the gateway's decision with its outbox
row, the owner's apply, the gateway's outcome, which the answer waits for). A round is both legs and the
continuation's hop to the coach.

Beside the floor, each leg is also done by hand (:mod:`raw`): its two hops between two processes and its
transactions, statement by statement, with raw aiokafka and asyncpg and nothing else. A system leg over its raw
leg is what the framework and the domain add to the unavoidable work. Servers come from ``KAFKA_BOOTSTRAP_SERVERS``,
``DATABASE_URL`` and ``REDIS_URL`` when set, otherwise from the local devstack.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import profiles
import uvloop
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from raw import kafka_hops_between_processes, kafka_round_trips, pg_commits, raw_legs
from sqlalchemy.engine import make_url

from assent.coach import CoachClient
from assent_devstack.preload import preload
from assent_devstack.system import ServiceProcess, build_system, free_port

TOKEN = "bench-token"
ORG = "bench"
PROPOSED_EVENTS = frozenset({"proposal.proposed", "request.proposed"})
"""A session's live event that a proposal is visible: its name, and its name before 21e2426 (so that
``make bench-compare`` measures against commits from before the rename too)."""
HOP_IDLE_SECONDS = (0.001, 0.01)
"""How long the processes of the context hops sleep between two hops (a round's processes sleep a few ms)."""
INTERLEAVED_BLOCKS = 4
"""The preloaded system and an empty one are measured in this many blocks each, taken in turn."""
WARM_UP_SECONDS = 5.0
"""How long the system runs the throughput load before the floors and the latency are measured."""


def block_order(blocks: int) -> list[int]:
    """Which of two systems (0, the first; 1, the second) measures each block, ``blocks`` blocks each, in turn:
    0 1 1 0 0 1 1 0 … (ABBA: a drift of the machine's speed, steady across the run, weighs on both alike)."""
    return [side for i in range(blocks) for side in ((0, 1) if i % 2 == 0 else (1, 0))]


async def interleaved(
    first: Bench, second: Bench, rounds: int, blocks: int = INTERLEAVED_BLOCKS
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """``rounds`` rounds on each of two systems, in ``blocks`` blocks taken in turn (:func:`block_order`): each
    leg's samples on ``first``, and on ``second``."""
    legs: tuple[dict[str, list[float]], dict[str, list[float]]] = (
        collections.defaultdict(list),
        collections.defaultdict(list),
    )
    async with first.probe() as block_a, second.probe() as block_b:
        await block_a(0, 10)
        await block_b(0, 10)
        for side in block_order(blocks):
            for leg, samples in (await (block_a, block_b)[side](rounds // blocks)).items():
                legs[side][leg] += samples
    return dict(legs[0]), dict(legs[1])


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(samples: list[float]) -> tuple[float, float]:
    return pct(samples, 0.5) * 1000, pct(samples, 0.99) * 1000


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


TICKS = os.sysconf("SC_CLK_TCK")
LEAK_MIB = 5.0
"""RSS growth from one throughput run to the next, the same again, above which a service is said to leak (below
it is the allocator settling)."""


def cpu_seconds(pid: int, *, reaped_children: bool = False) -> float:
    """User plus system CPU time the process has used so far (0 once it is gone); with ``reaped_children``,
    also that of its children that have exited."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    own = int(fields[11]) + int(fields[12])
    return (own + (int(fields[13]) + int(fields[14]) if reaped_children else 0)) / TICKS


def family_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid``, its live children and its exited ones (PostgreSQL: the postmaster and its backends)."""
    return cpu_seconds(pid, reaped_children=True) + sum(cpu_seconds(child) for child in with_children(pid)[1:])


def machine_busy_seconds() -> float:
    """CPU time all cores of the machine have spent busy so far (everything but idle and I/O wait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICKS


def with_children(pid: int) -> list[int]:
    """``pid`` and its direct children (PostgreSQL's backends are children of its postmaster)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(stat.parent.name))
        except (FileNotFoundError, ValueError):
            continue
    return [pid, *children]


async def sse_events(http: aiohttp.ClientSession, url: str, into: asyncio.Queue[tuple[str, dict]]) -> None:
    async with http.get(url, timeout=aiohttp.ClientTimeout(total=None)) as response:
        name = ""
        async for raw in response.content:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                await into.put((name, json.loads(line[6:])))


class BenchSession:
    """A session of its own on an agent of its own, running approval rounds one after another.

    Each session has an HTTP client of its own (one connection for its event stream, one for its requests), as
    each operator's browser would. The clients are aiohttp's, on uvloop: the operators' browsers are not the
    system under test, and every millisecond of CPU they take on this machine is one the system lacks (with
    httpx on asyncio's own loop they took about a sixth of the machine under load).
    """

    def __init__(self, base_url: str, headers: dict[str, str], coach: CoachClient) -> None:
        self.base_url, self.headers = base_url, headers
        self.coach = coach
        self.n = uuid.uuid4().hex[:8]
        self.rounds = 0
        self.events: asyncio.Queue[tuple[str, dict]] = asyncio.Queue()

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """``(status, body)``: the body parsed as JSON when the answer is JSON, else its text."""
        async with self.http.request(method, path, json=body) as response:
            if response.content_type == "application/json":
                return response.status, await response.json()
            return response.status, await response.text()

    async def creating(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """``POST`` a creation, again while the answer says to retry (64 sessions set up at once can outwait an
        owner's answer on a busy machine); a retry that finds its own earlier attempt done counts as created."""
        retried = False
        for _ in range(60):
            status, answer = await self.request("POST", path, body)
            if not (isinstance(answer, dict) and answer.get("retry")):
                return (201 if retried and status == 409 else status), answer
            retried = True
            await asyncio.sleep(0.5)
        return status, answer

    async def open(self) -> None:
        self.http = aiohttp.ClientSession(
            base_url=self.base_url, headers=self.headers, timeout=aiohttp.ClientTimeout(total=60)
        )
        n = self.n
        status, answer = await self.creating("/api/workspace/orgs", {"org_id": ORG, "name": "Bench"})
        assert status in (200, 201, 409), answer  # 409: the token's organisation, made by the first session
        for path, body in (
            ("/api/workspace/guilds", {"guild_id": f"g{n}", "org_id": ORG, "name": "Bench"}),
            ("/api/workspace/agents", {"agent_id": f"a{n}", "org_id": ORG, "guild_id": f"g{n}", "name": "B"}),
        ):
            status, answer = await self.creating(path, body)
            assert status in (200, 201), answer
        self.session = await self.coach.open_session(org_id=ORG, source_guild_id=f"g{n}", operator_user_id="bench")
        self.base = f"/api/studio/sessions/{self.session.session_id}"
        while (await self.request("GET", f"{self.base}/pending"))[0] == 404:
            await asyncio.sleep(0.01)  # the session's stream is its organisation's once the gateway knows it
        self.reader = asyncio.create_task(sse_events(self.http, f"{self.base}/events", self.events))
        assert (await self.events.get())[0] == "ready"

    async def close(self) -> None:
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reader
        await self.http.close()

    async def run(
        self, *, rounds: int | None = None, until: float | None = None, warm_up: int = 0
    ) -> dict[str, list[float]]:
        """``rounds`` measured rounds after ``warm_up`` ones, or as many as start before ``until``."""
        legs: dict[str, list[float]] = {"propose → visible": [], "apply → 200": [], "round": []}
        done_here = 0
        while (rounds is not None and done_here < rounds + warm_up) or (
            until is not None and time.perf_counter() < until
        ):
            i = self.rounds
            turn = self.session.begin_turn()
            start = time.perf_counter()
            call = await turn.send(
                "studio_edit_memory",
                {"agent_id": f"a{self.n}", "content": f"line {i}\n" * 20, "base_version": i, "reason": "bench"},
            )
            url = f"{self.base}/edits/{call.seq}"
            while True:
                name, event = await self.events.get()
                if name in PROPOSED_EVENTS and event["seq"] == call.seq:
                    break
            visible = time.perf_counter()
            await turn.result(call)
            await turn.end_step()
            while (await self.events.get())[0] != "turn.step_ended":
                pass  # the operator decides a paused turn, as in the product
            applying = time.perf_counter()
            status, answer = await self.request("POST", url, {"decision": "apply"})
            applied = time.perf_counter()
            assert status == 200, answer
            await turn.continuation()
            finished = time.perf_counter()
            if done_here >= warm_up:
                legs["propose → visible"].append(visible - start)
                legs["apply → 200"].append(applied - applying)
                legs["round"].append((visible - start) + (finished - applying))
            self.rounds += 1
            done_here += 1
        return legs

    async def settled(self) -> bool:
        """Nothing is left pending in the session."""
        status, body = await self.request("GET", f"{self.base}/pending")
        assert status == 200, body
        return not body["items"]


async def continuations(bootstrap: str, topic: str) -> collections.Counter[tuple[str, str, int]]:
    """How many ``TurnContinuation`` messages the topic holds per (session, turn, step), read from the start."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    counts: collections.Counter[tuple[str, str, int]] = collections.Counter()
    try:
        partitions = consumer.assignment()
        while not partitions:
            await asyncio.sleep(0.05)
            partitions = consumer.assignment()
        ends = await consumer.end_offsets(list(partitions))

        async def behind() -> bool:
            return any([await consumer.position(tp) < end for tp, end in ends.items()])

        while await behind():
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                for record in records:
                    body = json.loads(record.value)
                    counts[(body["session_id"], body["turn_id"], body["step"])] += 1
    finally:
        await consumer.stop()
    return counts


@dataclass
class Load:
    """What one throughput run measured."""

    replicas: int
    sessions: int
    seconds: float
    rounds: int
    round_ms: tuple[float, float]
    cpu_ms_per_round: dict[str, float]
    rss_after: dict[str, float]
    samples: list[float] = field(default_factory=list, repr=False)
    """Each round's time (s), of which ``round_ms`` are the p50 and p99."""

    @property
    def per_second(self) -> float:
        return self.rounds / self.seconds


class Bench:
    """The system under test, its clients, and the measurements taken from it."""

    def __init__(self, system: Any, kafka: str, prefix: str, database_url: str, servers: Any = None) -> None:
        self.system, self.kafka, self.prefix, self.database_url = system, kafka, prefix, database_url
        self.servers = servers  # the devstack this benchmark started, if it did: its CPU is counted too
        self.replicas: dict[str, list[Any]] = {name: [p] for name, p in system.processes.items()}
        self.headers = {"Authorization": f"Bearer {TOKEN}"}
        self.sessions: list[BenchSession] = []
        self.profiles: dict[str, profiles.Stacks] = {}

    def pids(self) -> dict[str, list[int]]:
        return {name: [p.process.pid for p in ps if p.process] for name, ps in self.replicas.items()}

    def rss(self) -> dict[str, float]:
        """Per service, the largest RSS among its replicas (MiB)."""
        return {name: max(rss_mib(pid) for pid in pids) for name, pids in self.pids().items()}

    def add_replicas(self) -> None:
        """Start a second process of every service (same database, topics and consumer groups)."""
        for processes in self.replicas.values():
            first = processes[0]
            second = ServiceProcess(
                first.module, free_port(), first.env, first.log_path.with_suffix(".2.log"), python=first.python
            )
            second.start()
            processes.append(second)

    def stop_replicas(self) -> None:
        for processes in self.replicas.values():
            for extra in processes[1:]:
                extra.stop()
            del processes[1:]

    @asynccontextmanager
    async def clients(self) -> AsyncIterator[tuple[list[str], CoachClient]]:
        """The gateway replicas' URLs, and one coach client for all sessions."""
        async with CoachClient(self.kafka, topic_prefix=self.prefix) as coach:
            yield [p.url for p in self.replicas["gateway"]], coach

    @asynccontextmanager
    async def probe(self) -> AsyncIterator[Callable[[int, int], Awaitable[dict[str, list[float]]]]]:
        """One session of its own, for blocks of rounds one after another: ``block(rounds, warm_up)`` returns
        each leg's samples of ``rounds`` rounds (after ``warm_up`` unmeasured ones) and as many ``GET …/pending``."""
        async with self.clients() as (gateways, coach):
            session = BenchSession(gateways[0], self.headers, coach)
            await session.open()

            async def block(rounds: int, warm_up: int = 0) -> dict[str, list[float]]:
                legs = await session.run(rounds=rounds, warm_up=warm_up)
                pending = []
                for _ in range(rounds):
                    start = time.perf_counter()
                    status, body = await session.request("GET", f"{session.base}/pending")
                    assert status == 200, body
                    pending.append(time.perf_counter() - start)
                legs["GET …/pending"] = pending
                return legs

            try:
                yield block
                assert await session.settled()
            finally:
                await session.close()

    async def at_rest(self, seconds: float) -> dict[str, float]:
        """Each service's (and server's) CPU in ms per second over ``seconds`` with nothing to do: what it costs to
        run at all, and what an owner that takes no part in a round spends in it (its timers and empty fetches)."""
        pids = self.pids()
        if self.servers is not None:
            pids["Kafka"] = list(self.servers.kafka.pids)
        before = {name: sum(cpu_seconds(pid) for pid in ps) for name, ps in pids.items()}
        await asyncio.sleep(seconds)
        after = {name: sum(cpu_seconds(pid) for pid in ps) for name, ps in pids.items()}
        return {name: 1000 * (after[name] - before[name]) / seconds for name in pids}

    async def latency(self, rounds: int) -> dict[str, list[float]]:
        async with self.probe() as block:
            return await block(rounds, 10)

    async def throughput(self, concurrency: int, seconds: float, profile: Path | None = None) -> Load:
        """``concurrency`` sessions (spread over the gateway replicas) run rounds at once for ``seconds``; with
        ``profile``, each service (its first replica) sampled meanwhile, its profile saved there
        (:mod:`profiles`)."""
        async with self.clients() as (gateways, coach):
            sessions = [BenchSession(gateways[i % len(gateways)], self.headers, coach) for i in range(concurrency)]
            await asyncio.gather(*(s.open() for s in sessions))
            try:
                await asyncio.gather(*(s.run(rounds=1) for s in sessions))  # every session warm
                pids = self.pids()
                if self.servers is not None:
                    pids["Kafka"] = list(self.servers.kafka.pids)
                    pids["Redis"] = list(self.servers.redis.pids)
                cpu_before = {name: sum(cpu_seconds(pid) for pid in ps) for name, ps in pids.items()}
                if self.servers is not None:
                    cpu_before["PostgreSQL"] = family_cpu_seconds(self.servers.postgres.pids[0])
                cpu_before["bench client"] = time.process_time()
                cpu_before["whole machine"] = machine_busy_seconds()
                before = sum(s.rounds for s in sessions)
                started = time.perf_counter()
                spying = None
                if profile is not None:
                    sampled = {name: ps[0] for name, ps in self.pids().items() if ps}
                    spying = asyncio.create_task(profiles.record(sampled, seconds, profile))
                loaded = await asyncio.gather(*(s.run(until=started + seconds) for s in sessions))
                if spying is not None:
                    self.profiles = await spying
                elapsed = time.perf_counter() - started
                rounds = sum(s.rounds for s in sessions) - before
                cpu_after = {name: sum(cpu_seconds(pid) for pid in ps) for name, ps in pids.items()}
                if self.servers is not None:
                    cpu_after["PostgreSQL"] = family_cpu_seconds(self.servers.postgres.pids[0])
                cpu_after["bench client"] = time.process_time()
                cpu_after["whole machine"] = machine_busy_seconds()
                settled = await asyncio.gather(*(s.settled() for s in sessions))
                assert all(settled), "a request was left pending"
                self.sessions += sessions
            finally:
                for s in sessions:
                    await s.close()
        samples = [sample for worker in loaded for sample in worker["round"]]
        return Load(
            replicas=len(gateways),
            sessions=concurrency,
            seconds=elapsed,
            rounds=rounds,
            round_ms=ms(samples),
            cpu_ms_per_round={k: 1000 * (cpu_after[k] - cpu_before[k]) / rounds for k in cpu_before},
            rss_after=self.rss(),
            samples=samples,
        )

    async def exactly_once(self) -> tuple[int, int]:
        """Every round of every session continued its turn exactly once: (turns, continuations) on the topic."""
        counts = await continuations(self.kafka, f"{self.prefix}studio.continuations")
        ours = {s.session.session_id: s.rounds for s in self.sessions}
        mine = {key: n for key, n in counts.items() if key[0] in ours}
        assert all(n == 1 for n in mine.values()), "a turn was continued more than once"
        assert len(mine) == sum(ours.values()), f"{sum(ours.values())} rounds but {len(mine)} continued turns"
        return len(mine), sum(mine.values())


REST_SECONDS = 10.0
"""How long the system is left with nothing to do while its CPU at rest is measured (the clock ticks at 10 ms)."""

RAW_LEG = {"propose → visible": "propose", "apply → 200": "apply"}
"""The system's legs, and the raw leg (:mod:`raw`) each is compared with."""
FLOORS = {"propose → visible": (2, 2), "apply → 200": (2, 3), "round": (5, 5)}
"""Per leg, the Kafka hops (raw round trips) and the commits it cannot avoid."""


async def remove_systems(bootstrap: str, url: Any, names: list[str]) -> None:
    """Drop the databases and delete the topics of the systems ``names`` (on servers the benchmark did not start)."""
    admin = await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
    )
    try:
        for name in names:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
    kafka_admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await kafka_admin.start()
    try:
        topics = [t for t in await kafka_admin.list_topics() if any(t.startswith(f"{name}.") for name in names)]
        if topics:
            await kafka_admin.delete_topics(topics)
    finally:
        await kafka_admin.close()


Floor = dict[str, tuple[float, float]]
"""Per leg, its floor's p50 and p99 in ms."""


def floors(kafka: tuple[float, float], commit: tuple[float, float]) -> Floor:
    """Each leg's floor (:data:`FLOORS`) from the raw Kafka round trip's and commit's p50 and p99."""
    return {
        leg: (hops * kafka[0] + commits * commit[0], hops * kafka[1] + commits * commit[1])
        for leg, (hops, commits) in FLOORS.items()
    }


def print_legs(title: str, legs: dict[str, list[float]], floor: Floor, raw: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    print(f"{'measure':<28}{'p50 ms':>10}{'p99 ms':>10}{'p50 / floor':>14}{'p99 / floor':>14}{'p50 / raw leg':>16}")
    for leg, samples in legs.items():
        p50, p99 = ms(samples)
        if leg == "GET …/pending":
            print(f"{leg:<28}{p50:>10.2f}{p99:>10.2f}")
            continue
        f50, f99 = floor[leg]
        line = f"{leg:<28}{p50:>10.2f}{p99:>10.2f}{p50 / f50:>13.1f}x{p99 / f99:>13.1f}x"
        if leg in RAW_LEG:
            line += f"{p50 / ms(raw[RAW_LEG[leg]])[0]:>15.1f}x"
        print(line)


def print_load(load: Load) -> None:
    # Two decimals below a millisecond: an owner that takes no part in the round is held to under 0.1 ms.
    cpu = ", ".join(
        f"{name} {value:.2f}" if value < 1 else f"{name} {value:.1f}" for name, value in load.cpu_ms_per_round.items()
    )
    print(
        f"  {load.replicas} replica(s) of each service, {load.sessions} sessions at once for {load.seconds:.0f} s:"
        f" {load.per_second:.0f} rounds/s (round p50 {load.round_ms[0]:.0f} ms, p99 {load.round_ms[1]:.0f} ms)"
    )
    print(f"    CPU ms per round: {cpu}")


@dataclass
class Servers:
    """Kafka, PostgreSQL and Redis: the devstack's this benchmark started (``devstack``), or those given by
    ``KAFKA_BOOTSTRAP_SERVERS``, ``DATABASE_URL`` and ``REDIS_URL`` (``devstack`` None)."""

    kafka: str
    database_url: str
    redis_url: str
    devstack: Any = None

    @classmethod
    def start(cls, scratch: list[Path]) -> Servers:
        """The servers given, else a devstack of the benchmark's own, its data in a new folder added to
        ``scratch``."""
        given = [os.environ.get(k) for k in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL", "REDIS_URL")]
        if all(given):
            kafka, database_url, redis_url = given
            assert kafka and database_url and redis_url
            return cls(kafka, database_url, redis_url)
        from assent_devstack import start_all

        scratch.append(Path(tempfile.mkdtemp(prefix="assent-bench-")))
        # KAFKA_BROKERS=3: a cluster of three brokers; the services it starts inherit the replicated topics' settings.
        devstack = start_all(scratch[-1], kafka_brokers=int(os.environ.get("KAFKA_BROKERS") or 1))
        env = devstack.env()
        os.environ.update({key: value for key, value in env.items() if key.startswith("ASSENT_TOPIC_")})
        return cls(env["KAFKA_BOOTSTRAP_SERVERS"], env["DATABASE_URL"], env["REDIS_URL"], devstack)

    def stop(self) -> None:
        if self.devstack is not None:
            self.devstack.stop()  # with its servers' data


class Systems:
    """Systems of their own on the same servers: each has a database and a topic prefix of one name, which
    :meth:`remove` drops and deletes (on servers the benchmark did not start; its own go with their data)."""

    def __init__(self, servers: Servers, *, telemetry: bool = True) -> None:
        self.servers, self.telemetry = servers, telemetry
        self.url = make_url(servers.database_url)
        self.names: list[str] = []

    async def admin(self, sql: str) -> None:
        url = self.url
        conn = await asyncpg.connect(
            host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
        )
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    async def new(self, log_dir: Path, **build: Any) -> tuple[Any, str, str]:
        """A system of its own (database and topics), started: the system, its topic prefix, its database.
        ``build`` goes to :func:`~assent_devstack.system.build_system` (another checkout's ``services`` and
        ``python``)."""
        name = f"bench_{uuid.uuid4().hex[:8]}"
        self.names.append(name)
        await self.admin(f'CREATE DATABASE "{name}"')
        bench_db = self.url.set(database=name).render_as_string(hide_password=False)
        system = build_system(
            kafka_bootstrap_servers=self.servers.kafka,
            database_url=bench_db,
            redis_url=self.servers.redis_url,
            log_dir=log_dir,
            topic_prefix=f"{name}.",
            api_tokens=json.dumps({TOKEN: {"user": "bench", "org": ORG, "roles": ["admin"]}}),
            extra_env={"ASSENT_LOG_LEVEL": "WARNING", **({} if self.telemetry else {"OTEL_SDK_DISABLED": "true"})},
            **build,
        )
        system.start()
        return system, f"{name}.", bench_db

    async def remove(self) -> None:
        if self.servers.devstack is None:
            await remove_systems(self.servers.kafka, self.url, self.names)


@dataclass
class Raw:
    """The raw floors and legs (:mod:`raw`), each in samples of seconds."""

    kafka_round_trip: list[float]
    kafka_hops: dict[float, list[float]]
    """Per idle time between hops, the context hops between two processes."""
    commits: list[float]
    legs: dict[str, list[float]]

    @classmethod
    async def measure(cls, kafka: str, database_url: str, rounds: int) -> Raw:
        """Each raw measure, ``rounds`` samples or more; its tables in the database of ``database_url``."""
        kafka_rt = await kafka_round_trips(kafka, rounds * 2)
        hops = {idle: await kafka_hops_between_processes(kafka, rounds, idle) for idle in HOP_IDLE_SECONDS}
        dsn = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
        commits = await pg_commits(dsn, rounds * 2)
        return cls(kafka_rt, hops, commits, await raw_legs(kafka, dsn, rounds))

    def floor(self) -> Floor:
        return floors(ms(self.kafka_round_trip), ms(self.commits))

    def print(self) -> None:
        """The floors' and the raw legs' lines, p50 and p99 in ms."""
        k50, k99 = ms(self.kafka_round_trip)
        c50, c99 = ms(self.commits)
        floor = self.floor()
        print(f"{'raw Kafka round trip':<28}{k50:>10.2f}{k99:>10.2f}")
        for idle, hops in self.kafka_hops.items():
            h50, h99 = ms(hops)
            label = f"raw Kafka hop, {idle * 1000:.0f} ms idle"
            print(f"{label:<28}{h50:>10.2f}{h99:>10.2f}   (context: between two processes; not part of the floor)")
        print(f"{'raw asyncpg commit':<28}{c50:>10.2f}{c99:>10.2f}")
        for leg, (hops_n, commits_n) in FLOORS.items():
            label = f"{leg.split()[0]} floor ({hops_n} + {commits_n})"
            print(
                f"{label:<28}{floor[leg][0]:>10.2f}{floor[leg][1]:>10.2f}   ({hops_n} round trips + {commits_n}"
                " commits)"
            )
        for leg, samples in self.legs.items():
            r50, r99 = ms(samples)
            label = f"raw {leg} leg"
            system_leg = next(name for name, raw_leg in RAW_LEG.items() if raw_leg == leg)
            print(
                f"{label:<28}{r50:>10.2f}{r99:>10.2f}   ({r50 / floor[system_leg][0]:.1f}x its floor; its hops and"
                " transactions by hand, between two processes)"
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200, help="sequential rounds for the latency figures")
    parser.add_argument("--concurrency", type=int, default=64, help="sessions at once for the throughput runs")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each throughput run")
    parser.add_argument("--no-telemetry", action="store_true", help="run the services with OTEL_SDK_DISABLED=true")
    parser.add_argument("--no-replicas", action="store_true", help="skip the run with two replicas of each service")
    parser.add_argument(
        "--preload", type=int, default=0, metavar="N", help="then load N resolved requests and measure again"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="then one more throughput run with every service sampled by py-spy: flame graphs and top entries in DIR",
    )
    args = parser.parse_args()

    # The benchmark's own servers' data and the services' logs: removed after a run that finished, kept (and
    # named) after one that failed.
    scratch = [Path(tempfile.mkdtemp(prefix="assent-bench-logs-"))]
    servers = Servers.start(scratch)
    kafka = servers.kafka
    systems = Systems(servers, telemetry=not args.no_telemetry)
    system, prefix, bench_db = await systems.new(scratch[0])
    bench = Bench(system, kafka, prefix, bench_db, servers.devstack)
    control: Bench | None = None
    loads: list[Load] = []
    finished = False
    try:
        await asyncio.sleep(2)
        rest = bench.rss()
        warm_up = await bench.throughput(args.concurrency, WARM_UP_SECONDS)  # not a figure: warms every part
        resting = await bench.at_rest(REST_SECONDS)
        raw = await Raw.measure(kafka, bench_db, args.rounds)
        legs = await bench.latency(args.rounds)
        for _ in range(2):  # twice in a row: memory must not grow from one to the next
            loads.append(await bench.throughput(args.concurrency, args.seconds))
        if args.profile is not None:
            # An extra run, not a figure: the sampler's own CPU would be counted in the machine's.
            await bench.throughput(args.concurrency, args.seconds, profile=args.profile)
        preloaded: dict[str, list[float]] | None = None
        if args.preload:
            # The preloaded system is compared with one of its own on an empty database, each measured in turn,
            # block by block: the machine's speed drifts by a tenth and more within minutes, and a comparison of
            # two figures taken minutes apart measured the drift as much as the data. (Before the replicas come
            # and go: their consumer group's rebalances would slow the rounds.)
            scratch.append(Path(tempfile.mkdtemp(prefix="assent-bench-control-logs-")))
            control_system, control_prefix, control_db = await systems.new(scratch[-1])
            control = Bench(control_system, kafka, control_prefix, control_db)
            # As warm as the system under test: the same load for as long.
            await control.throughput(args.concurrency, WARM_UP_SECONDS + 2 * args.seconds)
            took = await preload(bench_db, args.preload)
            print(f"(preloaded {args.preload:,} resolved requests, decisions, turns and inbox rows in {took:.0f} s)")
            empty, preloaded = await interleaved(control, bench, args.rounds)
            control_system.stop()
            control = None
        if not args.no_replicas:
            bench.add_replicas()
            loads.append(await bench.throughput(args.concurrency, args.seconds))
            bench.stop_replicas()
        turns, sent = await bench.exactly_once()
        finished = True
    finally:
        bench.stop_replicas()
        system.stop()
        if control is not None:
            control.system.stop()
        servers.stop()
        if finished:
            for path in scratch:
                shutil.rmtree(path, ignore_errors=True)
            await systems.remove()
        else:
            print(f"the services' logs are kept in {scratch[0]}", file=sys.stderr)
            if servers.devstack is None:
                print(f"their databases and topics are kept: {', '.join(systems.names)}", file=sys.stderr)

    floor = raw.floor()
    print(f"\nApproval round on {os.cpu_count()} cores; telemetry {'off' if args.no_telemetry else 'on'}")
    print(f"(measured after a warm-up of {warm_up.rounds} rounds in {warm_up.seconds:.0f} s)")
    raw.print()
    title = f"Latency: {args.rounds} rounds one after another, one replica of each service"
    print_legs(title, legs, floor, raw.legs)
    if preloaded is not None:
        print_legs("The same on an empty database, in turn with the preloaded one below", empty, floor, raw.legs)
        print_legs(f"The same after preloading {args.preload:,} resolved requests", preloaded, floor, raw.legs)
        for leg in ("round", "GET …/pending"):
            before, after = ms(empty[leg])[0], ms(preloaded[leg])[0]
            change = 100 * (after / before - 1)
            print(f"  {leg} p50: {before:.2f} ms empty, {after:.2f} ms preloaded ({change:+.0f}%), measured in turn")
    print("\nThroughput (every apply answered 200, nothing left pending):")
    for load in loads:
        print_load(load)
    at_rest = ", ".join(f"{name} {value:.1f}" for name, value in resting.items())
    print(f"  at rest ({REST_SECONDS:.0f} s with nothing to do), CPU ms per second: {at_rest}")
    print(f"  every turn continued exactly once: {turns} paused turns, {sent} continuations on the topic")
    print("\nMemory (RSS MiB, the largest replica):")
    for service in rest:
        runs = " / ".join(f"{load.rss_after[service]:.0f}" for load in loads[:2])
        growth = loads[1].rss_after[service] - loads[0].rss_after[service]
        verdict = "no leak" if growth <= LEAK_MIB else "GROWS: a leak?"
        print(
            f"  {service:<10} at rest {rest[service]:.0f}, after run 1 / run 2 {runs} (growth {growth:+.1f}: {verdict})"
        )
    if bench.profiles:
        print(f"\nWhere each service spends its CPU (py-spy, one more run; flame graphs in {args.profile}):")
        for service, stacks in bench.profiles.items():
            print("  " + profiles.top_text(service, stacks, 8).replace("\n", "\n  ").rstrip())
    print(
        "\nTargets: ≥ 300 rounds/s sustained with 64 sessions; round p50 ≤ 20 ms, p99 ≤ 40 ms; each leg within 3x"
        " of its floor; preloaded within 20% of empty; RSS < 150 MiB at rest, < 250 MiB after load, no growth."
    )
    sys.stdout.flush()


if __name__ == "__main__":
    uvloop.run(main())
