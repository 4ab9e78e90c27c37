"""The consumer wiring and its failure policy, in memory (FastStream's TestKafkaBroker): good messages reach
the handler, unreadable ones go to the dead-letter topic at once, a failing handler is tried a bounded number
of times and then dead-lettered, an outage is retried until it ends, and the consumer carries on."""

from collections.abc import Sequence
from typing import Any

import asyncpg
import pytest
from faststream.kafka import TestKafkaBroker
from faststream.kafka.annotations import KafkaMessage
from sqlalchemy.exc import DataError, DBAPIError

from assent.contracts import Message, StepEnded
from assent.messaging import bootstrap_list, broker_answers, make_broker
from assent.runtime.consumer import (
    DEAD_LETTERED,
    FailurePolicy,
    Received,
    backoff,
    batch_span,
    is_outage,
    subscribe,
)
from assent.settings import GroupTimeouts, ServiceSettings
from assent.topics import STUDIO_TURNS

FAST = FailurePolicy(max_attempts=3, backoff_initial=0.001, backoff_max=0.002)


def step(n: int) -> StepEnded:
    return StepEnded(session_id="s", turn_id="t", step=n, tool_call_ids=("c",))


def test_a_bootstrap_list_of_several_brokers_reaches_the_clients_as_several_addresses() -> None:
    assert bootstrap_list("127.0.0.1:1, 127.0.0.1:2,127.0.0.1:3,") == ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
    broker = make_broker("127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", client_id="test", idempotent=False)
    assert broker._connection_kwargs["bootstrap_servers"] == ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]


async def test_good_bad_and_hopeless_messages() -> None:
    broker = make_broker("127.0.0.1:9", client_id="test", idempotent=False)
    handled: list[Message] = []
    dead: list[tuple[bytes, dict[str, Any]]] = []

    attempts: dict[int, int] = {}

    async def handler(batch: Sequence[Received]) -> None:
        [received] = batch  # the test broker delivers one message per fetch
        message = received.message
        assert isinstance(message, StepEnded)
        attempts[message.step] = attempts.get(message.step, 0) + 1
        if message.step == 7:
            raise DataError("INSERT ...", {}, Exception("value out of range"))
        if message.step == 8:
            raise KeyError("a bug")
        if message.step == 9 and attempts[9] < 6:
            raise ConnectionRefusedError("the database is down")
        handled.append(message)

    subscribe(broker, {STUDIO_TURNS: handler}, prefix="p.", group_id="g", policy=FAST)
    before = DEAD_LETTERED.labels("studio.turns", "g", "handler_failed")._value.get()

    @broker.subscriber(STUDIO_TURNS.dlq_name("p."))
    async def capture(message: KafkaMessage) -> None:
        dead.append((message.body, dict(message.headers)))

    first, hopeless, buggy, outage, last = step(1), step(7), step(8), step(9), step(2)
    async with TestKafkaBroker(broker) as test_broker:
        topic = STUDIO_TURNS.full_name("p.")
        await test_broker.publish(first.to_bytes(), topic, key=b"s")
        await test_broker.publish(b"{not json", topic, key=b"s")
        await test_broker.publish(b'{"type": "ToolCall", "v": 1}', topic, key=b"s")  # not this topic's message
        await test_broker.publish(hopeless.to_bytes(), topic, key=b"s")
        await test_broker.publish(buggy.to_bytes(), topic, key=b"s")
        await test_broker.publish(outage.to_bytes(), topic, key=b"s")
        await test_broker.publish(last.to_bytes(), topic, key=b"s")

    assert handled == [first, outage, last]
    assert attempts == {1: 1, 7: 3, 8: 3, 9: 6, 2: 1}  # bounded for failures, unbounded for an outage
    bodies = [body for body, _ in dead]
    assert bodies == [b"{not json", b'{"type": "ToolCall", "v": 1}', hopeless.to_bytes(), buggy.to_bytes()]
    errors = [headers["x-dlq-error"] for _, headers in dead]
    assert "not JSON" in errors[0] and "does not belong" in errors[1] and "value out of range" in errors[2]
    assert errors[3] == "KeyError: 'a bug'"
    assert [headers["x-dlq-attempts"] for _, headers in dead] == ["0", "0", "3", "3"]
    assert {headers["x-dlq-topic"] for _, headers in dead} == {"p.studio.turns"}
    assert DEAD_LETTERED.labels("studio.turns", "g", "handler_failed")._value.get() == before + 2


def _caused_by(error: BaseException, cause: BaseException) -> BaseException:
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (ConnectionRefusedError(), True),
        (TimeoutError(), True),
        # PostgreSQL shutting down answers 57P03, which SQLAlchemy wraps as a plain DBAPIError: retried without
        # bound, never dead-lettered after a few attempts.
        (
            _caused_by(
                DBAPIError("SELECT 1", {}, Exception("shutting down")),
                asyncpg.exceptions.CannotConnectNowError("the database system is shutting down"),
            ),
            True,
        ),
        (asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"), True),
        (asyncpg.exceptions.InterfaceError("connection is closed"), True),
        (
            asyncpg.exceptions.InternalClientError("cannot switch to state 12; another operation (2) is in progress"),
            True,
        ),
        (KeyError("x"), False),
        (UnicodeEncodeError("utf-8", "x", 0, 1, "surrogate"), False),
        (DataError("s", {}, Exception("out of range")), False),
        (_caused_by(DBAPIError("INSERT", {}, Exception("dup")), asyncpg.exceptions.UniqueViolationError("dup")), False),
    ],
)
def test_outages_are_told_from_bad_messages(error: BaseException, outage: bool) -> None:
    assert is_outage(error) is outage


def test_backoff_grows_and_is_capped_with_jitter() -> None:
    policy = FailurePolicy(max_attempts=10, backoff_initial=0.1, backoff_max=1.0)
    for attempt, ceiling in ((1, 0.1), (2, 0.2), (3, 0.4), (8, 1.0)):
        waits = {backoff(attempt, policy) for _ in range(50)}
        assert all(ceiling / 2 <= w <= ceiling for w in waits) and len(waits) > 1


async def test_a_publish_carries_its_trace_on_whether_the_trace_is_recorded_or_not() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from assent.telemetry import attach_carrier, detach

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    broker = make_broker("127.0.0.1:9", client_id="test", idempotent=False, tracer_provider=provider)
    seen: list[str] = []

    @broker.subscriber(STUDIO_TURNS.full_name("p."))
    async def capture(message: KafkaMessage) -> None:
        seen.append(message.headers["traceparent"])

    unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    sampled = "00-1bf7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"
    async with TestKafkaBroker(broker) as test_broker:
        for carrier in (unsampled, sampled):
            token = attach_carrier({"traceparent": carrier})
            try:
                await test_broker.publish(step(1).to_bytes(), STUDIO_TURNS.full_name("p."), key=b"s")
            finally:
                detach(token)
    # Not recorded: the same context goes on, and no span is made for it.
    assert seen[0] == unsampled
    # Recorded: the publish gets its spans, and the message carries the publish's own context in that trace.
    assert seen[1].split("-")[1] == sampled.split("-")[1] and seen[1].endswith("-01") and seen[1] != sampled
    spans = exporter.get_finished_spans()
    assert spans and {format(span.context.trace_id, "032x") for span in spans} == {sampled.split("-")[1]}


def _recording() -> tuple[Any, Any]:
    """An in-memory exporter, and a tracer of a provider that records every span into it."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider.get_tracer("test")


def test_a_consumed_message_gets_a_span_only_when_its_trace_is_recorded() -> None:
    from opentelemetry import trace

    exporter, tracer = _recording()
    unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    sampled = "00-1bf7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"
    inside: list[trace.SpanContext] = []
    for carrier in (unsampled, sampled, None):
        received = Received(step(1), {"traceparent": carrier} if carrier else {}, tracer, "studio.turns")
        with received.span():
            inside.append(trace.get_current_span().get_span_context())
    # Not recorded: the handler runs in the producer's own context, so what it publishes carries that trace on.
    assert format(inside[0].trace_id, "032x") == unsampled.split("-")[1] and not inside[0].trace_flags.sampled
    assert format(inside[0].span_id, "016x") == unsampled.split("-")[2]
    # Recorded: a consumer span of its own, in the producer's trace.
    assert format(inside[1].trace_id, "032x") == sampled.split("-")[1] and inside[1].trace_flags.sampled
    assert format(inside[1].span_id, "016x") != sampled.split("-")[2]
    # No trace at all: a span that starts one (recorded here, the provider samples everything).
    assert inside[2].is_valid and inside[2].trace_id not in (inside[0].trace_id, inside[1].trace_id)
    spans = exporter.get_finished_spans()
    assert [(span.name, span.kind) for span in spans] == [("studio.turns process", trace.SpanKind.CONSUMER)] * 2
    assert spans[0].context.trace_id == inside[1].trace_id


def test_a_batch_runs_in_the_span_of_its_one_message_or_in_one_linked_to_its_recorded_messages() -> None:
    from opentelemetry import trace

    exporter, tracer = _recording()
    unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    first = "00-1bf7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"
    second = "00-2bf7651916cd43dd8448eb211c80319c-d7ad6b7169203331-01"

    def received(*carriers: str) -> list[Received]:
        return [Received(step(n), {"traceparent": c}, tracer, "studio.turns") for n, c in enumerate(carriers)]

    # One message: its own span, once, however often its span is asked for inside it.
    [alone] = received(first)
    with batch_span([alone]), alone.span():
        inner = trace.get_current_span().get_span_context()
    [span] = exporter.get_finished_spans()
    assert span.context.span_id == inner.span_id and format(span.context.trace_id, "032x") == first.split("-")[1]
    exporter.clear()

    # Several: one span in the first recorded message's trace, linked to the other recorded ones.
    with batch_span(received(unsampled, first, second)):
        batch = trace.get_current_span().get_span_context()
    [span] = exporter.get_finished_spans()
    assert span.context.span_id == batch.span_id and format(batch.trace_id, "032x") == first.split("-")[1]
    assert [format(link.context.trace_id, "032x") for link in span.links] == [second.split("-")[1]]
    assert span.attributes is not None and span.attributes["messaging.batch.message_count"] == 3
    exporter.clear()

    # None recorded: no span (it would record nothing).
    with batch_span(received(unsampled, unsampled)):
        assert not trace.get_current_span().get_span_context().is_valid
    assert exporter.get_finished_spans() == ()


async def test_the_readiness_ping_asks_for_one_topic_not_the_whole_cluster() -> None:
    class Admin:
        """Records what the broker is asked for; ``describe_cluster`` would read every topic's metadata."""

        def __init__(self) -> None:
            self.asked: list[list[str]] = []

        async def describe_topics(self, topics: list[str]) -> list[dict[str, Any]]:
            self.asked.append(list(topics))
            return [{"topic": topic, "error_code": 0, "partitions": []} for topic in topics]

        async def describe_cluster(self) -> dict[str, Any]:
            raise AssertionError("reads the metadata of every topic in the cluster")

    admin = Admin()
    assert await broker_answers(admin, "p.studio.sessions")
    assert admin.asked == [["p.studio.sessions"]]


def test_the_consumer_group_notices_a_killed_replica_within_the_timeouts_the_settings_choose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bound the documentation states: a killed replica's session expires after 6 s, and the others join again
    within the rebalance timeout, 6 s (usually within a heartbeat, 2 s). The consumer is built with them."""
    defaults = ServiceSettings().group_timeouts()
    assert defaults == GroupTimeouts(session_timeout_ms=6_000, heartbeat_interval_ms=2_000, rebalance_timeout_ms=6_000)
    assert defaults.max_poll_interval_ms == 300_000 and defaults.failover_bound_ms == 12_000

    broker = make_broker("127.0.0.1:9", client_id="test", idempotent=False)

    async def handler(batch: Sequence[Received]) -> None:
        pass

    offsets = subscribe(broker, {STUDIO_TURNS: handler}, prefix="p.", group_id="g", timeouts=defaults)
    # What FastStream keeps to build the aiokafka consumer with when the broker starts.
    built_with = offsets.subscriber._connection_args
    assert {k: built_with[k] for k in defaults.consumer_kwargs()} == {
        "session_timeout_ms": 6_000,
        "heartbeat_interval_ms": 2_000,
        "rebalance_timeout_ms": 6_000,
        "max_poll_interval_ms": 300_000,
    }

    monkeypatch.setenv("ASSENT_KAFKA_SESSION_TIMEOUT_MS", "10000")
    monkeypatch.setenv("ASSENT_KAFKA_HEARTBEAT_INTERVAL_MS", "3000")
    chosen = ServiceSettings().group_timeouts()
    assert (chosen.session_timeout_ms, chosen.heartbeat_interval_ms, chosen.failover_bound_ms) == (
        10_000,
        3_000,
        16_000,
    )
    monkeypatch.setenv("ASSENT_KAFKA_HEARTBEAT_INTERVAL_MS", "10000")
    with pytest.raises(ValueError, match="shorter than the session timeout"):
        ServiceSettings().group_timeouts()
