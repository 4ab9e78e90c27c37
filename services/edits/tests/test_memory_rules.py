"""The memory-edit rules, without a broker or a database."""

import pytest
from pydantic import ValidationError

from assent.domain import Agent, Refusal, Session, invalid_arguments
from assent.hashing import content_hash
from edits.domain import memory
from edits.domain.model import LiveMemory

SESSION = Session("s1", "org", "guild", "operator")
AGENT = Agent("a1", "org", "guild", "Ada", live=True)
LIVE = LiveMemory("a1", "one\ntwo\n", 3, content_hash("one\ntwo\n"))


def args(**overrides: object) -> memory.EditMemory:
    fields: dict[str, object] = {"agent_id": "a1", "content": "one\nthree\nfour\n", "base_version": 3, "reason": "r"}
    return memory.EditMemory.model_validate({**fields, **overrides})


def test_a_good_edit_binds_the_base_and_keeps_both_texts() -> None:
    reviewed = memory.review_edit(SESSION, AGENT, LIVE, args(), max_bytes=1024)
    assert isinstance(reviewed, memory.MemoryProposal)
    assert reviewed.base_version == 3 and reviewed.base_hash == LIVE.hash
    assert reviewed.proposed_hash == content_hash("one\nthree\nfour\n")
    assert reviewed.before == LIVE.content and reviewed.after == "one\nthree\nfour\n"


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        (None, "unknown_agent"),
        (Agent("a1", "other-org", "guild", "Ada", live=True), "unknown_agent"),
        (Agent("a1", "org", "other-guild", "Ada", live=True), "agent_out_of_reach"),
        (Agent("a1", "org", None, "Ada", live=True), "agent_out_of_reach"),
        (Agent("a1", "org", "guild", "Ada", live=False), "agent_out_of_reach"),
    ],
)
def test_reach_is_a_live_member_of_the_source_guild(agent: Agent | None, expected: str) -> None:
    refusal = memory.review_edit(SESSION, agent, LIVE, args(), max_bytes=1024)
    assert isinstance(refusal, Refusal) and refusal.code == expected


def test_the_byte_cap_counts_utf8_bytes() -> None:
    assert isinstance(
        memory.review_edit(SESSION, AGENT, LIVE, args(content="é" * 512), max_bytes=1024), memory.MemoryProposal
    )
    refusal = memory.review_edit(SESSION, AGENT, LIVE, args(content="é" * 513), max_bytes=1024)
    assert isinstance(refusal, Refusal) and (refusal.status, refusal.code) == (422, "content_too_large")
    assert "1026 bytes" in refusal.message


def test_the_base_version_must_be_live() -> None:
    refusal = memory.review_edit(SESSION, AGENT, LIVE, args(base_version=2), max_bytes=1024)
    assert isinstance(refusal, Refusal) and (refusal.status, refusal.code) == (409, "stale_base_version")


def test_an_edit_that_changes_nothing_is_refused() -> None:
    refusal = memory.review_edit(SESSION, AGENT, LIVE, args(content=LIVE.content), max_bytes=1024)
    assert isinstance(refusal, Refusal) and refusal.code == "no_change"


@pytest.mark.parametrize(
    "bad",
    [{"reason": ""}, {"base_version": -1}, {"content": None}, {"agent_id": ""}, {"extra": 1}],
)
def test_arguments_are_validated(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError) as caught:
        args(**bad)
    refusal = invalid_arguments("studio_edit_memory", caught.value)
    assert refusal.code == "invalid_arguments" and refusal.message.startswith("studio_edit_memory:")


def test_the_byte_cap_holds_for_direct_writes_too() -> None:
    assert memory.check_byte_cap("x" * 1024, 1024) is None
    refusal = memory.check_byte_cap("x" * 1025, 1024, "the Memory")
    assert refusal is not None and refusal.code == "content_too_large" and "1025 bytes" in refusal.message
