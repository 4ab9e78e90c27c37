"""Topics have the partitions they are declared with on a broker that creates topics on first mention
(``auto.create.topics.enable=true``, Apache Kafka's default, here with one partition each), and a topic such a
broker made before the services could stops them with an error that names it and the command that fixes it.

Topics as configuration: what ``deploy/kafka`` ships (Strimzi ``KafkaTopic`` resources, ``create-topics.sh``) is the
registry with the settings of ``deploy/kafka/topics.env``, and a service that may not create topics
(``ASSENT_CREATE_TOPICS=false``) stops on a missing one, naming it, and starts once the script made them."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from assent.coach import CoachClient, coach_topics
from assent.messaging import Shortfall, TopicsNotAsDeclared, declared_topics, ensure_topics
from assent.topics import REGISTRY, STUDIO_SESSIONS, TopicPolicy
from assent_devstack import Service
from assent_devstack.system import ServiceProcess, free_port
from contracts import export
from tests.conftest import Endpoints, Stack, create_database, fresh_prefix, wait_for
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
        created = {topic.full_name("coach."): topic.partitions for topic in coach_topics()}
        assert await partitions(admin, list(created)) == created

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


# --- topics as configuration ----------------------------------------------------------------------------------

KAFKA = Path(__file__).resolve().parents[1] / "deploy" / "kafka"
Created = tuple[str, int, int, dict[str, str]]


def as_created(topics: list[NewTopic]) -> list[Created]:
    return [(t.name, t.num_partitions, t.replication_factor, t.topic_configs) for t in topics]


def run_create_topics(env: dict[str, str], tmp_path: Path) -> list[Created]:
    """Run deploy/kafka/create-topics.sh with a kafka-topics.sh that only writes down what it is asked: each topic,
    its partitions, replicas and --config, as the script asked for it."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    asked = tmp_path / "asked"
    stand_in = tmp_path / "kafka-topics.sh"
    stand_in.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(asked))}\n')
    stand_in.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ASSENT_TOPIC_")}
    subprocess.run(
        ["bash", str(KAFKA / "create-topics.sh"), "--command-config", "client.properties"],
        env={**clean, "KAFKA_TOPICS": str(stand_in), **env},
        check=True,
        capture_output=True,
    )
    created = []
    for line in asked.read_text().splitlines():
        words = line.split()
        assert words[:6] == [
            "--bootstrap-server",
            env["KAFKA_BOOTSTRAP_SERVERS"],
            "--command-config",
            "client.properties",
            "--create",
            "--if-not-exists",
        ], line
        option = dict(zip(words[6::2], words[7::2], strict=False))
        configs = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--config")
        created.append((option["--topic"], int(option["--partitions"]), int(option["--replication-factor"]), configs))
    return created


def test_deploys_kafka_topics_are_the_registry_with_the_settings_of_topics_env(tmp_path: Path) -> None:
    policy, prefix = export.topic_settings()
    assert (policy, prefix) == (TopicPolicy(replication_factor=3, min_insync_replicas=2, retention_ms=604_800_000), "")
    # What a service with these settings would create, every topic and its dead-letter twin:
    expected = as_created(declared_topics(prefix, REGISTRY, policy=policy))
    assert len(expected) == 2 * len(REGISTRY)
    assert {configs["min.insync.replicas"] for *_, configs in expected} == {"2"}

    resources = list(yaml.safe_load_all((KAFKA / "topics.yaml").read_text()))
    assert {(r["apiVersion"], r["kind"]) for r in resources} == {("kafka.strimzi.io/v1beta2", "KafkaTopic")}
    assert {r["metadata"]["labels"]["strimzi.io/cluster"] for r in resources} == {"assent"}
    strimzi = [
        (r["spec"]["topicName"], r["spec"]["partitions"], r["spec"]["replicas"], r["spec"].get("config", {}))
        for r in resources
    ]
    assert strimzi == expected
    assert [r["metadata"]["name"] for r in resources] == [name for name, *_ in expected]

    script = run_create_topics({"KAFKA_BOOTSTRAP_SERVERS": "k:9092"}, tmp_path / "defaults")
    assert script == expected
    # The script reads the services' settings: another prefix, one replica, no min.insync.replicas, 6 partitions.
    given = {
        "KAFKA_BOOTSTRAP_SERVERS": "k:9092",
        "ASSENT_TOPIC_PREFIX": "p.",
        "ASSENT_TOPIC_PARTITIONS": "6",
        "ASSENT_TOPIC_REPLICATION_FACTOR": "1",
        "ASSENT_TOPIC_MIN_INSYNC_REPLICAS": "",
    }
    other = TopicPolicy(partitions=6, replication_factor=1, retention_ms=604_800_000)
    assert run_create_topics(given, tmp_path / "given") == as_created(declared_topics("p.", REGISTRY, policy=other))


async def test_a_service_that_may_not_create_topics_stops_on_a_missing_one_and_starts_once_they_are_made(
    stack: Stack, endpoints: Endpoints, tmp_path: Path
) -> None:
    prefix = fresh_prefix("nocreate")
    database_url = await create_database(endpoints.database_url, f"assent_nocreate_{uuid.uuid4().hex[:8]}")
    service = ServiceProcess(
        "routines",
        free_port(),
        {
            **stack.system.env,
            "DATABASE_URL": database_url,
            "ASSENT_TOPIC_PREFIX": prefix,
            "ASSENT_CREATE_TOPICS": "false",
        },
        tmp_path / "routines.log",
    )
    service.launch()
    assert await asyncio.to_thread(service.wait_exit, 120) == 3, service.log_tail()
    log = service.log_path.read_text()
    assert f"these topics are missing: {STUDIO_SESSIONS.full_name(prefix)}, " in log
    assert "ASSENT_CREATE_TOPICS=false" in log and "deploy/kafka/create-topics.sh" in log
    for topic in REGISTRY:
        assert topic.full_name(prefix) in log and topic.dlq_name(prefix) in log
    admin = AIOKafkaAdminClient(bootstrap_servers=endpoints.kafka)
    await admin.start()
    try:
        assert [name for name in await admin.list_topics() if name.startswith(prefix)] == []  # it created none

        # The operator's script, with this cluster's settings (one broker: one replica); what it asks for is
        # created as asked, and the service then starts.
        settings = {
            "KAFKA_BOOTSTRAP_SERVERS": endpoints.kafka,
            "ASSENT_TOPIC_PREFIX": prefix,
            "ASSENT_TOPIC_REPLICATION_FACTOR": "1",
            "ASSENT_TOPIC_MIN_INSYNC_REPLICAS": "1",
            "ASSENT_TOPIC_RETENTION_MS": "3600000",
        }
        asked = run_create_topics(settings, tmp_path)
        answers = await admin.create_topics(
            [
                NewTopic(name, partitions, replicas, topic_configs=configs)
                for name, partitions, replicas, configs in asked
            ]
        )
        assert {answer[1] for answer in answers.topic_errors} == {0}
        await asyncio.to_thread(service.start)
        service.stop()

        described = await admin.describe_topics([STUDIO_SESSIONS.full_name(prefix), STUDIO_SESSIONS.dlq_name(prefix)])
        assert [len(d["partitions"]) for d in described] == [3, 1]
        [configs] = (
            await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, STUDIO_SESSIONS.full_name(prefix))])
        )[0].resources
        found = {entry[0]: entry[1] for entry in configs[4]}
        assert (found["retention.ms"], found["min.insync.replicas"]) == ("3600000", "1")
    finally:
        await admin.close()
