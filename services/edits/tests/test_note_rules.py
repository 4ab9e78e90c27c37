"""The note rules, without a broker or a database."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from assent.domain import Agent, Refusal, Session
from assent.hashing import content_hash
from edits.domain import notes

SESSION = Session("s1", "org", "g1", "operator")
ADA = Agent("a1", "org", "g1", "Ada")
BO = Agent("a2", "org", "g1", "Bo")
GONE = Agent("a3", "org", "g1", "Gus", live=False)
CY = Agent("a4", "org", "g2", "Cy")
MEMBERS = [BO, ADA, GONE]  # named in order on the card
CAP = 1024


def live(path: str = "guild/g1/refunds.md", content: str = "one\ntwo\n", version: int = 3) -> notes.LiveNote:
    parsed = notes.parse_display_path(path)
    assert isinstance(parsed, notes.NotePath)
    return notes.LiveNote(
        "n1", "org", parsed.level, parsed.scope_id, parsed.key, "Refunds", path, content, version, content_hash(content)
    )


def request(**fields: Any) -> notes.CreateNote | notes.EditNote | notes.DeleteNote:
    return notes.NoteRequest.model_validate({"reason": "r", **fields}).root


def create(**overrides: Any) -> notes.CreateNote:
    args = request(**{"action": "create", "level": "guild", "key": "refunds.md", "content": "a\nb\n", **overrides})
    assert isinstance(args, notes.CreateNote)
    return args


@pytest.mark.parametrize(
    ("level", "scope", "key", "path"),
    [
        ("agent", "a1", "style.md", "agent/a1/style.md"),
        ("guild", "g1", "refunds.md", "guild/g1/refunds.md"),
        ("org", None, "policy.md", "org/policy.md"),
    ],
)
def test_display_paths_name_the_level(level: str, scope: str | None, key: str, path: str) -> None:
    assert notes.display_path(level, scope, key) == path
    parsed = notes.parse_display_path(path)
    assert parsed == notes.NotePath(level, scope, key) and isinstance(parsed, notes.NotePath)
    assert parsed.display_path == path


@pytest.mark.parametrize(
    ("key", "level", "code"),
    [
        ("ok.md", "agent", None),
        ("ok.md", "org", None),
        ("task.md", "guild", None),
        ("a/b.md", "org", "invalid_key"),
        ("a\\b.md", "org", "invalid_key"),
        ("..md", "org", "invalid_key"),
        ("x..y.md", "guild", "invalid_key"),
        ("notes.txt", "org", "invalid_key"),
        (".md", "org", "invalid_key"),
        ("task.md", "agent", "not_a_note"),
        ("memory.md", "agent", "not_a_note"),
        ("Memory.md", "agent", "not_a_note"),
    ],
)
def test_keys_are_md_file_names_and_agents_keep_their_own_files(key: str, level: str, code: str | None) -> None:
    refusal = notes.check_key(key, level)
    assert (None if refusal is None else refusal.code) == code


@pytest.mark.parametrize(
    "path",
    [
        "agent/a1/task.md",  # a Task
        "agent/a1/memory.md",
        "scripts/run.py",
        "objects/orders/1",
        "records/x.md",
        "x.md",
        "org/a/b.md",
        "guild//x.md",
        "agent/a1/x.txt",
        "org/../x.md",
    ],
)
def test_anything_but_a_note_is_not_a_note(path: str) -> None:
    refused = notes.parse_display_path(path)
    assert isinstance(refused, Refusal) and (refused.status, refused.code) == (422, "not_a_note")


@pytest.mark.parametrize(
    ("task", "paths"),
    [
        ("", set()),
        ("Follow {{note:guild/g1/refunds.md}}.\n", {"guild/g1/refunds.md"}),
        ("{{note:org/a.md}}\nthen\n  {{note:agent/a1/b.md}}", {"org/a.md", "agent/a1/b.md"}),
        ("{{ note:org/a.md }} {{note:}} {note:org/a.md}", set()),
        ("{{note:org/a.md}}{{note:org/a.md}}", {"org/a.md"}),
    ],
)
def test_a_task_embeds_a_note_with_a_marker(task: str, paths: set[str]) -> None:
    assert notes.embedded_paths(task) == paths
    for path in paths:
        assert notes.embeds(task, path)
    assert not notes.embeds(task, "org/other.md")


def test_embedding_agents_are_named_in_order() -> None:
    agents = [
        Agent("a2", "org", "g1", "Bo", task="{{note:org/p.md}}"),
        Agent("a1", "org", "g1", "Ada", task="x {{note:org/p.md}}"),
        Agent("a3", "org", "g1", "Cy", task="{{note:org/q.md}}"),
    ]
    assert [a.name for a in notes.embedding_agents(agents, "org/p.md")] == ["Ada", "Bo"]
    line = notes.embedded_line(notes.embedding_agents(agents, "org/p.md"))
    assert line == "Embedded in the Task of: Ada; Bo; applying fails until none does"
    assert notes.embedded_line([]) is None
    refusal = notes.embedded_refusal("org/p.md", notes.embedding_agents(agents, "org/p.md"))
    assert refusal is not None and (refusal.status, refusal.code) == (409, "note_embedded")
    assert notes.embedded_refusal("org/q.md", []) is None


@pytest.mark.parametrize(
    ("overrides", "agent", "path", "readers"),
    [
        ({"level": "agent", "agent_id": "a1", "key": "style.md"}, ADA, "agent/a1/style.md", "Read by Ada"),
        ({"level": "guild"}, None, "guild/g1/refunds.md", "Read by the guild's agents: Ada, Bo"),
        ({"level": "org", "key": "policy.md"}, None, "org/policy.md", "Read by every agent of the organisation"),
    ],
)
def test_a_create_binds_that_no_note_is_live_and_says_who_reads_it(
    overrides: dict[str, Any], agent: Agent | None, path: str, readers: str
) -> None:
    reviewed = notes.review_create(SESSION, create(**overrides), agent, None, MEMBERS, CAP)
    assert isinstance(reviewed, notes.NoteProposal), reviewed
    assert reviewed.display_path == path and reviewed.action == "create"
    assert reviewed.base_version is None and reviewed.base_hash is None
    assert reviewed.proposed_hash == content_hash("a\nb\n")
    assert (reviewed.before, reviewed.after) == ("", "a\nb\n")
    assert reviewed.notes == (readers,)
    assert reviewed.agent_id == ("a1" if overrides["level"] == "agent" else None)


def test_a_create_takes_its_title_or_the_key() -> None:
    assert notes.review_create(SESSION, create(), None, None, MEMBERS, CAP).title == "refunds"  # type: ignore[union-attr]
    titled = notes.review_create(SESSION, create(title="Refunds"), None, None, MEMBERS, CAP)
    assert isinstance(titled, notes.NoteProposal) and titled.title == "Refunds"


@pytest.mark.parametrize(
    ("overrides", "agent", "existing", "status", "code"),
    [
        ({"level": "agent", "agent_id": "a1"}, None, None, 404, "unknown_agent"),
        ({"level": "agent", "agent_id": "a4"}, CY, None, 422, "agent_out_of_reach"),
        ({"level": "agent", "agent_id": "a3"}, GONE, None, 422, "agent_out_of_reach"),
        ({"level": "agent"}, None, None, 422, "invalid_arguments"),
        ({"level": "org", "agent_id": "a1"}, ADA, None, 422, "invalid_arguments"),
        ({"level": "agent", "agent_id": "a1", "key": "task.md"}, ADA, None, 422, "not_a_note"),
        ({"level": "agent", "agent_id": "a1", "key": "memory.md"}, ADA, None, 422, "not_a_note"),
        ({"key": "sub/x.md"}, None, None, 422, "invalid_key"),
        ({"key": "x.txt"}, None, None, 422, "invalid_key"),
        ({"content": "x" * (CAP + 1)}, None, None, 422, "content_too_large"),
        ({}, None, live(), 409, "note_exists"),
    ],
)
def test_a_create_is_refused_with_a_reason(
    overrides: dict[str, Any], agent: Agent | None, existing: notes.LiveNote | None, status: int, code: str
) -> None:
    refused = notes.review_create(SESSION, create(**overrides), agent, existing, MEMBERS, CAP)
    assert isinstance(refused, Refusal) and (refused.status, refused.code) == (status, code), refused


def test_a_create_where_a_note_lives_points_to_the_edit_action() -> None:
    refused = notes.review_create(SESSION, create(), None, live(version=7), MEMBERS, CAP)
    assert isinstance(refused, Refusal)
    assert '"edit"' in refused.message and "guild/g1/refunds.md" in refused.message and "7" in refused.message


def test_an_edit_binds_version_and_hash() -> None:
    note = live()
    args = request(action="edit", display_path=note.display_path, content="one\nthree\n", base_version=3)
    assert isinstance(args, notes.EditNote)
    reviewed = notes.review_edit(SESSION, args, None, note, CAP)
    assert isinstance(reviewed, notes.NoteProposal)
    assert (reviewed.base_version, reviewed.base_hash) == (3, note.hash)
    assert (reviewed.before, reviewed.after) == ("one\ntwo\n", "one\nthree\n")
    assert reviewed.proposed_hash == content_hash("one\nthree\n")


@pytest.mark.parametrize(
    ("path", "agent", "exists", "fields", "status", "code"),
    [
        ("guild/g1/refunds.md", None, False, {}, 404, "unknown_note"),
        ("guild/g2/refunds.md", None, True, {}, 422, "note_out_of_reach"),
        ("agent/a4/x.md", CY, True, {}, 422, "note_out_of_reach"),
        ("agent/a3/x.md", GONE, True, {}, 422, "note_out_of_reach"),
        ("agent/zz/x.md", None, True, {}, 404, "unknown_note"),
        ("agent/a1/task.md", ADA, True, {}, 422, "not_a_note"),
        ("scripts/x.py", None, True, {}, 422, "not_a_note"),
        ("guild/g1/refunds.md", None, True, {"base_version": 2}, 409, "stale_base_version"),
        ("guild/g1/refunds.md", None, True, {"content": "one\ntwo\n"}, 422, "no_change"),
        ("guild/g1/refunds.md", None, True, {"content": "x" * (CAP + 1)}, 422, "content_too_large"),
    ],
)
def test_an_edit_is_refused_with_a_reason(
    path: str, agent: Agent | None, exists: bool, fields: dict[str, Any], status: int, code: str
) -> None:
    note = live() if exists else None
    args = request(**{"action": "edit", "display_path": path, "content": "new\n", "base_version": 3, **fields})
    assert isinstance(args, notes.EditNote)
    refused = notes.review_edit(SESSION, args, agent, note, CAP)
    assert isinstance(refused, Refusal) and (refused.status, refused.code) == (status, code), refused


def test_a_delete_proposes_no_text_and_names_the_embedding_tasks() -> None:
    note = live("org/policy.md")
    args = request(action="delete", display_path="org/policy.md", base_version=3)
    assert isinstance(args, notes.DeleteNote)
    reviewed = notes.review_delete(SESSION, args, None, note, [ADA])
    assert isinstance(reviewed, notes.NoteProposal)
    assert (reviewed.before, reviewed.after) == ("one\ntwo\n", "")
    assert reviewed.base_hash == note.hash
    assert reviewed.notes == ("Embedded in the Task of: Ada; applying fails until none does",)
    assert notes.review_delete(SESSION, args, None, note, []).notes == ()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("path", "exists", "base", "status", "code"),
    [
        ("org/policy.md", False, 3, 404, "unknown_note"),
        ("org/policy.md", True, 4, 409, "stale_base_version"),
        ("guild/g2/policy.md", True, 3, 422, "note_out_of_reach"),
        ("agent/a1/memory.md", False, 3, 422, "not_a_note"),
    ],
)
def test_a_delete_is_refused_with_a_reason(path: str, exists: bool, base: int, status: int, code: str) -> None:
    args = request(action="delete", display_path=path, base_version=base)
    assert isinstance(args, notes.DeleteNote)
    refused = notes.review_delete(SESSION, args, ADA, live(path) if exists else None, [])
    assert isinstance(refused, Refusal) and (refused.status, refused.code) == (status, code), refused


@pytest.mark.parametrize(
    "fields",
    [
        {"action": "task", "display_path": "agent/a1/task.md", "content": "x"},
        {"action": "script", "content": "x"},
        {"action": "edit", "display_path": "org/a.md", "content": "x"},  # no base_version
        {"action": "delete", "display_path": "org/a.md", "base_version": 1, "content": "x"},  # extra field
        {"action": "create", "level": "team", "key": "a.md", "content": "x"},
        {"action": "create", "level": "org", "key": "a.md", "content": "x\x00"},
    ],
)
def test_arguments_outside_the_three_actions_are_invalid(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        request(**fields)


@pytest.mark.parametrize(
    ("base", "note", "moved"),
    [
        (None, None, False),
        (None, live(), True),
        (live().hash, live(), False),
        (live().hash, live(content="other\n"), True),
        (live().hash, None, True),
    ],
)
def test_moved_compares_the_live_hash_with_the_base(base: str | None, note: notes.LiveNote | None, moved: bool) -> None:
    assert notes.moved(base, note) is moved


def test_reach_for_listing() -> None:
    agents = {a.agent_id: a for a in (ADA, GONE, CY)}
    reached = {
        path: notes.within_reach(SESSION, notes.parse_display_path(path), agents)  # type: ignore[arg-type]
        for path in ("org/a.md", "guild/g1/a.md", "guild/g2/a.md", "agent/a1/a.md", "agent/a3/a.md", "agent/a4/a.md")
    }
    assert reached == {
        "org/a.md": True,
        "guild/g1/a.md": True,
        "guild/g2/a.md": False,
        "agent/a1/a.md": True,
        "agent/a3/a.md": False,
        "agent/a4/a.md": False,
    }
