"""The Prometheus metrics every service serves at ``/metrics``, defined once for all of them.

Families (the ``_total``, ``_bucket``/``_sum``/``_count`` suffixes are the exposition's):

- ``assent_messages_handled_total{topic, handler}``: messages a handler finished (its transaction committed), once
  per delivery;
- ``assent_messages_failed_total{topic, handler, reason}``: messages that could not be handled as delivered, per
  attempt: ``malformed`` (dead-lettered at once, or answered on a topic that answers what it cannot read),
  ``error`` (the handler raised; retried, then dead-lettered), ``outage`` (the database or broker did not answer;
  retried without bound);
- ``assent_handler_seconds{topic, handler}``: how long a handler took for one batch (one message, when one was
  waiting), failed attempts included;
- ``assent_messages_dead_lettered_total{topic, group, reason}``, ``assent_handler_retries_total{topic, kind}``,
  ``assent_batch_messages{topic}``: the failure policy's own (:mod:`assent.runtime.consumer`);
- ``assent_consumer_lag{topic, partition}``: records on each assigned partition not yet fetched (the partition's
  high watermark less the consumer's position), after each fetch;
- ``assent_outbox_backlog``: outbox rows this process committed and has not yet seen Kafka acknowledge;
  ``assent_outbox_oldest_seconds``: how long the oldest of them has waited (0: none waits);
  ``assent_outbox_relay_seconds``: from the commit of the oldest row of a publish to Kafka's acknowledgement of
  all of them; ``assent_outbox_published_total{path}``: rows published, ``fast`` (from memory) or ``sweep``
  (rows left behind by a process that died);
- ``assent_http_requests_total{method, route, status}`` and ``assent_http_request_seconds{method, route}``: by the
  route's template (``/api/studio/sessions/{session_id}/edits/{seq}``), never the raw path, so ids do not
  multiply the series; a path no route serves is ``route="unmatched"``;
- ``assent_ready{check}``: 1 while the check (``database``, ``kafka``) answered the last readiness probe, else 0.

The hot path pays a counter increment or a histogram observation per batch, not per message where a batch will
do; the consumer lag is read at most every :data:`LAG_EVERY_SECONDS`, and the outbox backlog only when scraped.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Any

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

disable_created_metrics()  # a ``_created`` series beside every counter and histogram doubles a scrape, for nothing

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Seconds; a handler's batch and a request take a few milliseconds when all is well, seconds when not."""

MESSAGES_HANDLED = Counter(
    "assent_messages_handled", "Messages a handler finished, once per delivery", ["topic", "handler"]
)
MESSAGES_FAILED = Counter(
    "assent_messages_failed",
    "Messages that could not be handled as delivered, per attempt (malformed, error, outage)",
    ["topic", "handler", "reason"],
)
HANDLER_SECONDS = Histogram(
    "assent_handler_seconds", "Seconds a handler took for one batch", ["topic", "handler"], buckets=LATENCY_BUCKETS
)
CONSUMER_LAG = Gauge(
    "assent_consumer_lag",
    "Records on an assigned partition not yet fetched (high watermark - position)",
    ["topic", "partition"],
)
OUTBOX_BACKLOG = Gauge(
    "assent_outbox_backlog", "Outbox rows this process committed that Kafka has not yet acknowledged"
)
OUTBOX_OLDEST_SECONDS = Gauge(
    "assent_outbox_oldest_seconds",
    "Seconds the oldest outbox row this process committed has waited for Kafka's acknowledgement (0: none waits)",
)
OUTBOX_RELAY_SECONDS = Histogram(
    "assent_outbox_relay_seconds",
    "Seconds from the commit of a publish's oldest outbox row to Kafka's acknowledgement of the publish",
    buckets=LATENCY_BUCKETS,
)
OUTBOX_PUBLISHED = Counter("assent_outbox_published", "Outbox rows published, by path (fast, sweep)", ["path"])
for _path in ("fast", "sweep"):
    OUTBOX_PUBLISHED.labels(
        _path
    )  # both series from the start: a rate over a series that appears later misses its start
HTTP_REQUESTS = Counter("assent_http_requests", "HTTP requests answered", ["method", "route", "status"])
HTTP_SECONDS = Histogram(
    "assent_http_request_seconds",
    "Seconds from a request's arrival to the end of its response",
    ["method", "route"],
    buckets=LATENCY_BUCKETS,
)
READY = Gauge("assent_ready", "1 while the readiness check answered at the last probe, else 0", ["check"])

LAG_EVERY_SECONDS = 0.2
"""How often at most a consumer reads its partitions' lag (after a fetch): a fetch loop turns hundreds of times a
second under load, and the lag of a few tens of partitions need not be fresher than a scrape."""


class LagMeter:
    """Sets ``assent_consumer_lag`` for the partitions assigned to one aiokafka consumer, and removes the series of
    partitions it no longer holds (after a rebalance another replica reports them). The ``topic`` label is the
    topic's name without the deployment's ``prefix``, as in the other families."""

    def __init__(
        self, prefix: str = "", every: float = LAG_EVERY_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.prefix = prefix
        self.every = every
        self.clock = clock
        self.next = float("-inf")
        self.reported: dict[Any, Any] = {}
        """The gauge's child of each partition reported, by ``TopicPartition``."""

    def update(self, consumer: Any) -> None:
        """Read the lag of each partition ``consumer`` holds, unless it was read less than ``every`` seconds ago."""
        now = self.clock()
        if now < self.next:
            return
        self.next = now + self.every
        lags = partition_lags(consumer)
        for tp in [tp for tp in self.reported if tp not in lags]:
            del self.reported[tp]
            CONSUMER_LAG.remove(tp.topic.removeprefix(self.prefix), str(tp.partition))
        for tp, lag in lags.items():
            child = self.reported.get(tp)
            if child is None:
                child = self.reported[tp] = CONSUMER_LAG.labels(tp.topic.removeprefix(self.prefix), str(tp.partition))
            child.set(lag)


def partition_lags(consumer: Any) -> dict[Any, int]:
    """High watermark less position for each partition ``consumer`` holds whose both are known (after its first
    fetch); never negative."""
    lags = {}
    for tp in consumer.assignment():
        try:
            highwater = consumer.highwater(tp)
            # aiokafka's ``position`` is a coroutine that may ask the broker; the fetcher's own is what it knows.
            position = consumer._subscription.subscription.assignment.state_value(tp).position
        except (AssertionError, AttributeError):  # unassigned meanwhile, or no assignment yet
            continue
        if highwater is not None and position is not None:
            lags[tp] = max(0, highwater - position)
    return lags


_RELAYS: weakref.WeakSet[Any] = weakref.WeakSet()


def count_backlog(relay: Any) -> None:
    """Count ``relay``'s :meth:`backlog` (rows not yet acknowledged) in ``assent_outbox_backlog``, and how long the
    oldest has waited (its :meth:`waited`) in ``assent_outbox_oldest_seconds``, read at scrape."""
    _RELAYS.add(relay)


def _oldest() -> float:
    return max((relay.waited() or 0.0 for relay in list(_RELAYS)), default=0.0)


OUTBOX_BACKLOG.set_function(lambda: float(sum(relay.backlog() for relay in list(_RELAYS))))
OUTBOX_OLDEST_SECONDS.set_function(_oldest)


HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""Methods counted by name; any other a client sends is ``other`` (a label value per made-up method would not do).
The request guard (:class:`assent.http.HttpGuard`) counts and times every request."""
