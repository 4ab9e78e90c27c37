"""The gateway's live-event feed on a real Redis: a replica hands its own events to its listeners at once and
exactly once (its echo from Redis is skipped), every other replica gets them through Redis, in order, and a
waiting decision learns at once that the feed lost Redis."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from assent.contracts import ProposalOutcome
from gateway.adapters.notify import EventFeed
from gateway.domain.events import LiveEvent, ProposalDecidedEvent, ProposalProposedEvent, StepEndedEvent
from tests.conftest import Endpoints

pytestmark = pytest.mark.integration


async def _next(queue: asyncio.Queue[LiveEvent]) -> LiveEvent:
    return await asyncio.wait_for(queue.get(), 10)


def outcome(decision_id: str) -> ProposalOutcome:
    return ProposalOutcome(
        decision_id=decision_id,
        proposal_id="p1",
        session_id="s",
        seq=1,
        kind="memory",
        outcome="applied",
        status=200,
        detail="applied",
    )


async def test_own_events_arrive_once_and_other_replicas_get_them_through_redis(endpoints: Endpoints) -> None:
    channel = f"feed{uuid.uuid4().hex[:8]}:events"
    mine, other = EventFeed(endpoints.redis_url, channel), EventFeed(endpoints.redis_url, channel)
    await mine.start()
    await other.start()
    try:
        async with mine.listen("s") as here, other.listen("s") as there:
            decided = mine.expect("dec_1")
            first = ProposalDecidedEvent(session_id="s", seq=1, outcome=outcome("dec_1"))
            await mine.publish([first, ProposalProposedEvent(session_id="s", seq=2, kind="memory")])
            # At once, before any round trip to Redis: the waiting decision and this replica's stream.
            assert decided.done() and decided.result() == first.outcome
            assert [here.get_nowait().event, here.get_nowait().event] == ["proposal.decided", "proposal.proposed"]
            # The other replica hears both through Redis, in order, without the origin tag.
            assert await _next(there) == first
            assert (await _next(there)).data == ProposalProposedEvent(session_id="s", seq=2, kind="memory").data
            # A marker from the other replica reaches this one through Redis after this one's own echoes would
            # have: nothing came in between, so its own events arrived exactly once.
            await other.publish([StepEndedEvent(session_id="s", turn_id="t", step=1)])
            assert (await _next(there)).event == "turn.step_ended"
            assert (await _next(here)).event == "turn.step_ended"
            assert here.empty()
    finally:
        mine.forget("dec_1")
        await mine.stop()
        await other.stop()


async def test_an_event_published_by_an_earlier_version_is_delivered(endpoints: Endpoints) -> None:
    """Replicas of an earlier version publish each event as a message of its own, with its origin inside."""
    channel = f"feed{uuid.uuid4().hex[:8]}:events"
    feed = EventFeed(endpoints.redis_url, channel)
    await feed.start()
    try:
        async with feed.listen("s") as here:
            decided = feed.expect("dec_old")
            old = ProposalDecidedEvent(session_id="s", seq=1, outcome=outcome("dec_old"))
            await feed._redis.publish(channel, json.dumps({**json.loads(old.data), "origin": "an-earlier-replica"}))
            assert await _next(here) == old
            assert await asyncio.wait_for(decided, 10) == old.outcome
    finally:
        feed.forget("dec_old")
        await feed.stop()


async def test_an_outcome_in_an_event_of_an_earlier_name_reaches_its_decision(endpoints: Endpoints) -> None:
    """A replica of an earlier version names the session's events ``request.proposed`` and ``request.decided``:
    no stream shows them, but the outcome one carries reaches the decision waiting on it here."""
    channel = f"feed{uuid.uuid4().hex[:8]}:events"
    feed = EventFeed(endpoints.redis_url, channel)
    await feed.start()
    try:
        async with feed.listen("s") as here:
            decided = feed.expect("dec_old")
            sent = outcome("dec_old")
            old = {"event": "request.decided", "session_id": "s", "seq": 1, "outcome": sent.model_dump(mode="json")}
            await feed._redis.publish(channel, json.dumps({"origin": "an-earlier-replica", "events": [old]}))
            assert await asyncio.wait_for(decided, 10) == sent
            assert here.empty()
    finally:
        feed.forget("dec_old")
        await feed.stop()


async def test_waiting_decisions_are_told_at_once_when_the_feed_loses_redis(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    """A decision waiting on its outcome is told (``None``) as soon as the feed loses Redis: the outcome may be
    announced by a replica it can no longer hear, and it reads the projection instead. One that comes later is
    not handed a future that could wait for ever: the feed says it is not reliable."""
    from assent_devstack import start_redis

    redis = await asyncio.to_thread(start_redis, tmp_path / "redis")
    feed = EventFeed(redis.endpoint, f"feed{uuid.uuid4().hex[:8]}:events")
    try:
        await feed.start()
        waiting = feed.expect("dec_waiting")
        assert feed.reliable and not waiting.done()
        await asyncio.to_thread(redis.stop)
        assert await asyncio.wait_for(waiting, 10) is None
        assert not feed.reliable
    finally:
        feed.forget("dec_waiting")
        await feed.stop()
        await asyncio.to_thread(redis.stop)
