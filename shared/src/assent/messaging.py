"""Kafka plumbing shared by the services: the broker and topic creation. Consumers and their failure
policy are in :mod:`assent.runtime.consumer`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from faststream.kafka import KafkaBroker
from faststream.kafka.opentelemetry import KafkaTelemetryMiddleware
from faststream.opentelemetry.middleware import BaseTelemetryMiddleware
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider

from .kafka_security import KafkaSecurity, explain_auth_failure, kafka_kwargs
from .topics import REGISTRY, Topic

log = logging.getLogger(__name__)


class _PublishSpans(BaseTelemetryMiddleware[Any]):
    async def consume_scope(self, call_next: Any, msg: Any) -> Any:
        return await call_next(msg)

    async def publish_scope(self, call_next: Any, msg: Any) -> Any:
        current = trace.get_current_span().get_span_context()
        if current.is_valid and not current.trace_flags.sampled:
            # A trace that is not recorded: its spans would record nothing. Carry its context on (the trace id,
            # and the decision not to record it) without building them.
            propagate.inject(msg.headers)
            return await call_next(msg)
        return await super().publish_scope(call_next, msg)


class PublishTelemetry(KafkaTelemetryMiddleware):
    """FastStream's Kafka telemetry on the publishing side only (a span per publish of a recorded trace,
    ``traceparent`` in headers always).

    Consumers open one span per message themselves, continuing that message's trace
    (:class:`assent.runtime.consumer.Received`); FastStream's span for a whole batch would start a trace of
    its own for every fetch.
    """

    def __call__(self, msg: Any | None, /, *, context: Any) -> BaseTelemetryMiddleware[Any]:
        return _PublishSpans(
            msg,
            tracer=self._tracer,
            metrics_container=self._metrics,
            settings_provider_factory=self._settings_provider_factory,
            context=context,
        )


def make_broker(
    bootstrap_servers: str,
    *,
    client_id: str,
    idempotent: bool = True,
    tracer_provider: TracerProvider | None = None,
    security: KafkaSecurity | None = None,
) -> KafkaBroker:
    """A FastStream Kafka broker with tracing; nothing connects until ``broker.start()``.

    ``security`` (TLS, SASL) applies to all of the broker's clients, its readiness ping's admin client too.
    """
    return KafkaBroker(
        bootstrap_servers,
        client_id=client_id,
        security=security.faststream() if security is not None else None,
        enable_idempotence=idempotent,
        acks="all" if idempotent else 1,
        linger_ms=0,
        middlewares=(PublishTelemetry(tracer_provider=tracer_provider),),
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


async def broker_answers(admin: Any, topic: str) -> bool:
    """Whether the broker answers a metadata request for ``topic`` (raises when it does not).

    A readiness probe asks this every few seconds. It names one topic, where FastStream's ``ping`` (the admin
    client's ``describe_cluster``) reads the metadata of every topic in the cluster: a second and more on a
    shared cluster of many thousands of partitions, longer than a probe waits.
    """
    await admin.describe_topics([topic])
    return True


async def ensure_topics(
    bootstrap_servers: str,
    prefix: str,
    topics: Iterable[Topic] = REGISTRY,
    *,
    security: KafkaSecurity | None = None,
) -> None:
    """Create every registry topic (and its dead-letter twin) that does not exist yet.

    Raises :class:`~assent.kafka_security.KafkaAuthenticationError` when the broker refuses the credentials.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="assent-admin", **kafka_kwargs(security))
    try:
        async with explain_auth_failure(security, bootstrap_servers):
            await admin.start()
    except BaseException:
        await admin.close()
        raise
    try:
        names = {
            name: partitions
            for topic in topics
            for name, partitions in ((topic.full_name(prefix), topic.partitions), (topic.dlq_name(prefix), 1))
        }
        # Only these topics' metadata: a shared cluster may hold many thousands of others.
        existing = {found["topic"] for found in await admin.describe_topics(list(names)) if found["error_code"] == 0}
        wanted = [
            NewTopic(name, num_partitions=partitions, replication_factor=1)
            for name, partitions in names.items()
            if name not in existing
        ]
        if wanted:
            try:
                await admin.create_topics(wanted)
            except TopicAlreadyExistsError:
                pass  # another replica won the race
    finally:
        await admin.close()
