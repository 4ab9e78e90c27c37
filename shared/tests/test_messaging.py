"""The consumer wiring, in memory (FastStream's TestKafkaBroker): good messages reach the handler, unreadable
ones and hopeless ones go to the dead-letter topic, and the consumer carries on."""

from typing import Any

from faststream.kafka import TestKafkaBroker
from faststream.kafka.annotations import KafkaMessage
from sqlalchemy.exc import DataError

from assent.contracts import Message, StepEnded
from assent.messaging import make_broker, subscribe
from assent.topics import STUDIO_TURNS


def step(n: int) -> StepEnded:
    return StepEnded(session_id="s", turn_id="t", step=n, tool_call_ids=("c",))


async def test_good_bad_and_hopeless_messages() -> None:
    broker = make_broker("127.0.0.1:9", client_id="test", idempotent=False)
    handled: list[Message] = []
    dead: list[tuple[bytes, dict[str, Any]]] = []

    async def handler(message: Message) -> None:
        assert isinstance(message, StepEnded)
        if message.step == 7:
            raise DataError("INSERT ...", {}, Exception("value out of range"))
        handled.append(message)

    subscribe(broker, STUDIO_TURNS, prefix="p.", group_id="g", handler=handler)

    @broker.subscriber(STUDIO_TURNS.dlq_name("p."))
    async def capture(message: KafkaMessage) -> None:
        dead.append((message.body, dict(message.headers)))

    first, hopeless, last = step(1), step(7), step(2)
    async with TestKafkaBroker(broker) as test_broker:
        topic = STUDIO_TURNS.full_name("p.")
        await test_broker.publish(first.to_bytes(), topic, key=b"s")
        await test_broker.publish(b"{not json", topic, key=b"s")
        await test_broker.publish(b'{"type": "ToolCall", "v": 1}', topic, key=b"s")  # not this topic's message
        await test_broker.publish(hopeless.to_bytes(), topic, key=b"s")
        await test_broker.publish(last.to_bytes(), topic, key=b"s")

    assert handled == [first, last]
    assert [body for body, _ in dead] == [b"{not json", b'{"type": "ToolCall", "v": 1}', hopeless.to_bytes()]
    errors = [headers["x-dlq-error"] for _, headers in dead]
    assert "not JSON" in errors[0] and "does not belong" in errors[1] and "value out of range" in errors[2]
    assert {headers["x-dlq-topic"] for _, headers in dead} == {"p.studio.turns"}
