"""The pieces of assent.metrics: the consumer's lag per partition, the HTTP counts by route template, the outbox's
backlog and relay latency."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import httpx
from aiokafka import TopicPartition
from fastapi import FastAPI
from prometheus_client import REGISTRY
from sqlalchemy import MetaData
from sqlalchemy.ext.asyncio import create_async_engine

from assent.http import HttpGuard
from assent.metrics import LagMeter, partition_lags
from assent.outbox import Envelope, Outbox, OutboxRelay, outbox_table


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class FakeConsumer:
    """What LagMeter reads of an aiokafka consumer: its assignment, high watermarks and positions."""

    def __init__(self, partitions: dict[TopicPartition, tuple[int | None, int | None]]) -> None:
        self.partitions = partitions  # highwater, position
        self._subscription = SimpleNamespace(
            subscription=SimpleNamespace(
                assignment=SimpleNamespace(state_value=lambda tp: SimpleNamespace(position=self.partitions[tp][1]))
            )
        )

    def assignment(self) -> set[TopicPartition]:
        return set(self.partitions)

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.partitions[tp][0]


def test_lag_is_highwater_less_position_for_each_partition_known() -> None:
    a0, a1, b0 = TopicPartition("p.a", 0), TopicPartition("p.a", 1), TopicPartition("p.b", 0)
    consumer = FakeConsumer({a0: (10, 4), a1: (7, 7), b0: (None, 0)})
    assert partition_lags(consumer) == {a0: 6, a1: 0}  # b0 not fetched yet: no high watermark


def test_the_lag_meter_names_topics_without_the_prefix_and_forgets_partitions_it_lost() -> None:
    now = [0.0]
    meter = LagMeter("lagtest.", every=0.2, clock=lambda: now[0])
    a0, a1 = TopicPartition("lagtest.orders", 0), TopicPartition("lagtest.orders", 1)
    consumer = FakeConsumer({a0: (10, 4), a1: (3, 1)})
    meter.update(consumer)
    assert value("assent_consumer_lag", topic="orders", partition="0") == 6
    assert value("assent_consumer_lag", topic="orders", partition="1") == 2

    consumer.partitions = {a0: (12, 12)}  # a1 went to another replica
    now[0] = 0.1
    meter.update(consumer)  # within the interval: not read
    assert value("assent_consumer_lag", topic="orders", partition="0") == 6
    now[0] = 0.3
    meter.update(consumer)
    assert value("assent_consumer_lag", topic="orders", partition="0") == 0
    assert REGISTRY.get_sample_value("assent_consumer_lag", {"topic": "orders", "partition": "1"}) is None


async def test_http_requests_are_counted_by_route_template_and_status() -> None:
    app = FastAPI()
    trail: list[tuple[str, str, int]] = []

    @app.get("/things/{thing_id}")
    async def thing(thing_id: str) -> dict[str, str]:
        return {"thing_id": thing_id}

    @app.get("/broken")
    async def broken() -> None:
        raise RuntimeError("bug")

    app.add_middleware(HttpGuard, trail=lambda method, route, status, _: trail.append((method, route, status)))
    route = "/things/{thing_id}"
    before = {
        "ok": value("assent_http_requests_total", method="GET", route=route, status="200"),
        "unmatched": value("assent_http_requests_total", method="GET", route="unmatched", status="404"),
        "other": value("assent_http_requests_total", method="other", route="unmatched", status="404"),
        "broken": value("assent_http_requests_total", method="GET", route="/broken", status="500"),
        "timed": value("assent_http_request_seconds_count", method="GET", route=route),
    }
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for n in range(3):
            assert (await client.get(f"/things/{n}")).status_code == 200
        assert (await client.get("/nowhere/1")).status_code == 404
        assert (await client.request("BREW", "/coffee")).status_code == 404
        assert (await client.get("/broken")).status_code == 500
    after = {
        "ok": value("assent_http_requests_total", method="GET", route=route, status="200"),
        "unmatched": value("assent_http_requests_total", method="GET", route="unmatched", status="404"),
        "other": value("assent_http_requests_total", method="other", route="unmatched", status="404"),
        "broken": value("assent_http_requests_total", method="GET", route="/broken", status="500"),
        "timed": value("assent_http_request_seconds_count", method="GET", route=route),
    }
    assert {k: after[k] - before[k] for k in before} == {"ok": 3, "unmatched": 1, "other": 1, "broken": 1, "timed": 3}
    assert (
        REGISTRY.get_sample_value(
            "assent_http_requests_total", {"method": "GET", "route": "/things/1", "status": "200"}
        )
        is None
    )
    assert trail == [("GET", route, 200)] * 3 + [
        ("GET", "unmatched", 404),
        ("other", "unmatched", 404),
        ("GET", "/broken", 500),
    ]


class Broker:
    """Publishes into a list, or refuses while ``down``."""

    def __init__(self) -> None:
        self.down = False
        self.published: list[bytes] = []

    async def publish(self, payload: bytes, **_: Any) -> asyncio.Future[None]:
        if self.down:
            raise ConnectionError("the broker is down")
        self.published.append(payload)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def envelopes(ids: Sequence[int]) -> list[Envelope]:
    return [Envelope(i, "t.topic", "k", b"{}", {}, "X") for i in ids]


async def test_the_outbox_backlog_counts_rows_until_kafka_acknowledges_them() -> None:
    outbox = Outbox(outbox_table(MetaData(schema="metrics_test")), "t.")
    broker = Broker()
    engine = create_async_engine("postgresql+asyncpg://nobody@127.0.0.1:1/none")  # never connected
    relay = OutboxRelay(engine, outbox, broker)  # type: ignore[arg-type]
    try:
        published = value("assent_outbox_published_total", path="fast")
        timed = value("assent_outbox_relay_seconds_count")
        outbox._hand_over(envelopes([1, 2]))
        outbox._hand_over(envelopes([3]))
        assert relay.backlog() == 3 and value("assent_outbox_backlog") >= 3

        broker.down = True
        try:
            await relay.publish_committed(delete=False)
        except ConnectionError:
            pass
        assert relay.backlog() == 3  # kept for the next attempt
        assert value("assent_outbox_relay_seconds_count") == timed

        broker.down = False
        outbox._hand_over(envelopes([4]))
        await relay.publish_committed(delete=False)
        assert relay.backlog() == 0 and len(broker.published) == 4
        assert value("assent_outbox_published_total", path="fast") - published == 4
        assert value("assent_outbox_relay_seconds_count") - timed == 1  # one publish, timed from its oldest row
    finally:
        await engine.dispose()


async def test_a_write_waits_until_kafka_holds_what_was_committed_before_it_and_no_longer() -> None:
    outbox = Outbox(outbox_table(MetaData(schema="metrics_test")), "t.")
    broker = Broker()
    engine = create_async_engine("postgresql+asyncpg://nobody@127.0.0.1:1/none")  # never connected
    relay = OutboxRelay(engine, outbox, broker)  # type: ignore[arg-type]
    try:
        assert await outbox.until_published(0.01)  # nothing committed: nothing to wait for
        outbox._hand_over(envelopes([1]))
        outbox._hand_over(envelopes([2]))
        waiting = asyncio.create_task(outbox.until_published(30))
        broker.down = True
        with contextlib.suppress(ConnectionError):
            await relay.publish_committed(delete=False)
        assert not await outbox.until_published(0.01)  # refused: still not in Kafka
        assert not waiting.done()
        broker.down = False
        outbox._hand_over(envelopes([3]))  # after the wait began: the retry publishes it with the others
        await relay.publish_committed(delete=False)
        assert await waiting
        assert (outbox.handed_over, outbox.published) == (3, 3)
    finally:
        await engine.dispose()
