"""Kafka plumbing shared by the services: the broker, topic creation, and consumers with a dead-letter topic.

Delivery contract of :func:`subscribe`: a message is handed to the handler at least once; its offset is
committed only after the handler returns, so a handler must be idempotent (use the inbox). A message that
cannot be read (not JSON, unknown type or version, invalid fields), or whose handler fails in a way no retry
can cure (:data:`PERMANENT_FAILURES`), is published to ``<topic>.dlq`` with the original bytes and headers
plus the error, then committed: the consumer carries on with the next one. A handler that raises anything
else (a database or broker outage) is retried from the same offset after a short pause.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage
from faststream.kafka.opentelemetry import KafkaTelemetryMiddleware
from opentelemetry.sdk.trace import TracerProvider
from pydantic import ValidationError
from sqlalchemy.exc import DataError

from .contracts import MalformedMessage, Message, parse_message
from .topics import REGISTRY, Topic

log = logging.getLogger(__name__)

Handler = Callable[[Message], Awaitable[None]]
RETRY_PAUSE_SECONDS = 0.5
PERMANENT_FAILURES = (DataError, ValidationError)
"""Handler errors that a retry cannot cure (the database refuses a value; a message cannot be built): the
message is dead-lettered instead of blocking its partition."""


def make_broker(
    bootstrap_servers: str,
    *,
    client_id: str,
    idempotent: bool = True,
    tracer_provider: TracerProvider | None = None,
) -> KafkaBroker:
    """A FastStream Kafka broker with tracing; nothing connects until ``broker.start()``."""
    return KafkaBroker(
        bootstrap_servers,
        client_id=client_id,
        enable_idempotence=idempotent,
        acks="all" if idempotent else 1,
        linger_ms=0,
        middlewares=(KafkaTelemetryMiddleware(tracer_provider=tracer_provider),),
        logger=log,
        log_level=logging.DEBUG,  # one line per message is too costly at INFO on the hot path
        graceful_timeout=5.0,
    )


async def start_broker(broker: KafkaBroker) -> None:
    """``broker.start()``, but with every subscriber joining its consumer group at the same time.

    Brokers delay each group join (Kafka's ``group.initial.rebalance.delay.ms``, Tansu's fixed pause), and
    FastStream starts subscribers one after another, which multiplies that delay by their number.
    """
    await broker.connect()
    await asyncio.gather(*(subscriber.start() for subscriber in broker.subscribers))
    for publisher in broker.publishers:
        await publisher.start()
    broker.running = True


async def ensure_topics(bootstrap_servers: str, prefix: str, topics: Iterable[Topic] = REGISTRY) -> None:
    """Create every registry topic (and its dead-letter twin) that does not exist yet."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="assent-admin")
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted: list[NewTopic] = []
        for topic in topics:
            for name, partitions in (
                (topic.full_name(prefix), topic.partitions),
                (topic.dlq_name(prefix), 1),
            ):
                if name not in existing:
                    wanted.append(NewTopic(name, num_partitions=partitions, replication_factor=1))
        if wanted:
            try:
                await admin.create_topics(wanted)
            except TopicAlreadyExistsError:
                pass  # another replica won the race
    finally:
        await admin.close()


def subscribe(
    broker: KafkaBroker,
    topic: Topic,
    *,
    prefix: str,
    group_id: str,
    handler: Handler,
) -> None:
    """Consume ``topic`` in consumer group ``group_id``, parse each message and pass it to ``handler``."""
    source = topic.full_name(prefix)
    dlq = topic.dlq_name(prefix)

    async def dead_letter(record: Any, error: str) -> None:
        headers = {k: v.decode(errors="replace") for k, v in record.headers or ()}
        headers.update(
            {
                "x-dlq-error": error[:2000],
                "x-dlq-topic": source,
                "x-dlq-partition": str(record.partition),
                "x-dlq-offset": str(record.offset),
                "x-dlq-group": group_id,
            }
        )
        await broker.publish(record.value or b"", topic=dlq, key=record.key, headers=headers)

    async def on_message(message: KafkaMessage) -> None:
        record = message.raw_message
        assert not isinstance(record, tuple)
        try:
            parsed = parse_message(record.value or b"", accept=topic.messages)
        except MalformedMessage as exc:
            log.warning("dead-lettering %s[%s]@%s: %s", source, record.partition, record.offset, exc)
            await dead_letter(record, str(exc))
            return
        try:
            await handler(parsed)
        except PERMANENT_FAILURES as exc:
            log.error("dead-lettering %s %s: its handler cannot succeed: %s", parsed.type, parsed.id, exc)
            await dead_letter(record, f"handler failed: {exc}")
        except Exception:
            log.exception("handling %s %s failed; it will be retried", parsed.type, parsed.id)
            await asyncio.sleep(RETRY_PAUSE_SECONDS)
            raise

    broker.subscriber(
        source,
        group_id=group_id,
        auto_offset_reset="earliest",
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title=f"{group_id}:{source}",
    )(on_message)
