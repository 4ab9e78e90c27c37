"""Every service comes back by itself after PostgreSQL restarts under load, and nothing is lost or doubled.

Every service of ``services.toml`` runs as its own process on a PostgreSQL of its own (the devstack's embedded
one, in a temp dir on its own port), with Kafka and Redis from the shared ``endpoints``. A hundred coach sessions
run approval rounds without pause while PostgreSQL goes down, in each of three ways: a fast shutdown, ``SIGKILL``
of the postmaster (an immediate stop: no shutdown checkpoint, recovery at the next start) and a fast shutdown
that lasts a minute. A client does what the API asks of it: a ``503`` with ``"retry": true`` is tried again.

Afterwards every service is ready again within seconds of PostgreSQL answering, every session completes a new
round, a deployer route answers, and what the rounds wrote is exact: each agent's Memory moved by one version per
round, its history holds each round's tool call once, and the continuations topic holds one continuation per turn.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer

from assent.coach import CoachClient, CoachSession
from assent_devstack import Service, start_postgres
from assent_devstack.system import System, build_system, free_port
from tests.conftest import API_TOKENS, LOG_DIRS, SECRETS, Endpoints, as_admin_of, fresh_prefix, wait_for
from tests.issuer import test_issuer

pytestmark = pytest.mark.integration

SESSIONS = 100
READY_WITHIN_SECONDS = 20.0
"""How soon after PostgreSQL answers again every service must be ready."""
LOG_BYTES_PER_OUTAGE = 64 * 1024
"""What a service may log about one outage (up to a minute), however many requests and messages it failed."""


@dataclass
class Restartable:
    """Every service on a PostgreSQL that the test stops and starts."""

    state_dir: Path
    port: int
    postgres: Service
    system: System
    prefix: str

    def kafka(self) -> str:
        return self.system.env["KAFKA_BOOTSTRAP_SERVERS"]

    async def restart_postgres(self, how: str, down_seconds: float) -> float:
        """Stop PostgreSQL (``fast``: SIGINT, a fast shutdown; ``immediate``: SIGKILL of the postmaster), keep it
        down for ``down_seconds``, start it again on the same port and data; returns when it answered again."""
        if how == "fast":
            await asyncio.to_thread(self.postgres.stop)
        else:
            os.kill(self.postgres.pid, signal.SIGKILL)
            # Reaped (where the postmaster is this process's child): a zombie's pid in postmaster.pid would pass
            # for a running server.
            await wait_for(lambda: not self.postgres.alive(), timeout=30)
        await asyncio.sleep(down_seconds)
        deadline = time.monotonic() + 60
        while True:
            try:
                # After SIGKILL the backends leave on their own as they notice; until they have, the shared
                # memory they hold keeps a new postmaster from starting.
                self.postgres = await asyncio.to_thread(start_postgres, self.state_dir, self.port)
                return time.monotonic()
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)


@pytest.fixture(scope="module")
def restartable(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restartable]:
    state_dir = tmp_path_factory.mktemp("restarted-postgres")
    log_dir = tmp_path_factory.mktemp("restart-logs")
    port = free_port()
    postgres = start_postgres(state_dir, port)
    prefix = fresh_prefix("pg")
    system = build_system(
        kafka_bootstrap_servers=endpoints.kafka,
        database_url=postgres.endpoint,
        redis_url=endpoints.redis_url,
        log_dir=log_dir,
        topic_prefix=prefix,
        api_tokens=API_TOKENS,
        # A decision waits out the outage rather than answering 504 while the owner catches up.
        extra_env={**test_issuer().env(), "ASSENT_DECISION_TIMEOUT_SECONDS": "120"},
    )
    SECRETS.add(system.env["ASSENT_SERVICE_KEY"])
    LOG_DIRS.append(log_dir)
    running = Restartable(state_dir, port, postgres, system, prefix)
    try:
        system.start()
        yield running
    finally:
        system.stop()
        running.postgres.stop()


async def retried(send: Any, *, what: str, until_found: bool = False) -> httpx.Response:
    """``send()`` until the answer is not a 503 asking to try again (nor a dropped connection; with
    ``until_found``, nor a 404: the gateway has not projected it yet)."""
    deadline = time.monotonic() + 180
    while True:
        try:
            response: httpx.Response = await send()
        except httpx.TransportError:
            response = None  # type: ignore[assignment]
        if (
            response is not None
            and not (response.status_code == 503 and response.json().get("retry"))
            and not (until_found and response.status_code == 404)
        ):
            return response
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still unavailable after 180 s ({response and response.text})")
        await asyncio.sleep(0.2)


@dataclass
class Operator:
    """One coach session on an agent of its own, running approval rounds one after another."""

    session: CoachSession
    agent_id: str
    rounds: int = 0
    tool_call_ids: list[str] = field(default_factory=list)

    async def round(self, http: httpx.AsyncClient) -> None:
        turn = self.session.begin_turn()
        call = await turn.send(
            "studio_edit_memory",
            {
                "agent_id": self.agent_id,
                "content": f"round {self.rounds}\n",
                "base_version": self.rounds + 1,
                "reason": "restarts",
            },
        )
        result = await turn.result(call, timeout=180)
        assert result.ok, result.error
        await turn.end_step()
        url = f"/api/studio/sessions/{self.session.session_id}/edits/{call.seq}"
        card = await retried(lambda: http.get(url), what=url, until_found=True)  # the operator sees it first
        assert card.status_code == 200, card.text
        answer = await retried(lambda: http.post(url, json={"decision": "apply"}), what=url)
        if answer.status_code == 422:  # decided by an earlier try whose answer was lost: it must say applied
            card = await retried(lambda: http.get(url), what=url)
            assert card.json()["status"] == "applied", card.text
        else:
            assert answer.status_code == 200, answer.text
            assert answer.json()["outcome"] == "applied", answer.text
        await turn.continuation(timeout=180)
        self.tool_call_ids.append(call.tool_call_id)
        self.rounds += 1


@dataclass
class Load:
    """``SESSIONS`` operators of one organisation, each on its own agent of one guild."""

    http: httpx.AsyncClient
    operators: list[Operator]
    org_id: str


@pytest.fixture(scope="module")
async def load(restartable: Restartable) -> AsyncIterator[Load]:
    gateway = restartable.system.gateway.url
    async with (
        httpx.AsyncClient(base_url=gateway, timeout=60, limits=httpx.Limits(max_connections=SESSIONS)) as http,
        CoachClient(restartable.kafka(), topic_prefix=restartable.prefix) as coach,
    ):
        n = uuid.uuid4().hex[:8]
        org_id, guild_id = f"org_{n}", f"guild_{n}"
        as_admin_of(http, org_id)
        for path, body in (
            ("/api/workspace/orgs", {"org_id": org_id, "name": "Restarts"}),
            ("/api/workspace/guilds", {"guild_id": guild_id, "org_id": org_id, "name": "Support"}),
        ):
            assert (await http.post(path, json=body)).status_code == 201

        async def operator(i: int) -> Operator:
            agent_id = f"agent_{n}_{i}"
            body = {"agent_id": agent_id, "org_id": org_id, "guild_id": guild_id, "name": f"A{i}", "memory": "-\n"}
            created = await http.post("/api/workspace/agents", json=body)
            assert created.status_code == 201, created.text
            session = await coach.open_session(org_id=org_id, source_guild_id=guild_id, operator_user_id="olga")
            return Operator(session, agent_id)

        operators = list(await asyncio.gather(*(operator(i) for i in range(SESSIONS))))
        yield Load(http, operators, org_id)


async def rounds_until(load: Load, stop: asyncio.Event) -> None:
    """Every operator runs rounds until ``stop`` is set, then finishes the round it is in."""

    async def run(operator: Operator) -> None:
        while not stop.is_set():
            await operator.round(load.http)

    await asyncio.gather(*(run(operator) for operator in load.operators))


async def ready(http: httpx.AsyncClient, url: str) -> bool:
    try:
        return (await http.get(f"{url}/readyz")).status_code == 200
    except httpx.TransportError:
        return False


async def continuations(kafka: str, topic: str) -> collections.Counter[tuple[str, str, int]]:
    """How many ``TurnContinuation`` messages ``topic`` holds per (session, turn, step), read from the start."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    counts: collections.Counter[tuple[str, str, int]] = collections.Counter()
    try:
        partitions = await wait_for(consumer.assignment, timeout=30)
        ends = await consumer.end_offsets(list(partitions))
        while any([await consumer.position(tp) < end for tp, end in ends.items()]):
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                for record in records:
                    body = json.loads(record.value)
                    counts[(body["session_id"], body["turn_id"], body["step"])] += 1
    finally:
        await consumer.stop()
    return counts


@pytest.mark.parametrize(("how", "down_seconds"), [("fast", 5.0), ("immediate", 0.0), ("fast", 60.0)])
async def test_every_service_comes_back_after_postgres_restarts_under_load(
    restartable: Restartable, load: Load, how: str, down_seconds: float
) -> None:
    http = load.http
    urls = [process.url for process in restartable.system.processes.values()]
    stop = asyncio.Event()
    running = asyncio.create_task(rounds_until(load, stop))
    try:
        before = sum(operator.rounds for operator in load.operators)
        await wait_for(lambda: sum(o.rounds for o in load.operators) >= before + SESSIONS, timeout=120)

        sizes = {process.module: process.log_path.stat().st_size for process in restartable.system.processes.values()}
        answering = await restartable.restart_postgres(how, down_seconds)

        async def all_ready() -> bool:
            return all(await asyncio.gather(*(ready(http, url) for url in urls)))

        await wait_for(all_ready, timeout=READY_WITHIN_SECONDS, interval=0.2)
        assert time.monotonic() - answering < READY_WITHIN_SECONDS
        # An outage is a few lines per failure type and interval, with counts, not a line per request.
        grown = {
            process.module: process.log_path.stat().st_size - sizes[process.module]
            for process in restartable.system.processes.values()
        }
        assert all(size < LOG_BYTES_PER_OUTAGE for size in grown.values()), grown

        # A new round, begun after every service is ready again, completes in every session.
        after = {id(operator): operator.rounds + 1 for operator in load.operators}
        await wait_for(lambda: all(o.rounds >= after[id(o)] for o in load.operators), timeout=180, interval=0.2)
    finally:
        stop.set()
        await running

    agent = load.operators[0].agent_id
    filed = await http.post(f"/api/workspace/agents/{agent}/issues", json={"title": "After the restart"})
    assert filed.status_code == 201, filed.text
    read = await http.get(f"/api/workspace/agents/{agent}/issues/{filed.json()['issue_id']}")
    assert read.status_code == 200 and read.json()["title"] == "After the restart", read.text

    for operator in load.operators:
        memory = (await http.get(f"/api/workspace/agents/{operator.agent_id}/memory")).json()
        assert memory["version"] == operator.rounds + 1, (operator.agent_id, memory, operator.rounds)
        history = (await http.get(f"/api/workspace/agents/{operator.agent_id}/memory/history")).json()
        written = [revision["tool_call_id"] for revision in history if revision["tool_call_id"] is not None]
        assert sorted(written) == sorted(operator.tool_call_ids), operator.agent_id

    counts = await continuations(restartable.kafka(), f"{restartable.prefix}studio.continuations")
    ours = {operator.session.session_id for operator in load.operators}
    mine = {key: n for key, n in counts.items() if key[0] in ours}
    assert set(mine.values()) == {1}, "a turn was continued more than once"
    assert len(mine) == sum(operator.rounds for operator in load.operators)
