"""What the services create of the topic registry, and what they say when a topic has fewer partitions than it
is declared with (the part that needs no broker; tests/test_topics.py runs it against one)."""

from dataclasses import replace

import pytest

from assent.messaging import Shortfall, TopicsNotAsDeclared, declared_topics, partition_shortfalls
from assent.topics import REGISTRY, STUDIO_SESSIONS, STUDIO_TURNS


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
