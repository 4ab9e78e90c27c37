"""What the services create of the topic registry, and what they say when a topic has fewer partitions than it
is declared with (the part that needs no broker; tests/test_topics.py runs it against one)."""

from dataclasses import replace

import pytest

from assent.messaging import Shortfall, TopicsNotAsDeclared, declared_topics, partition_shortfalls
from assent.settings import ServiceSettings
from assent.topics import REGISTRY, STUDIO_SESSIONS, STUDIO_TURNS, TopicPolicy


@pytest.mark.parametrize(
    ("declared", "found", "short"),
    [
        ({"a": 3, "b": 3}, {"a": 3, "b": 3}, []),
        ({"a": 3, "b": 3}, {"a": 1, "b": 3}, [Shortfall("a", 3, 1)]),
        ({"a": 3, "b": 1}, {"a": 2, "b": 1}, [Shortfall("a", 3, 2)]),
        ({"a": 3, "b": 3}, {"b": 1, "a": 1}, [Shortfall("a", 3, 1), Shortfall("b", 3, 1)]),  # in declared order
        ({"a": 3}, {"a": 4}, []),  # more than declared: an operator added some while nothing waited in them
        ({"a": 3, "b": 3}, {"b": 3}, []),  # a topic not found is not compared
    ],
)
def test_a_topic_found_with_fewer_partitions_than_declared_falls_short(
    declared: dict[str, int], found: dict[str, int], short: list[Shortfall]
) -> None:
    assert partition_shortfalls(declared, found) == short


def test_the_error_names_each_topic_that_falls_short_and_the_command_that_fixes_it() -> None:
    error = TopicsNotAsDeclared([Shortfall("p.studio.sessions", 3, 1), Shortfall("p.studio.turns", 3, 2)], "k:9092")
    message = str(error)
    assert "p.studio.sessions has 1, declared 3; p.studio.turns has 2, declared 3" in message
    assert "auto.create.topics.enable=true" in message
    commands = [line.strip() for line in message.splitlines() if line.strip().startswith("kafka-topics.sh")]
    assert commands == [
        "kafka-topics.sh --bootstrap-server k:9092 --alter --topic p.studio.sessions --partitions 3",
        "kafka-topics.sh --bootstrap-server k:9092 --alter --topic p.studio.turns --partitions 3",
    ]


def test_each_topic_is_created_with_its_partitions_and_settings_and_its_dead_letter_twin_with_one_partition() -> None:
    kept_an_hour = replace(STUDIO_TURNS, config=(("retention.ms", "3600000"),))
    created = declared_topics("p.", [STUDIO_SESSIONS, kept_an_hour])
    assert [(t.name, t.num_partitions, t.replication_factor, t.topic_configs) for t in created] == [
        ("p.studio.sessions", 3, 1, {}),
        ("p.studio.sessions.dlq", 1, 1, {}),
        ("p.studio.turns", 3, 1, {"retention.ms": "3600000"}),
        ("p.studio.turns.dlq", 1, 1, {"retention.ms": "3600000"}),
    ]
    without = declared_topics("p.", REGISTRY, dead_letters=False)
    assert [t.name for t in without] == [topic.full_name("p.") for topic in REGISTRY]
    assert {t.num_partitions for t in without} == {3}


def test_the_topic_settings_set_replicas_partitions_min_insync_replicas_and_retention() -> None:
    settings = ServiceSettings(
        topic_partitions=6, topic_replication_factor=3, topic_min_insync_replicas=2, topic_retention_ms=86_400_000
    )
    created = declared_topics("p.", [STUDIO_SESSIONS], policy=settings.topic_policy())
    config = {"min.insync.replicas": "2", "retention.ms": "86400000"}
    assert [(t.name, t.num_partitions, t.replication_factor, t.topic_configs) for t in created] == [
        ("p.studio.sessions", 6, 3, config),
        ("p.studio.sessions.dlq", 1, 3, config),
    ]
    # Unset, each topic keeps its declared partitions and the broker's settings; a topic's own config stays.
    kept_an_hour = replace(STUDIO_TURNS, config=(("retention.ms", "3600000"),))
    [turns, _] = declared_topics("", [kept_an_hour], policy=ServiceSettings(topic_replication_factor=3).topic_policy())
    assert (turns.num_partitions, turns.replication_factor, turns.topic_configs) == (3, 3, {"retention.ms": "3600000"})


@pytest.mark.parametrize(
    ("policy", "refusal"),
    [
        (dict(replication_factor=2, min_insync_replicas=3), r"min.insync.replicas \(3\) must be between 1 and"),
        (dict(partitions=0), "at least one partition"),
        (dict(replication_factor=0), "replication factor must be at least 1"),
        (dict(retention_ms=-2), "-1 \\(forever\\)"),
    ],
)
def test_a_topic_policy_that_cannot_be_is_refused(policy: dict[str, int], refusal: str) -> None:
    with pytest.raises(ValueError, match=refusal):
        TopicPolicy(**policy)


def test_the_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSENT_CREATE_TOPICS", "false")
    monkeypatch.setenv("ASSENT_TOPIC_REPLICATION_FACTOR", "3")
    monkeypatch.setenv("ASSENT_TOPIC_MIN_INSYNC_REPLICAS", "2")
    monkeypatch.setenv("ASSENT_TOPIC_RETENTION_MS", "-1")
    settings = ServiceSettings()
    assert settings.create_topics is False
    assert settings.topic_policy() == TopicPolicy(replication_factor=3, min_insync_replicas=2, retention_ms=-1)
    monkeypatch.setenv("ASSENT_TOPIC_MIN_INSYNC_REPLICAS", "4")
    with pytest.raises(ValueError, match=r"min\.insync\.replicas \(4\)"):
        ServiceSettings().topic_policy()
