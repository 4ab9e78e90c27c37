"""Decision outcomes fanned out to every gateway replica through Redis pub/sub.

The replica that consumes a ``ProposalOutcome`` (one per consumer group) publishes it on one channel; the
replica whose HTTP request is waiting on that decision picks it up. Pub/sub is fire-and-forget, so a
waiter also re-reads the projection in PostgreSQL now and then: a lost notification only costs latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from redis.asyncio import Redis

log = logging.getLogger(__name__)


class OutcomeFeed:
    def __init__(self, redis_url: str, channel: str) -> None:
        self._redis = Redis.from_url(redis_url)
        self._channel = channel
        self._waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        await pubsub.subscribe(self._channel)
        self._reader = asyncio.create_task(self._read(pubsub), name="outcome-feed")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._redis.aclose()

    def expect(self, decision_id: str) -> asyncio.Future[dict[str, Any]]:
        return self._waiters.setdefault(decision_id, asyncio.get_running_loop().create_future())

    def forget(self, decision_id: str) -> None:
        self._waiters.pop(decision_id, None)

    async def publish(self, outcome: dict[str, Any]) -> None:
        try:
            await self._redis.publish(self._channel, json.dumps(outcome, default=str))
        except Exception:  # waiters fall back to the database
            log.warning("could not publish outcome %s to Redis", outcome.get("decision_id"), exc_info=True)

    async def _read(self, pubsub: Any) -> None:
        while True:
            try:
                async for message in pubsub.listen():
                    outcome = json.loads(message["data"])
                    future = self._waiters.get(outcome.get("decision_id"))
                    if future is not None and not future.done():
                        future.set_result(outcome)
            except asyncio.CancelledError:
                await pubsub.aclose()
                raise
            except Exception:
                log.warning("outcome feed lost Redis; resubscribing", exc_info=True)
                await asyncio.sleep(0.5)
                with contextlib.suppress(Exception):
                    await pubsub.subscribe(self._channel)
