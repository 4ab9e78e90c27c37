"""Offsets are committed in the background, in order, coalesced, only for partitions still assigned; a failed
commit is not fatal; a failed fetch is rewound to its earliest record per partition; the topics of one fetch are
handled at the same time, and one that fails brings the whole fetch back (a fake aiokafka consumer)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import TopicPartition

from assent.runtime.consumer import Offsets, handle_fetch


@dataclass
class Record:
    topic: str
    partition: int
    offset: int


@dataclass
class FakeConsumer:
    assigned: set[TopicPartition]
    commits: list[dict[TopicPartition, int]] = field(default_factory=list)
    seeks: list[tuple[TopicPartition, int]] = field(default_factory=list)
    refuse: bool = False
    gate: asyncio.Event | None = None

    def assignment(self) -> set[TopicPartition]:
        return self.assigned

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.refuse:
            raise RuntimeError("the group rebalanced")
        self.commits.append(dict(offsets))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))


@dataclass
class Subscriber:
    consumer: Any


A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


async def test_a_commit_names_the_next_offset_of_each_partition_and_skips_partitions_no_longer_assigned() -> None:
    consumer = FakeConsumer({A0, A1})
    offsets = Offsets(Subscriber(consumer), interval=0)
    offsets.handled([Record("a", 0, 4), Record("a", 0, 5), Record("a", 1, 9), Record("b", 0, 2)])
    await offsets.flush()
    assert consumer.commits == [{A0: 6, A1: 10}]


async def test_what_is_handled_while_a_commit_is_in_flight_goes_in_one_next_commit() -> None:
    consumer = FakeConsumer({A0, A1}, gate=asyncio.Event())
    offsets = Offsets(Subscriber(consumer), interval=0)
    offsets.handled([Record("a", 0, 1)])
    await asyncio.sleep(0)  # the first commit is now waiting on the coordinator
    offsets.handled([Record("a", 0, 2)])
    offsets.handled([Record("a", 1, 7), Record("a", 0, 3)])
    consumer.gate.set()  # type: ignore[union-attr]
    await offsets.flush()
    assert consumer.commits == [{A0: 2}, {A0: 4, A1: 8}]


async def test_commits_keep_their_interval_and_flush_sends_what_is_pending_at_once() -> None:
    consumer = FakeConsumer({A0})
    offsets = Offsets(Subscriber(consumer), interval=3600)
    offsets.handled([Record("a", 0, 1)])
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert consumer.commits == [{A0: 2}]  # the first goes at once
    offsets.handled([Record("a", 0, 2)])
    await offsets.flush()  # would otherwise wait an hour
    assert consumer.commits == [{A0: 2}, {A0: 3}]


async def test_a_refused_commit_is_logged_and_the_next_one_still_goes() -> None:
    consumer = FakeConsumer({A0}, refuse=True)
    offsets = Offsets(Subscriber(consumer), interval=0)
    offsets.handled([Record("a", 0, 1)])
    await offsets.flush()
    consumer.refuse = False
    offsets.handled([Record("a", 0, 2)])
    await offsets.flush()
    assert consumer.commits == [{A0: 3}]


def test_a_failed_fetch_is_rewound_to_its_earliest_record_per_partition() -> None:
    consumer = FakeConsumer({A0, B0})
    Offsets(Subscriber(consumer)).rewind([Record("a", 0, 7), Record("b", 0, 3), Record("a", 0, 5)])
    assert sorted(consumer.seeks) == [(A0, 5), (B0, 3)]


async def test_the_topics_of_one_fetch_are_handled_at_the_same_time_each_in_order() -> None:
    consumer = FakeConsumer({A0, B0})
    offsets = Offsets(Subscriber(consumer), interval=0.0)
    seen: dict[str, list[int]] = {"a": [], "b": []}
    a_started, b_started = asyncio.Event(), asyncio.Event()

    async def on_a(records: Any) -> None:
        a_started.set()
        await asyncio.wait_for(b_started.wait(), 5)  # one at a time, this would wait for good
        seen["a"] += [record.offset for record in records]

    async def on_b(records: Any) -> None:
        b_started.set()
        await asyncio.wait_for(a_started.wait(), 5)
        seen["b"] += [record.offset for record in records]

    fetched = [Record("a", 0, 4), Record("b", 0, 9), Record("a", 0, 5)]
    await handle_fetch(fetched, {"a": on_a, "b": on_b}, offsets)
    await offsets.flush()
    assert seen == {"a": [4, 5], "b": [9]}
    assert consumer.commits == [{A0: 6, B0: 10}]
    assert consumer.seeks == []


async def test_a_failing_topic_cancels_the_others_and_the_whole_fetch_comes_again() -> None:
    consumer = FakeConsumer({A0, B0})
    offsets = Offsets(Subscriber(consumer), interval=0.0)
    b_started, b_cancelled = asyncio.Event(), asyncio.Event()

    async def on_a(records: Any) -> None:
        await b_started.wait()
        raise ValueError("the database refused it")

    async def on_b(records: Any) -> None:
        b_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            b_cancelled.set()
            raise

    with pytest.raises(ValueError, match="refused"):
        await handle_fetch([Record("a", 0, 4), Record("b", 0, 9)], {"a": on_a, "b": on_b}, offsets)
    await offsets.flush()
    assert b_cancelled.is_set()
    assert sorted(consumer.seeks) == [(A0, 4), (B0, 9)]
    assert consumer.commits == []


@dataclass
class GroupConsumer:
    """What :meth:`Offsets.caught_up` reads of the group's consumer: partitions, and the group's committed offsets."""

    committed_offsets: dict[TopicPartition, int]

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0, 1}

    def assignment(self) -> set[TopicPartition]:
        return set()  # nothing to commit here

    async def committed(self, tp: TopicPartition) -> int | None:
        return self.committed_offsets.get(tp)


def ends(offsets: dict[TopicPartition, int]) -> Any:
    async def read(partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: offsets[tp] for tp in partitions}

    return read


async def test_caught_up_waits_for_the_handling_of_what_the_topic_held_and_judges_the_rest_by_the_group() -> None:
    consumer = GroupConsumer({A1: 3})  # another replica handled partition 1 up to its end
    offsets = Offsets(Subscriber(consumer), interval=0)
    offsets.handled([Record("a", 0, 6)])
    assert await offsets.caught_up("a", ends({A0: 7, A1: 3}), timeout=1)
    waiting = asyncio.create_task(offsets.caught_up("a", ends({A0: 9, A1: 3}), timeout=30))
    await asyncio.sleep(0)
    offsets.handled([Record("a", 0, 7)])
    await asyncio.sleep(0)
    assert not waiting.done()  # offset 8 is not handled yet
    offsets.handled([Record("a", 0, 8)])
    assert await waiting
    assert not await offsets.caught_up("a", ends({A0: 9, A1: 4}), timeout=0.05)  # the group is behind on 1


async def test_caught_up_inside_a_fetchs_handlers_answers_at_once_rather_than_wait_for_itself() -> None:
    offsets = Offsets(Subscriber(GroupConsumer({})), interval=0)
    answers: list[bool] = []

    async def handler(records: Any) -> None:
        answers.append(await offsets.caught_up("a", ends({A0: 99, A1: 0}), timeout=30))

    await handle_fetch([Record("a", 0, 0)], {"a": handler}, offsets)
    assert answers == [False]
