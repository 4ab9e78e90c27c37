"""Topics have the partitions they are declared with on a broker that creates topics on first mention
(``auto.create.topics.enable=true``, Apache Kafka's default, here with one partition each), and a topic such a
broker made before the services could stops them with an error that names it and the command that fixes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from assent.coach import COACH_TOPICS, CoachClient
from assent.messaging import Shortfall, TopicsNotAsDeclared, ensure_topics
from assent.topics import REGISTRY, STUDIO_SESSIONS
from assent_devstack import Service
from tests.conftest import wait_for
from tests.test_kafka_sasl import _missing_kafka_tools

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def eager_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A private Apache Kafka that creates a topic, with one partition, when a client first names it."""
    missing = _missing_kafka_tools()
    if missing is not None:
        pytest.skip(missing)
    from assent_devstack import start_kafka

    kafka = start_kafka(tmp_path_factory.mktemp("eager-kafka"), engine="kafka", auto_create_topics=True)
    try:
        yield kafka
    finally:
        kafka.stop()


async def partitions(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int] | None:
    """Each topic's number of partitions once the broker shows every one of them."""
    described = await admin.describe_topics(names)
    if any(found["error_code"] != 0 for found in described):
        return None
    return {found["topic"]: len(found["partitions"]) for found in described}


async def test_topics_have_their_declared_partitions_on_a_broker_that_creates_topics_on_first_mention(
    eager_kafka: Service,
) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=eager_kafka.endpoint)
    await admin.start()
    try:
        # What this broker does with a topic a metadata request names first: it makes it, with one partition.
        mentioned = "first.studio.sessions"
        assert await wait_for(lambda: partitions(admin, [mentioned])) == {mentioned: 1}

        # The services' start-up: every topic and its dead-letter twin as declared.
        await ensure_topics(eager_kafka.endpoint, "svc.")
        declared = {topic.full_name("svc."): topic.partitions for topic in REGISTRY}
        declared |= {topic.dlq_name("svc."): 1 for topic in REGISTRY}
        assert set(declared.values()) == {3, 1}
        assert await partitions(admin, list(declared)) == declared

        # A coach that starts before any service: its topics as declared too.
        async with CoachClient(eager_kafka.endpoint, topic_prefix="coach."):
            pass
        coach_topics = {topic.full_name("coach."): topic.partitions for topic in COACH_TOPICS}
        assert await partitions(admin, list(coach_topics)) == coach_topics

        # A topic the broker made before the services could: they stop, naming it and the command that fixes it.
        with pytest.raises(TopicsNotAsDeclared) as raised:
            await ensure_topics(eager_kafka.endpoint, "first.")
        error: Any = raised.value
        assert error.shortfalls == (Shortfall(STUDIO_SESSIONS.full_name("first."), 3, 1),)
        assert (
            f"kafka-topics.sh --bootstrap-server {eager_kafka.endpoint} --alter --topic first.studio.sessions "
            "--partitions 3"
        ) in str(error)
    finally:
        await admin.close()
