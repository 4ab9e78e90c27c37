"""Every service's ``/metrics`` after one approval round: each family of :mod:`assent.metrics` moved, by exactly what
the round did where that is known.

The round: a coach opens a session and proposes a memory edit, the operator applies it. The test also sends one
message no service can read to ``studio.sessions`` (every service consumes it), which each dead-letters.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from assent.kinds import KINDS
from assent.topics import (
    DECISIONS,
    PROPOSALS_DECIDED,
    PROPOSALS_OUTCOMES,
    PROPOSALS_PROPOSED,
    STUDIO_SESSIONS,
    TOOL_CALLS,
)
from gateway.adapters.metrics import org_label
from tests.conftest import Stack, wait_for
from tests.test_memory_edits import memory, new_world, open_turn, propose, wait_pending
from tests.test_monitoring import monitored_names

pytestmark = pytest.mark.integration

OWNERS = ("edits", "deployer", "connections", "routines", "access")
Labels = frozenset[tuple[str, str]]
Samples = dict[str, dict[Labels, float]]


def parse(text: str) -> Samples:
    """Every sample of a scrape: by sample name (``…_total``, ``…_count``), by its labels."""
    samples: Samples = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name][frozenset(sample.labels.items())] = sample.value
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(value for key, value in samples.get(name, {}).items() if wanted <= key)


class Scraper:
    """Scrapes the services' ``/metrics``, counting its own scrapes (each is a request the next one counts)."""

    def __init__(self, stack: Stack, http: httpx.AsyncClient) -> None:
        self.urls = {name: process.url for name, process in stack.system.processes.items()}
        self.http = http
        self.scrapes: dict[str, int] = defaultdict(int)

    async def one(self, service: str) -> Samples:
        response = await self.http.get(f"{self.urls[service]}/metrics")
        assert response.status_code == 200, response.text
        self.scrapes[service] += 1
        return parse(response.text)

    async def all(self) -> dict[str, Samples]:
        scraped = await asyncio.gather(*(self.one(service) for service in self.urls))
        return dict(zip(self.urls, scraped, strict=True))


def moved(before: Mapping[str, Samples], after: Mapping[str, Samples], service: str, name: str, **labels: str) -> float:
    return total(after[service], name, **labels) - total(before[service], name, **labels)


async def test_each_family_moves_by_what_a_round_did(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach, httpx.AsyncClient(timeout=30) as plain:
        scraper = Scraper(stack, plain)
        world = await new_world(http)
        before = await scraper.all()

        turn = await open_turn(coach, world)
        result = await propose(turn, world.agent_id, "Exported.\n", (await memory(http, world.agent_id))["version"])
        assert result.ok, result.error
        sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)

        # The gateway's pending decisions: this organisation's one request, under a hash of its id.
        pending = await scraper.one("gateway")
        org = org_label(world.org_id)
        mine = {key: value for key, value in pending["assent_pending_decisions"].items() if ("org", org) in key}
        assert mine == {frozenset({("org", org), ("section", KINDS["memory"].section)}): 1.0}, mine
        assert world.org_id not in str(pending["assent_pending_decisions"])

        decided = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert decided.status_code == 200, decided.text

        producer = AIOKafkaProducer(bootstrap_servers=stack.endpoints.kafka)
        await producer.start()
        try:
            await producer.send_and_wait(stack.topic(STUDIO_SESSIONS.name), b"not json", key=b"x")
            partitions = {
                topic.name: await producer.partitions_for(stack.topic(topic.name))
                for topic in (TOOL_CALLS["edits"], STUDIO_SESSIONS)
            }
        finally:
            await producer.stop()

        async def settled() -> dict[str, Samples] | None:
            """Once every service dead-lettered the unreadable message, the gateway heard the outcome, and every
            consumer fetched all there was (and so every owner handled the decision before it)."""
            now = await scraper.all()
            done = all(
                moved(before, now, service, "assent_messages_dead_lettered_total", topic=STUDIO_SESSIONS.name) == 1
                for service in now
            )
            done = (
                done
                and moved(before, now, "gateway", "assent_messages_handled_total", topic=PROPOSALS_OUTCOMES.name) == 1
            )
            done = done and all(
                value == 0 for service in now for value in now[service].get("assent_consumer_lag", {}).values()
            )
            done = done and all(total(now[service], "assent_outbox_backlog") == 0 for service in now)
            return now if done else None

        after = await wait_for(settled, timeout=30, interval=0.5)
        scraped = dict(scraper.scrapes)  # ``before`` was each service's first, ``after`` its last so far
        for service in after:
            readyz = await plain.get(f"{scraper.urls[service]}/readyz")
            assert readyz.status_code == 200, readyz.text
        ready = await scraper.all()

    services = set(after)
    assert services == {*OWNERS, "gateway"}

    # Messages handled: the session opened reaches every service once; the proposal and its outcome the gateway;
    # the call the edits service; the decision its owner only, on its own topic (every consumer has fetched all
    # there was: the other owners had it to read nowhere).
    for service in services:
        assert moved(before, after, service, "assent_messages_handled_total", topic=STUDIO_SESSIONS.name) == 1, service
    assert moved(before, after, "edits", "assent_messages_handled_total", topic=TOOL_CALLS["edits"].name) == 1
    assert moved(before, after, "gateway", "assent_messages_handled_total", topic=PROPOSALS_PROPOSED.name) == 1
    assert moved(before, after, "edits", "assent_messages_handled_total", topic=DECISIONS["edits"].name) == 1
    # Every owner read the session's opening (above); the one its call reached keeps the session, and the connections
    # service, whose Logins popover answers for any session; no other.
    conn = await asyncpg.connect(stack.database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        kept = {
            owner: await conn.fetchval(f'SELECT count(*) FROM "{owner}".sessions WHERE session_id = $1', sid)
            for owner in OWNERS
        }
    finally:
        await conn.close()
    assert kept == {owner: int(owner in ("edits", "connections")) for owner in OWNERS}, kept
    for owner in OWNERS:
        assert moved(before, after, owner, "assent_messages_handled_total", topic=PROPOSALS_DECIDED.name) == 0, owner
        decisions = [topic.name for topic in DECISIONS.values()]
        handled = sum(moved(before, after, owner, "assent_messages_handled_total", topic=t) for t in decisions)
        assert handled == (1 if owner == "edits" else 0), owner
    handlers = {dict(key)["handler"] for key in after["edits"]["assent_messages_handled_total"]}
    assert {"session", "tool_call", "decision"} <= handlers, handlers

    # Failed and dead-lettered: the unreadable message, once per service, and nothing else.
    for service in services:
        assert moved(before, after, service, "assent_messages_failed_total", reason="malformed") == 1, service
        assert moved(before, after, service, "assent_messages_failed_total", reason="error") == 0, service
        assert moved(before, after, service, "assent_messages_dead_lettered_total", reason="malformed") == 1, service

    # Handler latency: a batch is timed once, so at least one and at most one per message handled.
    for service in services:
        batches = moved(before, after, service, "assent_handler_seconds_count", topic=STUDIO_SESSIONS.name)
        assert batches == 1, service
        assert moved(before, after, service, "assent_handler_seconds_sum", topic=STUDIO_SESSIONS.name) > 0, service

    # Consumer lag: a series for every partition of every topic each service consumes (one replica holds all),
    # and nothing left to fetch.
    lag: dict[str, set[int]] = defaultdict(set)
    for key in after["edits"]["assent_consumer_lag"]:
        lag[dict(key)["topic"]].add(int(dict(key)["partition"]))
    for name, numbers in partitions.items():
        assert lag[name] == numbers, lag

    # The outbox: the edits service published the proposal and what applying it caused, the gateway the decision;
    # each publish was timed, and nothing is left waiting.
    for service in ("edits", "gateway"):
        published = moved(before, after, service, "assent_outbox_published_total", path="fast")
        assert published >= 1, service
        timed = moved(before, after, service, "assent_outbox_relay_seconds_count")
        assert 1 <= timed <= published, service
        assert total(after[service], "assent_outbox_backlog") == 0
        assert total(after[service], "assent_outbox_oldest_seconds") == 0

    # HTTP: the decision by its route's template, once; every service counted the test's own scrapes.
    route = "/api/studio/sessions/{session_id}/edits/{seq}"
    assert moved(before, after, "gateway", "assent_http_requests_total", method="POST", route=route, status="200") == 1
    assert not [
        key
        for key in after["gateway"]["assent_http_requests_total"]
        if ("route", f"/api/studio/sessions/{sid}/edits/{seq}") in key
    ]
    for service in services:
        # ``after`` counted every scrape before it, ``before`` none: each one from ``before`` on, exactly.
        scrapes = scraped[service] - 1
        got = moved(before, after, service, "assent_http_requests_total", method="GET", route="/metrics", status="200")
        assert got == scrapes, (service, got, scrapes)
        assert moved(before, after, service, "assent_http_request_seconds_count", route="/metrics") == scrapes
        # Each service answered its readiness probe ready on both checks.
        assert total(ready[service], "assent_ready", check="database") == 1, service
        assert total(ready[service], "assent_ready", check="kafka") == 1, service

    # The decided request is no longer pending: its series is gone.
    assert not [key for key in after["gateway"].get("assent_pending_decisions", {}) if ("org", org) in key]

    # Every metric the alert rules and the dashboard (deploy/monitoring) name is one the services serve.
    served = {name for scrape in [*after.values(), pending] for name, series in scrape.items() if series}
    assert monitored_names() - served == set()
