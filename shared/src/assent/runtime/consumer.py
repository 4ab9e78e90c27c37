"""Consumers with one failure policy, written once (after arroyo's ``DlqPolicy``).

Delivery contract of :func:`subscribe`: a message is handed to the handler at least once; its offset is
committed only after the handler returns, so the handler must be idempotent (the runtime's unit of work
claims the envelope id in the inbox). What happens when it cannot be handled:

- **Malformed** (not JSON, nested too deep, unknown type or version, invalid fields): published at once to
  ``<topic>.dlq`` with the original bytes and headers and the reason in ``x-dlq-error``; the consumer
  carries on with the next message.
- **The handler fails** (a bug, a value the database refuses, a message that cannot be encoded): retried
  ``max_attempts`` times in all, with exponential backoff and jitter, then dead-lettered the same way with
  ``x-dlq-attempts``; the partition moves on.
- **The infrastructure is down** (the database or the broker does not answer): retried without bound, with
  backoff capped at ``backoff_max``, because dead-lettering would lose messages that are fine. Readiness
  reports the outage meanwhile.

``assent_messages_dead_lettered_total`` and ``assent_handler_retries_total`` (Prometheus, at ``/metrics``)
count what this policy did, by topic and reason.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage
from prometheus_client import Counter
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from ..contracts import MalformedMessage, Message, parse_message
from ..topics import Topic

log = logging.getLogger(__name__)

Handler = Callable[[Message], Awaitable[None]]

DEAD_LETTERED = Counter(
    "assent_messages_dead_lettered", "Messages sent to a dead-letter topic", ["topic", "group", "reason"]
)
RETRIES = Counter("assent_handler_retries", "Handler attempts that failed and were tried again", ["topic", "kind"])


@dataclass(frozen=True)
class FailurePolicy:
    """How often and how patiently a failing handler is tried again."""

    max_attempts: int = 5
    backoff_initial: float = 0.05
    backoff_max: float = 2.0


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` says the database or the broker is unreachable, not that the message is bad."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(
        exc,
        OperationalError
        | InterfaceError
        | asyncpg.PostgresConnectionError
        | asyncpg.CannotConnectNowError
        | asyncpg.TooManyConnectionsError
        | ConnectionError
        | TimeoutError
        | KafkaConnectionError
        | KafkaTimeoutError,
    ) or (isinstance(exc, OSError) and not isinstance(exc, UnicodeError))


async def _raw_body(message: Any) -> Any:
    """Leave the body as bytes: :func:`parse_message` reads it, once. (FastStream would otherwise parse every
    body as JSON first, and a body nested too deep would fail there, outside any policy.)"""
    return message.body


def backoff(attempt: int, policy: FailurePolicy) -> float:
    """Seconds to wait before attempt ``attempt + 1``: exponential, capped, with full jitter on the upper half."""
    ceiling = min(policy.backoff_max, policy.backoff_initial * 2 ** (attempt - 1))
    return ceiling / 2 + random.random() * ceiling / 2


def subscribe(
    broker: KafkaBroker,
    topic: Topic,
    *,
    prefix: str,
    group_id: str,
    handler: Handler,
    policy: FailurePolicy = FailurePolicy(),
) -> None:
    """Consume ``topic`` in consumer group ``group_id``: parse each message and hand it to ``handler``."""
    source = topic.full_name(prefix)
    dlq = topic.dlq_name(prefix)

    async def dead_letter(record: Any, reason: str, error: str, attempts: int) -> None:
        headers = {k: v.decode(errors="replace") for k, v in record.headers or ()}
        headers.update(
            {
                "x-dlq-error": error[:2000],
                "x-dlq-reason": reason,
                "x-dlq-attempts": str(attempts),
                "x-dlq-topic": source,
                "x-dlq-partition": str(record.partition),
                "x-dlq-offset": str(record.offset),
                "x-dlq-group": group_id,
            }
        )
        await broker.publish(record.value or b"", topic=dlq, key=record.key, headers=headers)
        DEAD_LETTERED.labels(topic.name, group_id, reason).inc()

    async def on_message(message: KafkaMessage) -> None:
        record = message.raw_message
        assert not isinstance(record, tuple)
        try:
            parsed = parse_message(record.value or b"", accept=topic.messages)
        except MalformedMessage as exc:
            log.warning("dead-lettering %s[%s]@%s: %s", source, record.partition, record.offset, exc)
            await dead_letter(record, "malformed", str(exc), 0)
            return
        attempt = 0
        while True:
            attempt += 1
            try:
                await handler(parsed)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_outage(exc):
                    RETRIES.labels(topic.name, "outage").inc()
                    log.warning(
                        "handling %s %s: the infrastructure is down (%s); retrying", parsed.type, parsed.id, exc
                    )
                    await asyncio.sleep(backoff(attempt, policy))
                    continue
                if attempt >= policy.max_attempts:
                    log.exception("dead-lettering %s %s after %d attempts", parsed.type, parsed.id, attempt)
                    await dead_letter(record, "handler_failed", f"{type(exc).__name__}: {exc}", attempt)
                    return
                RETRIES.labels(topic.name, "handler").inc()
                log.warning("handling %s %s failed (attempt %d): %r; retrying", parsed.type, parsed.id, attempt, exc)
                await asyncio.sleep(backoff(attempt, policy))

    broker.subscriber(
        source,
        decoder=_raw_body,
        group_id=group_id,
        auto_offset_reset="earliest",
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title=f"{group_id}:{source}",
    )(on_message)
