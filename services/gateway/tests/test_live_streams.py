"""Which live stream an event reaches, without Redis (:meth:`EventFeed.publish` hands this replica's own streams
their events before it talks to Redis; the send to Redis fails here, unheard)."""

from __future__ import annotations

import asyncio
import json

from gateway.adapters.notify import EventFeed
from gateway.domain.events import LiveEvent, PageEvent, ProposalProposedEvent, read_event

NOWHERE = "redis://127.0.0.1:9/0"


def drained(queue: asyncio.Queue[LiveEvent]) -> list[str]:
    events = []
    while not queue.empty():
        events.append(queue.get_nowait().event)
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
                ProposalProposedEvent(session_id="agent_ada", seq=1, kind="source"),
                PageEvent(event="proposal.proposed", agent_id="agent_ada", proposal_id="p1"),
                PageEvent(event="proposal.decided", agent_id="agent_ada", proposal_id="p1"),
                PageEvent(event="proposal.proposed", agent_id="agent_bob", proposal_id="p2"),
            ]
        )
        assert drained(ada) == ["proposal.proposed", "proposal.decided"]
        assert drained(bob) == ["proposal.proposed"]
        assert drained(session) == ["proposal.proposed"]
    await feed.stop()


def test_an_event_is_sent_with_the_fields_it_always_had_and_read_back_as_itself() -> None:
    session = ProposalProposedEvent(session_id="s1", seq=1, kind="memory")
    page = PageEvent(event="proposal.decided", agent_id="ada", proposal_id="p1")
    assert json.loads(session.data) == {"event": "proposal.proposed", "session_id": "s1", "seq": 1, "kind": "memory"}
    assert json.loads(page.data) == {
        "event": "proposal.decided",
        "stream": "proposals",
        "agent_id": "ada",
        "proposal_id": "p1",
    }
    assert read_event(json.loads(session.data)) == session and read_event(json.loads(page.data)) == page
    assert read_event({"event": "something.else", "session_id": "s1"}) is None
