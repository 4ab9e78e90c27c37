"""The Task draft rules, without a broker or a database."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import ValidationError

from assent.domain import Agent, Refusal, Session
from assent.hashing import content_hash
from edits.domain import drafts

SESSION = Session("s1", "org", "g1", "operator")
TASK = "Answer refunds.\n"
ADA = Agent("a1", "org", "g1", "Ada", task=TASK, revision=4)
GONE = Agent("a3", "org", "g1", "Gus", live=False, task=TASK)
CY = Agent("a4", "org", "g2", "Cy", task=TASK)
ELSEWHERE = Agent("a5", "other", "g1", "Eve", task=TASK)
CAP = 64


def create(**overrides: Any) -> drafts.CreateTaskDraft:
    fields = {"agent_id": "a1", "content": "Answer refunds.\nCite the order.\n", "base_hash": content_hash(TASK)}
    return drafts.CreateTaskDraft.model_validate({**fields, "rationale": "mixups", **overrides})


def stored(
    draft_id: str = "d1", turn_id: str = "t1", seq: int = 3, status: str = "pending", **more: Any
) -> drafts.Draft:
    return drafts.Draft(
        draft_id=draft_id,
        org_id="org",
        agent_id="a1",
        session_id="s1",
        created_message_seq=seq,
        turn_id=turn_id,
        proposal_id=f"prop_{draft_id}",
        tool_call_id=f"call_{draft_id}",
        base_hash=content_hash(TASK),
        rationale="r",
        status=status,
        newest=drafts.DraftVersion(more.pop("version", 1), "Two.\n", content_hash("Two.\n"), "coach"),
        **more,
    )


def test_a_draft_of_a_live_member_binds_the_task_it_read() -> None:
    reviewed = drafts.review_create(SESSION, create(), ADA, CAP)
    assert isinstance(reviewed, drafts.DraftProposal)
    assert (reviewed.agent_name, reviewed.guild_id, reviewed.base_version, reviewed.base_hash) == (
        "Ada",
        "g1",
        4,
        content_hash(TASK),
    )
    assert (reviewed.before, reviewed.after) == (TASK, "Answer refunds.\nCite the order.\n")
    assert reviewed.proposed_hash == content_hash("Answer refunds.\nCite the order.\n")


@pytest.mark.parametrize(
    ("agent", "overrides", "status", "code"),
    [
        (None, {}, 404, "unknown_agent"),
        (ELSEWHERE, {}, 404, "unknown_agent"),
        (CY, {}, 422, "agent_out_of_reach"),
        (GONE, {}, 422, "agent_out_of_reach"),
        (ADA, {"base_hash": content_hash("old")}, 409, "stale_base_hash"),
        (ADA, {"content": TASK}, 422, "no_change"),
        (ADA, {"content": "x" * (CAP + 1)}, 422, "content_too_large"),
        (ADA, {"content": "é" * 33}, 422, "content_too_large"),  # 66 bytes, 33 characters
    ],
)
def test_a_draft_is_refused_with_a_reason(
    agent: Agent | None, overrides: dict[str, Any], status: int, code: str
) -> None:
    refused = drafts.review_create(SESSION, create(**overrides), agent, CAP)
    assert isinstance(refused, Refusal) and (refused.status, refused.code) == (status, code), refused


@pytest.mark.parametrize(
    "fields",
    [
        {"rationale": ""},
        {"base_hash": ""},
        {"agent_id": "a1", "extra": 1},
        {"content": "a\x00b"},
    ],
)
def test_arguments_outside_the_tools_schema_do_not_validate(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        create(**fields)


@pytest.mark.parametrize(
    ("waiting", "turn", "replaced"),
    [
        ([], "t1", None),
        ([stored("d1", "t0")], "t1", None),  # an earlier turn's draft stays
        ([stored("d1", "t1")], "t1", "d1"),
        ([stored("d1", "t1", 3), stored("d2", "t1", 5)], "t1", "d2"),  # the newest of the turn
        ([stored("d1", "t1", status="superseded")], "t1", None),
    ],
)
def test_a_new_draft_replaces_the_newest_waiting_one_of_the_same_turn(
    waiting: list[drafts.Draft], turn: str, replaced: str | None
) -> None:
    found = drafts.replaced(waiting, turn)
    assert (None if found is None else found.draft_id) == replaced


@pytest.mark.parametrize(
    ("content", "existing", "missing"),
    [
        ("No notes.\n", [], []),
        ("See {{note:org/a.md}}.\n", ["org/a.md"], []),
        ("See {{note:org/a.md}} and {{note:guild/g1/b.md}}.\n", ["org/a.md"], ["guild/g1/b.md"]),
        ("{{note:org/b.md}} {{note:org/a.md}} {{note:org/b.md}}\n", [], ["org/a.md", "org/b.md"]),
        ("{{note:org/a .md}} is not an embed\n", [], []),
    ],
)
def test_publishing_needs_every_note_the_draft_embeds(content: str, existing: list[str], missing: list[str]) -> None:
    assert drafts.missing_notes(content, existing) == missing
    refusal = drafts.missing_notes_refusal(missing)
    line = drafts.missing_notes_line(missing)
    if not missing:
        assert refusal is None and line is None
    else:
        assert refusal is not None and (refusal.status, refusal.code) == (409, "note_not_created")
        assert all(path in refusal.message and path in (line or "") for path in missing)


@pytest.mark.parametrize(
    ("draft", "content", "expected", "status", "code"),
    [
        (stored(), "Three.\n", None, None, None),
        (stored(version=2), "Three.\n", 2, None, None),
        (stored(version=2), "Three.\n", 1, 409, "stale_version"),
        (stored(), "Two.\n", None, 422, "no_change"),
        (stored(), "x" * (CAP + 1), None, 422, "content_too_large"),
        (stored(status="published"), "Three.\n", None, 409, "draft_resolved"),
        (stored(status="superseded"), "Three.\n", None, 409, "draft_resolved"),
    ],
)
def test_an_edit_adds_a_version_to_a_waiting_draft_only(
    draft: drafts.Draft, content: str, expected: int | None, status: int | None, code: str | None
) -> None:
    refusal = drafts.review_edit(draft, content, expected, CAP)
    assert (None if refusal is None else (refusal.status, refusal.code)) == (None if status is None else (status, code))


def test_a_draft_is_stale_once_the_task_moves() -> None:
    draft = stored()
    assert not drafts.moved(draft, TASK)
    assert drafts.moved(draft, TASK + "More.\n")
    assert drafts.moved(dataclasses.replace(draft, base_hash=content_hash("")), TASK)
