"""Live events fanned out to every gateway replica through Redis pub/sub.

The replica that consumes a message (one per consumer group) publishes what changed, after its transaction
commits, on one channel, and hands it at once to whoever waits on that replica; every other replica hears it
on the channel and does the same: the HTTP request that made a decision (by ``decision_id``) and the live
streams open on that session or agent (:attr:`~gateway.domain.events.LiveEvent.to`).

Pub/sub is fire-and-forget: a live stream is a hint to re-read, never the record. A waiting decision hears
its outcome here; only while the feed has lost Redis does it read the projection in PostgreSQL instead. When
the feed loses Redis, or cannot publish, every decision waiting on this replica is told so at once (its
future gets ``None``): the outcome it waits for may be announced by a replica it cannot hear.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from typing import Any

from prometheus_client import Gauge
from pydantic import ValidationError
from redis.asyncio import Redis

from assent.contracts import ProposalOutcome

from ..domain.events import LiveEvent, ProposalDecidedEvent, Stream, read_event

log = logging.getLogger(__name__)

RECENT_FAILURE_SECONDS = 30.0
LIVE_STREAMS = Gauge("assent_live_streams", "Live event streams (GET …/events) open on this replica")


class EventFeed:
    def __init__(self, redis_url: str, channel: str) -> None:
        self._redis = Redis.from_url(redis_url)
        self._channel = channel
        self._decisions: dict[str, asyncio.Future[ProposalOutcome | None]] = {}
        self._streams: defaultdict[tuple[Stream, str], set[asyncio.Queue[LiveEvent]]] = defaultdict(set)
        self._reader: asyncio.Task[None] | None = None
        self.connected = False
        """Whether the feed is subscribed."""
        self._publish_failed_at = float("-inf")
        self._origin = uuid.uuid4().hex
        self._outgoing: list[LiveEvent] = []
        self._sender: asyncio.Task[None] | None = None

    @property
    def reliable(self) -> bool:
        """Whether a waiting decision can count on hearing its outcome here: subscribed, and no publish failed
        in the last ``RECENT_FAILURE_SECONDS``. While not, it reads the projection instead."""
        return self.connected and time.monotonic() - self._publish_failed_at > RECENT_FAILURE_SECONDS

    async def start(self) -> None:
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        await pubsub.subscribe(self._channel)
        self.connected = True
        self._reader = asyncio.create_task(self._read(pubsub), name="event-feed")

    async def stop(self) -> None:
        if self._sender is not None:
            await self._sender
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._redis.aclose()

    async def publish(self, events: Sequence[LiveEvent]) -> None:
        """Announce committed changes.

        This replica's own waiters and streams get them at once. The other replicas get them through Redis,
        from a background task that sends what was announced meanwhile as one pub/sub message (the events in
        order, and the ``origin`` replica, which skips its own echo): a consumed batch's events cost every
        replica one message to read, not one each.
        """
        for event in events:
            self._deliver(event)
        self._outgoing += events
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send(), name="event-feed-publish")

    async def _send(self) -> None:
        while self._outgoing:
            events, self._outgoing = self._outgoing, []
            # Each event's JSON as it was made once, for this replica's streams too.
            body = f'{{"origin": {json.dumps(self._origin)}, "events": [{", ".join(e.data for e in events)}]}}'
            try:
                await self._redis.publish(self._channel, body)
            except Exception:  # waiters read the database for a while: some replica may have missed its answer
                self._publish_failed_at = time.monotonic()
                self._unreliable()
                log.warning("could not publish %d live events to Redis", len(events), exc_info=True)

    def expect(self, decision_id: str) -> asyncio.Future[ProposalOutcome | None]:
        """A future that receives the outcome of ``decision_id``, or ``None`` when the feed stops being
        :attr:`reliable` first; call :meth:`forget` when done."""
        return self._decisions.setdefault(decision_id, asyncio.get_running_loop().create_future())

    def _unreliable(self) -> None:
        """Tell every waiting decision that its outcome may not come through here."""
        for future in self._decisions.values():
            if not future.done():
                future.set_result(None)

    def forget(self, decision_id: str) -> None:
        self._decisions.pop(decision_id, None)

    @contextlib.asynccontextmanager
    async def listen(self, session_id: str, stream: Stream = "session") -> AsyncIterator[asyncio.Queue[LiveEvent]]:
        """A queue of the session's events for as long as the block runs; with ``stream="proposals"``, of the
        agent ``session_id`` names."""
        queue: asyncio.Queue[LiveEvent] = asyncio.Queue(maxsize=1000)
        key = (stream, session_id)
        self._streams[key].add(queue)
        LIVE_STREAMS.inc()
        try:
            yield queue
        finally:
            LIVE_STREAMS.dec()
            self._streams[key].discard(queue)
            if not self._streams[key]:
                del self._streams[key]

    def _deliver(self, event: LiveEvent) -> None:
        if isinstance(event, ProposalDecidedEvent):
            self._hand_over(event.outcome)
        for queue in self._streams.get(event.to, ()):
            with contextlib.suppress(asyncio.QueueFull):  # a stalled reader misses hints, not records
                queue.put_nowait(event)

    def _hand_over(self, outcome: ProposalOutcome) -> None:
        future = self._decisions.get(outcome.decision_id)
        if future is not None and not future.done():
            future.set_result(outcome)

    def _deliver_read(self, value: Any) -> None:
        """Deliver an event read from Redis. One this version does not know (a replica of an earlier version names
        events otherwise) reaches no stream, but the outcome it carries reaches the decision waiting on it."""
        event = read_event(value)
        if event is not None:
            self._deliver(event)
        elif isinstance(value, dict) and isinstance(value.get("outcome"), dict):
            with contextlib.suppress(ValidationError):
                self._hand_over(ProposalOutcome.model_validate(value["outcome"]))

    async def _read(self, pubsub: Any) -> None:
        while True:
            try:
                async for message in pubsub.listen():
                    body = json.loads(message["data"])
                    if body.pop("origin", None) == self._origin:
                        continue  # this replica's own are delivered already
                    # A replica of an earlier version publishes one event per message.
                    for event in body["events"] if "events" in body else (body,):
                        self._deliver_read(event)
            except asyncio.CancelledError:
                await pubsub.aclose()
                raise
            except Exception:
                self.connected = False
                self._unreliable()
                log.warning("event feed lost Redis; resubscribing", exc_info=True)
                await asyncio.sleep(0.5)
                with contextlib.suppress(Exception):
                    await pubsub.subscribe(self._channel)
                    self.connected = True
