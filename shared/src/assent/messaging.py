"""Kafka plumbing shared by the services: the broker and topic creation. Consumers and their failure
policy are in :mod:`assent.runtime.consumer`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    for_code,
)
from faststream import BaseMiddleware
from faststream.kafka import KafkaBroker
from faststream.kafka.opentelemetry import KafkaTelemetryMiddleware
from faststream.opentelemetry.middleware import BaseTelemetryMiddleware
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider

from . import topics as registry
from .kafka_security import KafkaSecurity, explain_auth_failure, kafka_kwargs
from .topics import Topic, TopicPolicy

log = logging.getLogger(__name__)


class _PublishSpans(BaseMiddleware):
    """What the broker's middleware is for each message, consumed or published: a consumed message passes
    through (the consumers open its span themselves), a publish in a trace not recorded only carries the trace's
    context on, and only a publish that may be recorded builds FastStream's telemetry (its settings, span
    attributes and metrics)."""

    __slots__ = ("_telemetry",)

    def __init__(self, msg: Any | None, /, *, context: Any, telemetry: PublishTelemetry) -> None:
        super().__init__(msg, context=context)
        self._telemetry = telemetry

    async def publish_scope(self, call_next: Any, msg: Any) -> Any:
        current = trace.get_current_span().get_span_context()
        if current.is_valid and not current.trace_flags.sampled:
            # A trace that is not recorded: its spans would record nothing. Carry its context on (the trace id,
            # and the decision not to record it) without building them.
            propagate.inject(msg.headers)
            return await call_next(msg)
        telemetry = self._telemetry
        recorded: BaseTelemetryMiddleware[Any] = BaseTelemetryMiddleware(
            self.msg,
            tracer=telemetry._tracer,
            metrics_container=telemetry._metrics,
            settings_provider_factory=telemetry._settings_provider_factory,
            context=self.context,
        )
        return await recorded.publish_scope(call_next, msg)


class PublishTelemetry(KafkaTelemetryMiddleware):
    """FastStream's Kafka telemetry on the publishing side only (a span per publish of a recorded trace,
    ``traceparent`` in headers always).

    Consumers open one span per message themselves, continuing that message's trace
    (:class:`assent.runtime.consumer.Received`); FastStream's span for a whole batch would start a trace of
    its own for every fetch.
    """

    def __call__(self, msg: Any | None, /, *, context: Any) -> BaseMiddleware:  # type: ignore[override]  # a lighter middleware than FastStream's telemetry, built only for a publish that may be recorded
        return _PublishSpans(msg, context=context, telemetry=self)


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
    ``bootstrap_servers`` may list several brokers, comma-separated: FastStream takes a string as one address, so
    the list is split here (a cluster's ``a:9092,b:9092,c:9092`` would otherwise be one host name that resolves to
    nothing).
    """
    return KafkaBroker(
        bootstrap_list(bootstrap_servers),
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


def bootstrap_list(bootstrap_servers: str) -> list[str]:
    """The ``host:port`` addresses of a comma-separated bootstrap list, blanks dropped."""
    return [server.strip() for server in bootstrap_servers.split(",") if server.strip()]


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
    shared cluster of many thousands of partitions, longer than a probe waits. A metadata request for a topic
    that does not exist makes a broker that creates topics on first mention create it, with its own number of
    partitions; the probe is served only once the service has created its topics (:func:`ensure_topics` runs in
    the app's start-up, before it listens).
    """
    await admin.describe_topics([topic])
    return True


@dataclass(frozen=True)
class Shortfall:
    """A topic found with fewer partitions than it is declared with."""

    topic: str
    declared: int
    found: int


def partition_shortfalls(declared: Mapping[str, int], found: Mapping[str, int]) -> list[Shortfall]:
    """The topics of ``declared`` (name: partitions) that ``found`` holds with fewer partitions, in declared order.

    More partitions than declared are fine (an operator may add some for more replicas while nothing is
    waiting in them); a topic ``found`` lacks is not compared here.
    """
    return [
        Shortfall(name, partitions, found[name])
        for name, partitions in declared.items()
        if name in found and found[name] < partitions
    ]


class TopicsNotAsDeclared(RuntimeError):
    """Topics exist with fewer partitions than declared; the message names each and the command that fixes it.

    Assent does not add the partitions itself: a key's later messages would go to another partition than its
    earlier ones, and a consumer could handle them first.
    """

    def __init__(self, shortfalls: Sequence[Shortfall], bootstrap_servers: str) -> None:
        self.shortfalls = tuple(shortfalls)
        found = "; ".join(f"{s.topic} has {s.found}, declared {s.declared}" for s in self.shortfalls)
        commands = "\n".join(
            f"  kafka-topics.sh --bootstrap-server {bootstrap_servers} --alter --topic {s.topic} "
            f"--partitions {s.declared}"
            for s in self.shortfalls
        )
        super().__init__(
            f"topics with fewer partitions than declared: {found}. A broker that creates topics on first mention "
            "(auto.create.topics.enable=true) made them before the services could. Adding partitions sends a key's "
            "later messages to another partition than its earlier ones, so add them only while nothing in these "
            f"topics is left unread, with the services stopped:\n{commands}\n(or delete these topics, if what they "
            "hold can go: the services create them again as declared)"
        )


class TopicsNotCreated(RuntimeError):
    """Topics that could not be created, nor found, with the broker's reason for each."""


class TopicsMissing(TopicsNotCreated):
    """Topics that are not there, where the service does not create topics (``ASSENT_CREATE_TOPICS=false``); the
    message names each and how the operator creates them."""

    def __init__(self, missing: Sequence[str], bootstrap_servers: str) -> None:
        self.missing = tuple(missing)
        super().__init__(
            f"these topics are missing: {', '.join(self.missing)}. This service does not create topics "
            "(ASSENT_CREATE_TOPICS=false): the operator creates every topic of the registry first, with the "
            "KafkaTopic resources of deploy/kafka/topics.yaml or with "
            f"KAFKA_BOOTSTRAP_SERVERS={bootstrap_servers} deploy/kafka/create-topics.sh (docs/how-to/operate-topics.md)"
        )


CREATE_REFUSED = frozenset({TopicAuthorizationFailedError.errno, ClusterAuthorizationFailedError.errno})
"""Create errors that leave the topic to an operator: with no right to create topics, the topics must exist."""


def declared_topics(
    prefix: str, topics: Iterable[Topic], *, dead_letters: bool = True, policy: TopicPolicy | None = None
) -> list[NewTopic]:
    """The topics as created: each with its partitions and settings (``policy``'s where it sets them), and its
    dead-letter twin with one partition and the same settings (it holds the same messages: ``max.message.bytes``
    must fit them). ``policy`` None: one replica, each topic's declared partitions, the broker's settings."""
    policy = policy or TopicPolicy()
    declared = []
    for topic in topics:
        config = policy.config_of(topic)
        replicas = policy.replication_factor
        declared.append(NewTopic(topic.full_name(prefix), policy.partitions_of(topic), replicas, topic_configs=config))
        if dead_letters:
            declared.append(NewTopic(topic.dlq_name(prefix), 1, replicas, topic_configs=config))
    return declared


async def ensure_topics(
    bootstrap_servers: str,
    prefix: str,
    topics: Iterable[Topic] | None = None,
    *,
    security: KafkaSecurity | None = None,
    dead_letters: bool = True,
    settle_seconds: float = 30.0,
    policy: TopicPolicy | None = None,
    create: bool = True,
) -> None:
    """Create every topic of ``topics`` (by default the registry's, :data:`assent.topics.REGISTRY`) and, with
    ``dead_letters``, its dead-letter twin, with the partitions and settings it is declared with (``policy``'s, where
    it sets them), then check that each has at least its declared partitions. Without ``create``, nothing is
    created: the topics must exist, and :class:`TopicsMissing` names those that do not.

    CreateTopics is asked first, for all of them (a topic that exists answers TOPIC_ALREADY_EXISTS, which is
    fine): a metadata request for a topic that does not exist yet makes a broker that creates topics on first
    mention (``auto.create.topics.enable=true``, Apache Kafka's default) create it with the broker's own
    partition count. A create refused for want of the right to create topics is fine when the topic exists.
    The topics' metadata is read only after that, and for up to ``settle_seconds`` while the broker does not
    show a topic it has just created (a topic it refused to create, and does not show, is not waited for).

    Raises :class:`TopicsNotAsDeclared` when a topic has fewer partitions than declared, :class:`TopicsNotCreated`
    when one can be neither created nor found, and :class:`~assent.kafka_security.KafkaAuthenticationError` when
    the broker refuses the credentials.
    """
    wanted = declared_topics(
        prefix, registry.REGISTRY if topics is None else topics, dead_letters=dead_letters, policy=policy
    )
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="assent-admin", **kafka_kwargs(security))
    try:
        async with explain_auth_failure(security, bootstrap_servers):
            await admin.start()
    except BaseException:
        await admin.close()
        raise
    try:
        refused: dict[str, str] = {}
        failed: dict[str, str] = {}
        answers = (await admin.create_topics(wanted)).to_object()["topic_errors"] if create else []
        for answer in answers:
            code = answer["error_code"]
            if code in (0, TopicAlreadyExistsError.errno):
                continue
            reason = f"{for_code(code).__name__}: {answer.get('error_message') or for_code(code).description}"
            (refused if code in CREATE_REFUSED else failed)[answer["topic"]] = reason
        if failed:
            raise TopicsNotCreated(
                "the broker did not create these topics: " + "; ".join(f"{t} ({r})" for t, r in failed.items())
            )
        names = [topic.name for topic in wanted]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settle_seconds
        while True:
            # Only these topics' metadata: a shared cluster may hold many thousands of others.
            described = await admin.describe_topics(names)
            found = {d["topic"]: len(d["partitions"]) for d in described if d["error_code"] == 0}
            missing = [name for name in names if name not in found]
            if not missing:
                break
            if not create:
                raise TopicsMissing(missing, bootstrap_servers)
            if loop.time() >= deadline or all(name in refused for name in missing):
                raise TopicsNotCreated(
                    "these topics are not there: "
                    + "; ".join(f"{name} ({refused.get(name, 'created, not shown')})" for name in missing)
                )
            await asyncio.sleep(0.1)
    finally:
        await admin.close()
    shortfalls = partition_shortfalls({topic.name: topic.num_partitions for topic in wanted}, found)
    if shortfalls:
        raise TopicsNotAsDeclared(shortfalls, bootstrap_servers)
