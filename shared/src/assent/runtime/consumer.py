"""Consumers with one failure policy, written once (after arroyo's ``DlqPolicy``), fed in batches.

Delivery contract of :func:`subscribe`: a message is handed to the handler at least once, in a batch of what
one fetch returned (one message when one was waiting); the fetch's offsets are committed once, after the
handler returns, so the handler must be idempotent (the runtime's unit of work claims the envelope ids in
the inbox). What happens when a message cannot be handled:

- **Malformed** (not JSON, nested too deep, unknown type or version, invalid fields): published at once to
  ``<topic>.dlq`` with the original bytes and headers and the reason in ``x-dlq-error``; the consumer
  carries on with the next message. A topic with an answer for what it cannot read (``answer_malformed``: an
  owner's tool calls, :mod:`assent.runtime.malformed_calls`) answers such a message instead, when the answer
  can be made, and does not dead-letter it.
- **The handler fails** (a bug, a value the database refuses, a message that cannot be encoded): the batch
  is handled again one message at a time, and the failing message is retried ``max_attempts`` times in all,
  with exponential backoff and jitter, then dead-lettered the same way with ``x-dlq-attempts``; the other
  messages of its batch are handled, and the partition moves on.
- **The infrastructure is down** (the database or the broker does not answer): retried without bound, with
  backoff capped at ``backoff_max``, because dead-lettering would lose messages that are fine. Readiness
  reports the outage meanwhile.

``assent_messages_dead_lettered_total`` and ``assent_handler_retries_total`` (Prometheus, at ``/metrics``)
count what this policy did, by topic and reason; the messages handled and failed, the handlers' latency and the
consumer's lag are counted too (:mod:`assent.metrics`). While a message is handled, every log line names its
topic and id (:func:`assent.logs.message_context`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import chain
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka import Topic as KafkaTopic
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind
from prometheus_client import Counter, Histogram

from ..contracts import MalformedMessage, Message, parse_message
from ..db import database_unavailable
from ..kafka_security import KafkaSecurity, kafka_kwargs
from ..logs import TRAIL, name_message, unname_message
from ..metrics import HANDLER_SECONDS, MESSAGES_FAILED, MESSAGES_HANDLED, LagMeter
from ..settings import GroupTimeouts
from ..telemetry import attach_carrier, detach, trace_id_of
from ..topics import Topic

log = logging.getLogger(__name__)

_TRACE_HEADERS = ("traceparent", "tracestate")


_HANDLING: ContextVar[bool] = ContextVar("assent_handling_a_fetch", default=False)
"""True inside the handlers of a fetch: there, waiting for the consumer to move on would wait for itself."""

_SPANNED: ContextVar[Received | None] = ContextVar("assent_spanned_message", default=None)
"""The message whose span is current: :meth:`Received.span` inside its own span makes no second one."""


@dataclass(frozen=True)
class Received:
    """A parsed message with the trace context it arrived in."""

    message: Message
    carrier: dict[str, str]
    tracer: trace.Tracer
    source: str

    def recorded_context(self) -> trace.SpanContext | None:
        """The producer's span context when the message's trace is recorded (sampled), else None."""
        context = trace.get_current_span(propagate.extract(self.carrier)).get_span_context()
        return context if context.is_valid and context.trace_flags.sampled else None

    @contextmanager
    def span(self) -> Iterator[None]:
        """Handle the message inside a consumer span continuing its producer's trace (inside it already: nothing).

        A message of a trace that is not recorded gets no span, only its trace's context (which its handler's
        publishes carry on): under the parent-based sampling the span would record nothing, and building it
        (ids, attributes, the sampler's decision) costs more than many a handler's statement.
        """
        if _SPANNED.get() is self:
            yield
            return
        token = attach_carrier(self.carrier)
        spanned = _SPANNED.set(self)
        named = name_message(self.source, self.message.id)
        try:
            parent = trace.get_current_span().get_span_context()
            if parent.is_valid and not parent.trace_flags.sampled:
                yield
                return
            with self.tracer.start_as_current_span(
                f"{self.source} process",
                kind=SpanKind.CONSUMER,
                attributes={
                    "messaging.system": "kafka",
                    "messaging.destination.name": self.source,
                    "messaging.message.id": str(self.message.id),
                },
            ):
                yield
        finally:
            unname_message(named)
            _SPANNED.reset(spanned)
            detach(token)


@contextmanager
def batch_span(items: Sequence[Received]) -> Iterator[None]:
    """Where the statements that serve all of ``items`` at once run.

    For one message, its own span (:meth:`Received.span`). For several, a consumer span in the trace of the first
    whose trace is recorded, linked to the others whose traces are (the batch processing of OpenTelemetry's
    messaging conventions), or no span when none is recorded. Each message's own work (what it emits) goes in
    its own span, :meth:`Received.span`.
    """
    if len(items) == 1:
        with items[0].span():
            yield
        return
    recorded = [(item, context) for item in items if (context := item.recorded_context()) is not None]
    if not recorded:
        yield
        return
    first = recorded[0][0]
    token = attach_carrier(first.carrier)
    try:
        with first.tracer.start_as_current_span(
            f"{first.source} process",
            kind=SpanKind.CONSUMER,
            links=[trace.Link(context) for _, context in recorded[1:]],
            attributes={
                "messaging.system": "kafka",
                "messaging.destination.name": first.source,
                "messaging.batch.message_count": len(items),
            },
        ):
            yield
    finally:
        detach(token)


BatchHandler = Callable[[Sequence[Received]], Coroutine[Any, Any, None]]
MalformedAnswer = Callable[[bytes, MalformedMessage, str], tuple[Topic, str, Message] | None]
"""Given a message's bytes, why it cannot be read and where it was read (``topic/partition/offset``): the message
that answers it, with the topic and key it goes out with; None: it cannot be answered (it is dead-lettered)."""

DEAD_LETTERED = Counter(
    "assent_messages_dead_lettered", "Messages sent to a dead-letter topic", ["topic", "group", "reason"]
)
RETRIES = Counter("assent_handler_retries", "Handler attempts that failed and were tried again", ["topic", "kind"])
BATCH_SIZE = Histogram(
    "assent_batch_messages", "Messages handled in one batch", ["topic"], buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256)
)


class _Meters:
    """One topic's handler's series, looked up once (a ``labels`` call per message would cost more than the count)."""

    def __init__(self, topic: str, handler: str) -> None:
        self.topic = topic
        self.handler = handler
        self.handled = MESSAGES_HANDLED.labels(topic, handler)
        self.seconds = HANDLER_SECONDS.labels(topic, handler)
        self.failures = {
            reason: MESSAGES_FAILED.labels(topic, handler, reason) for reason in ("malformed", "error", "outage")
        }

    def done(self, items: Sequence[Received], started: float) -> None:
        seconds = time.perf_counter() - started
        self.seconds.observe(seconds)
        self.handled.inc(len(items))
        if TRAIL.isEnabledFor(logging.INFO):
            for item in items:
                fields = {"topic": self.topic, "message_id": str(item.message.id), "handler": self.handler}
                trace_id = trace_id_of(item.carrier.get("traceparent"))
                if trace_id is not None:
                    fields["trace_id"] = trace_id
                TRAIL.info("handled %s", item.message.type, extra={**fields, "seconds": round(seconds, 6)})

    def failed(self, reason: str, count: int, started: float | None = None) -> None:
        if started is not None:
            self.seconds.observe(time.perf_counter() - started)
        self.failures[reason].inc(count)


@dataclass(frozen=True)
class FailurePolicy:
    """How often and how patiently a failing handler is tried again."""

    max_attempts: int = 5
    backoff_initial: float = 0.05
    backoff_max: float = 2.0


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` says the database or the broker is unreachable, not that the message is bad."""
    return database_unavailable(exc) or (
        isinstance(exc, ConnectionError | TimeoutError | KafkaConnectionError | KafkaTimeoutError)
        or (isinstance(exc, OSError) and not isinstance(exc, UnicodeError))
    )


async def _raw_records(message: Any) -> Any:
    """Hand the handler the fetched records themselves, bodies as bytes: :func:`parse_message` reads each, once.

    (FastStream would otherwise parse every body as JSON first, and a body nested too deep would fail there,
    outside any policy. And the handler needs no ``KafkaMessage`` parameter, which FastStream resolves with a
    synchronous function run in a worker thread: a thread hand-off for every fetch.)
    """
    return message.raw_message


def backoff(attempt: int, policy: FailurePolicy) -> float:
    """Seconds to wait before attempt ``attempt + 1``: exponential, capped, with full jitter on the upper half."""
    ceiling = min(policy.backoff_max, policy.backoff_initial * 2 ** (attempt - 1))
    return float(ceiling / 2 + random.random() * ceiling / 2)


def subscribe(
    broker: KafkaBroker,
    routes: Mapping[Topic, BatchHandler],
    *,
    prefix: str,
    group_id: str,
    policy: FailurePolicy = FailurePolicy(),
    max_records: int = 256,
    tracer_provider: TracerProvider | None = None,
    timeouts: GroupTimeouts | None = None,
    names: Mapping[Topic, str] | None = None,
    answer_malformed: Mapping[Topic, MalformedAnswer] | None = None,
) -> Offsets:
    """Consume the topics of ``routes`` with one consumer in group ``group_id``; what a fetch returns of each topic
    goes to that topic's handler as one batch.

    A fetch returns up to ``max_records`` messages (fewer when fewer are waiting: a lone message is not held
    back). Malformed ones are dead-lettered first; the rest of each topic go to its handler in partition order,
    and the offsets of the whole fetch are committed once every handler returned (in the background, by the
    returned :class:`Offsets`, whose ``flush`` the caller awaits before it stops the broker). When a batch
    fails, each of its messages is handled again on its own, under the failure policy, so one bad message is
    dead-lettered without failing the others (which then commit in transactions of their own).

    One consumer for all of a service's topics, rather than one per topic, means one fetch loop and one offset
    commit per fetch in the service, and far fewer fetch requests for the broker to answer. The topics of one
    fetch are handled at the same time, each in its own unit of work: messages of different topics were never
    ordered, and while one topic's batch waits for the database another's can run (one at a time, the process
    sat idle through every statement's round trip). Messages of one topic stay in order.

    ``timeouts`` say how soon the group notices a member that is gone, and so how long a killed replica's
    partitions wait for another (:class:`~assent.settings.GroupTimeouts`; its defaults when None). The topics
    must exist already (:func:`~assent.messaging.ensure_topics`): FastStream is told not to create them, which
    it would do with one partition. ``names`` name each topic's handler in the metrics (the topic's name when
    none is given). ``answer_malformed`` answers what a topic's consumers cannot read, where it
    can (the module's docstring).
    """
    answers = answer_malformed or {}
    by_name = {topic.full_name(prefix): (topic, handler) for topic, handler in routes.items()}
    tracer = trace.get_tracer("assent.runtime", tracer_provider=tracer_provider)
    meters = {topic: _Meters(topic.name, (names or {}).get(topic, topic.name)) for topic in routes}
    for topic in routes:  # every series from the start: a rate over one that appears later misses its first count
        for reason in ("malformed", "handler_failed"):
            DEAD_LETTERED.labels(topic.name, group_id, reason)
        for kind in ("outage", "handler", "batch"):
            RETRIES.labels(topic.name, kind)

    async def dead_letter(topic: Topic, record: Any, reason: str, error: str, attempts: int) -> None:
        headers = {k: v.decode(errors="replace") for k, v in record.headers or ()}
        headers.update(
            {
                "x-dlq-error": error[:2000],
                "x-dlq-reason": reason,
                "x-dlq-attempts": str(attempts),
                "x-dlq-topic": record.topic,
                "x-dlq-partition": str(record.partition),
                "x-dlq-offset": str(record.offset),
                "x-dlq-group": group_id,
            }
        )
        await broker.publish(record.value or b"", topic=topic.dlq_name(prefix), key=record.key, headers=headers)
        DEAD_LETTERED.labels(topic.name, group_id, reason).inc()

    async def one_by_one(topic: Topic, handler: BatchHandler, record: Any, item: Received) -> None:
        attempt = 0
        meter = meters[topic]
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                await handler([item])
                meter.done([item], started)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                parsed = item.message
                outage = is_outage(exc)
                meter.failed("outage" if outage else "error", 1, started)
                if outage:
                    RETRIES.labels(topic.name, "outage").inc()
                    log.warning(
                        "handling %s %s: the infrastructure is down (%s); retrying", parsed.type, parsed.id, exc
                    )
                    await asyncio.sleep(backoff(attempt, policy))
                    continue
                if attempt >= policy.max_attempts:
                    log.exception("dead-lettering %s %s after %d attempts", parsed.type, parsed.id, attempt)
                    await dead_letter(topic, record, "handler_failed", f"{type(exc).__name__}: {exc}", attempt)
                    return
                RETRIES.labels(topic.name, "handler").inc()
                log.warning("handling %s %s failed (attempt %d): %r; retrying", parsed.type, parsed.id, attempt, exc)
                await asyncio.sleep(backoff(attempt, policy))

    async def handle(topic: Topic, handler: BatchHandler, records: Sequence[Any]) -> None:
        batch: list[tuple[Any, Received]] = []
        for record in records:
            try:
                parsed = parse_message(record.value or b"", accept=topic.messages)
            except MalformedMessage as exc:
                meters[topic].failed("malformed", 1)
                answer = answers.get(topic)
                origin = f"{record.topic}/{record.partition}/{record.offset}"
                reply = answer(record.value or b"", exc, origin) if answer is not None else None
                if reply is not None:
                    to, key, message = reply
                    log.warning("answering %s with %s %s: %s", origin, message.type, message.id, exc)
                    # In the call's trace, as the answer to a call that could be read would be.
                    token = attach_carrier(
                        {k: v.decode(errors="replace") for k, v in record.headers or () if k in _TRACE_HEADERS}
                    )
                    try:
                        await broker.publish(
                            message.to_bytes(),
                            topic=to.full_name(prefix),
                            key=key.encode(),
                            headers={"message-type": message.type},
                        )
                    finally:
                        detach(token)
                    continue
                log.warning("dead-lettering %s[%s]@%s: %s", record.topic, record.partition, record.offset, exc)
                await dead_letter(topic, record, "malformed", str(exc), 0)
                continue
            carrier = {k: v.decode(errors="replace") for k, v in record.headers or () if k in _TRACE_HEADERS}
            batch.append((record, Received(parsed, carrier, tracer, record.topic)))
        if not batch:
            return
        BATCH_SIZE.labels(topic.name).observe(len(batch))
        if len(batch) > 1:
            items = [item for _, item in batch]
            started = time.perf_counter()
            try:
                await handler(items)
                meters[topic].done(items, started)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                meters[topic].failed("outage" if is_outage(exc) else "error", len(items), started)
                RETRIES.labels(topic.name, "batch").inc()
                log.warning(
                    "a batch of %d from %s failed (%r); handling each on its own", len(batch), record.topic, exc
                )
        for record, item in batch:
            await one_by_one(topic, handler, record, item)

    by_topic_name = {name: functools.partial(handle, topic, handler) for name, (topic, handler) in by_name.items()}

    async def on_batch(raw: Any) -> None:
        records = raw if isinstance(raw, tuple | list) else (raw,)  # FastStream's test broker sends one record
        await handle_fetch(records, by_topic_name, offsets)

    subscriber = broker.subscriber(
        *(KafkaTopic(name, declare=False) for name in by_name),
        batch=True,
        max_records=max_records,
        batch_timeout_ms=_POLL_MS,
        fetch_max_wait_ms=_POLL_MS,
        decoder=_raw_records,
        group_id=group_id,
        auto_offset_reset="earliest",
        ack_policy=AckPolicy.MANUAL,  # committed by ``offsets``, in the background
        title=f"{group_id}",
        **(timeouts or GroupTimeouts()).consumer_kwargs(),
    )
    subscriber(on_batch)
    _poll_without_pause(subscriber, prefix)
    offsets = Offsets(subscriber)
    return offsets


async def handle_fetch(
    records: Sequence[Any],
    handlers: Mapping[str, Callable[[Sequence[Any]], Coroutine[Any, Any, None]]],
    offsets: Offsets,
) -> None:
    """Hand what one fetch returned to each topic's handler (``handlers``, by topic name), then mark it handled.

    The topics are handled at the same time, the records of each in order. If a handler raises, the others are
    cancelled, every partition of the fetch is rewound to its earliest record (the whole fetch comes again, and
    the inbox drops what was already committed) and the first error is raised.
    """
    by_topic: dict[str, list[Any]] = {}
    for record in records:
        by_topic.setdefault(record.topic, []).append(record)
    handling = _HANDLING.set(True)
    try:
        if len(by_topic) == 1:
            [(name, of_topic)] = by_topic.items()
            await handlers[name](of_topic)
        else:
            async with asyncio.TaskGroup() as group:
                for name, of_topic in by_topic.items():
                    group.create_task(handlers[name](of_topic))
    except BaseExceptionGroup as failed:
        offsets.rewind(records)
        raise failed.exceptions[0] from failed
    except Exception:
        offsets.rewind(records)
        raise
    finally:
        _HANDLING.reset(handling)
    offsets.handled(records)


COMMIT_INTERVAL_SECONDS = 0.2


class Offsets:
    """Commits the offsets of handled records in the background, so the next fetch does not wait for the group
    coordinator's answer (a broker round trip per fetch, on every hop).

    At most one commit is in flight, and commits are at least ``interval`` seconds apart: what is handled
    meanwhile goes in the next one, so commits reach the coordinator in order, and a busy consumer sends the
    broker a few commits a second rather than one per fetch. A commit that fails (the partition went to
    another consumer in a rebalance, the coordinator moved) is not retried. Either way, records handled but
    not committed (then, or when the process dies) are delivered again, and the inbox drops them.
    :meth:`flush` commits what is pending at once, when the process stops.
    """

    def __init__(self, subscriber: Any, interval: float = COMMIT_INTERVAL_SECONDS) -> None:
        self.subscriber = subscriber
        self.interval = interval
        self.last = float("-inf")
        self.pending: dict[TopicPartition, int] = {}
        self.task: asyncio.Task[None] | None = None
        self.handled_to: dict[TopicPartition, int] = {}
        """Per partition, the offset up to which the group is known to have handled it (by this process, or by the
        group's committed offset as :meth:`caught_up` read it)."""
        self._moved = asyncio.Event()

    def handled(self, records: Sequence[Any]) -> None:
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            self.pending[tp] = max(self.pending.get(tp, 0), record.offset + 1)
            self.handled_to[tp] = max(self.handled_to.get(tp, 0), record.offset + 1)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._commit(), name="offset-commit")
        self._moved.set()
        self._moved = asyncio.Event()

    async def caught_up(self, topic: str, ends_of: EndOffsets, timeout: float) -> bool:
        """Wait until the group has handled every record ``topic`` (a full name) held when asked: True, or False
        after ``timeout`` seconds, inside a fetch's handlers (which the wait would hold up) or with no consumer.

        What makes a read copy read its writer's writes: a writer that answers once its message is in Kafka
        (:meth:`assent.outbox.Outbox.until_published`) and a reader that, missing what it was asked for, waits for
        this before it answers that it does not exist. A partition is judged by what this process handled of it, or
        else by the group's committed offset (another replica's handling, which it follows by up to
        :data:`COMMIT_INTERVAL_SECONDS`). One ``ListOffsets`` request when this process is not behind.
        """
        consumer = self.subscriber.consumer
        if consumer is None or _HANDLING.get():
            return False
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            return False
        try:
            async with asyncio.timeout(timeout):
                ends = await ends_of(partitions)
                behind = [tp for tp in partitions if self.handled_to.get(tp, 0) < ends[tp]]
                while behind:
                    moved = self._moved
                    for tp in behind:
                        # Handled by another replica, or by this one before its last record here (a partition
                        # handed to it at the committed offset, nothing new since).
                        committed = await consumer.committed(tp)
                        if committed is not None:
                            self.handled_to[tp] = max(self.handled_to.get(tp, 0), committed)
                    behind = [tp for tp in behind if self.handled_to.get(tp, 0) < ends[tp]]
                    if behind:
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(COMMIT_INTERVAL_SECONDS):
                                await moved.wait()
        except (TimeoutError, KafkaError):
            return False
        return True

    def rewind(self, records: Sequence[Any]) -> None:
        """Seek each partition of ``records`` back to its earliest one: the next fetch returns them again."""
        consumer = self.subscriber.consumer
        if consumer is None:  # FastStream's test broker
            return
        earliest: dict[TopicPartition, int] = {}
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            earliest[tp] = min(earliest.get(tp, record.offset), record.offset)
        for tp, offset in earliest.items():
            consumer.seek(tp, offset)

    async def flush(self) -> None:
        self.interval = 0.0
        if self.task is not None:
            await self.task

    async def _commit(self) -> None:
        loop = asyncio.get_running_loop()
        while self.pending:
            wait = self.last + self.interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self.last = loop.time()
            offsets, self.pending = self.pending, {}
            consumer = self.subscriber.consumer
            if consumer is None:
                return
            assigned = consumer.assignment()
            offsets = {tp: offset for tp, offset in offsets.items() if tp in assigned}
            if not offsets:
                continue
            try:
                await consumer.commit(offsets)
            except Exception as exc:
                log.info("could not commit offsets %s (%r); those records will come again", offsets, exc)


class EndOffsets:
    """Reads partitions' end offsets with a consumer of its own (in no group, fetching nothing), started at the
    first call: the service's consumer would send the request behind its fetch in flight on the same connection,
    which the broker answers first, up to :data:`_POLL_MS` later."""

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity | None = None) -> None:
        self.bootstrap_servers, self.security = bootstrap_servers, security
        self._consumer: AIOKafkaConsumer | None = None
        self._starting = asyncio.Lock()

    async def __call__(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        async with self._starting:
            if self._consumer is None:
                consumer = AIOKafkaConsumer(
                    bootstrap_servers=self.bootstrap_servers,
                    client_id="assent-end-offsets",
                    enable_auto_commit=False,
                    **kafka_kwargs(self.security),
                )
                try:
                    await consumer.start()
                except BaseException:
                    await consumer.stop()
                    raise
                self._consumer = consumer
        return dict(await self._consumer.end_offsets(list(partitions)))

    async def close(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None


_POLL_MS = 2000
"""How long a fetch waits at the broker for records (and ``getmany`` for the fetch) before it asks again.

A fetch returns as soon as a record arrives on any partition it asks for, so this costs no latency: it is how
often an idle consumer asks for nothing. Each empty fetch cost an owner with nothing to read about 2 ms of CPU
(every assigned partition is encoded and decoded) and the broker its share: at 500 ms an idle service spent
4 to 5 ms of CPU a second on it. What it delays: a fetch rewound after a failed batch (:meth:`Offsets.rewind`) is
asked again when the fetch in flight returns, up to this long after, and a metadata request queued behind it on
the same connection."""


def _poll_without_pause(subscriber: Any, prefix: str) -> None:
    """Make a batch subscriber wait for its next fetch without pausing in between.

    FastStream's batch subscriber waits up to ``batch_timeout_ms`` for records and, when none came, sleeps
    ``batch_timeout_ms`` more before it asks again: a message arriving during that sleep waits for it (up to
    half a second here), on every hop. aiokafka's ``getmany`` already returns as soon as a record arrives and
    blocks otherwise, so asking again at once costs one wake-up per ``_POLL_MS`` while idle.

    After each fetch, the consumer's lag per partition is read (:class:`assent.metrics.LagMeter`).
    """
    lag = LagMeter(prefix)

    async def get_msg(consumer: Any) -> tuple[Any, ...]:
        fetched = await consumer.getmany(timeout_ms=subscriber.batch_timeout_ms, max_records=subscriber.max_records)
        lag.update(consumer)
        return tuple(chain.from_iterable(fetched.values()))

    subscriber.get_msg = get_msg
