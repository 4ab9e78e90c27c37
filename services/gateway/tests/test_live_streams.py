"""Which live stream an event reaches, without Redis (:meth:`EventFeed.publish` hands this replica's own streams
their events before it talks to Redis; the send to Redis fails here, unheard)."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.adapters.notify import EventFeed
from gateway.handlers import _event, _page_event

NOWHERE = "redis://127.0.0.1:9/0"


def drained(queue: asyncio.Queue[dict[str, Any]]) -> list[str]:
    events = []
    while not queue.empty():
        events.append(queue.get_nowait()["event"])
    return events


async def test_a_page_event_reaches_its_agents_page_only_and_a_session_event_its_session_only() -> None:
    feed = EventFeed(NOWHERE, "test")
    # A session whose id is the agent's id: the two kinds of stream are apart all the same.
    async with (
        feed.listen("agent_ada", "proposals") as ada,
        feed.listen("agent_bob", "proposals") as bob,
        feed.listen("agent_ada") as session,
    ):
        await feed.publish(
            [
                _event("proposal.proposed", "agent_ada", seq=1, kind="source"),
                _page_event("proposal.proposed", "agent_ada", "p1"),
                _page_event("proposal.decided", "agent_ada", "p1"),
                _page_event("proposal.proposed", "agent_bob", "p2"),
            ]
        )
        assert drained(ada) == ["proposal.proposed", "proposal.decided"]
        assert drained(bob) == ["proposal.proposed"]
        assert drained(session) == ["proposal.proposed"]
    await feed.stop()
