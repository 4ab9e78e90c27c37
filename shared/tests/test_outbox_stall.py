"""The rule that tells the gateway Kafka takes none of its messages (:func:`assent.outbox.writes_stalled`), and what
it is given: how long the relay's oldest row has waited (:meth:`assent.outbox.OutboxRelay.waited`), handed over, in
flight and kept to be tried again."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from sqlalchemy import MetaData
from sqlalchemy.ext.asyncio import create_async_engine

from assent.outbox import Envelope, Outbox, OutboxRelay, outbox_table, writes_stalled


@pytest.mark.parametrize(
    ("waited", "bound", "stalled"),
    [
        (None, 10.0, False),  # no row waits: nothing tells of Kafka (a write then waits at most the bound)
        (0.0, 10.0, False),
        (0.003, 10.0, False),  # one produce
        (5.5, 10.0, False),  # a leader's election: the writes wait, they are not refused
        (10.0, 10.0, False),  # at the bound, not past it
        (10.001, 10.0, True),
        (40.0, 10.0, True),  # the producer gave up once (its delivery timeout): the relay tries again
        (1e6, 10.0, True),
        (40.0, 0.0, False),  # a bound of 0 never refuses
        (None, 0.0, False),
        (2.0, 1.0, True),
    ],
)
def test_writes_stall_once_the_oldest_row_has_waited_past_the_bound(
    waited: float | None, bound: float, stalled: bool
) -> None:
    assert writes_stalled(waited, bound) is stalled


class Broker:
    """Publishes into a list; while ``hold`` is set its acknowledgements wait, while ``down`` it refuses."""

    def __init__(self) -> None:
        self.down = False
        self.hold: asyncio.Event | None = None
        self.published: list[bytes] = []

    async def publish(self, payload: bytes, **_: Any) -> asyncio.Future[None]:
        if self.down:
            raise ConnectionError("the broker is down")
        self.published.append(payload)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.hold is None:
            done.set_result(None)
        else:
            hold = self.hold
            asyncio.get_running_loop().create_task(hold.wait()).add_done_callback(lambda _: done.set_result(None))
        return done


def envelopes(*ids: int) -> list[Envelope]:
    return [Envelope(i, "t.topic", "k", b"{}", {}, "X") for i in ids]


async def test_the_relay_says_how_long_its_oldest_row_has_waited_until_kafka_takes_it() -> None:
    outbox = Outbox(outbox_table(MetaData(schema="stall_test")), "t.")
    broker = Broker()
    engine = create_async_engine("postgresql+asyncpg://nobody@127.0.0.1:1/none")  # never connected
    relay = OutboxRelay(engine, outbox, broker)  # type: ignore[arg-type]
    try:
        assert relay.waited() is None
        outbox._hand_over(envelopes(1))
        first = outbox.committed_since
        assert first is not None
        assert relay.waited(first + 3.0) == pytest.approx(3.0)  # handed over, not yet published

        broker.down = True  # refused: kept to be tried again, still timed from the first row
        with contextlib.suppress(ConnectionError):
            await relay.publish_committed(delete=False)
        outbox._hand_over(envelopes(2))
        assert relay.waited(first + 12.0) == pytest.approx(12.0)
        assert writes_stalled(relay.waited(first + 12.0), 10.0)

        broker.down, broker.hold = False, asyncio.Event()  # taken, but not yet acknowledged: in flight
        publishing = asyncio.create_task(relay.publish_committed(delete=False))
        await asyncio.sleep(0.01)
        assert relay.backlog() == 2 and relay.waited(first + 20.0) == pytest.approx(20.0)
        broker.hold.set()
        await publishing
        assert relay.waited() is None and relay.backlog() == 0  # acknowledged: nothing waits, writes go again
        assert not writes_stalled(relay.waited(), 10.0)
    finally:
        await engine.dispose()
