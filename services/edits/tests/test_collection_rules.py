"""The collection rules alone: the column dialect, conversions, access rows, the hash, reach and the card's lines."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from assent.domain import Agent, Refusal, Session
from edits.domain import collections as rules
from edits.domain.collections import AccessRow, ColumnSpec, Directory, LiveCollection, RecordCounts

SESSION = Session("s1", "org", "g1", "olga")
ADA = Agent("ada", "org", "g1", "Ada", True, "Log refunds in refunds.", 1)
BO = Agent("bo", "org", "g1", "Bo", True, "", 1)
GONE = Agent("gone", "org", "g1", "Gone", False, "", 1)
CY = Agent("cy", "org", "g2", "Cy", True, "Sell; see refunds", 1)
AGENTS = {a.agent_id: a for a in (ADA, BO, GONE, CY)}
DIRECTORY = Directory({"g1": "Support", "g2": "Sales"}, AGENTS, "g1")
WHEN = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)


def col(name: str, type_: str = "text", **more: Any) -> rules.Column:
    return rules.Column.model_validate({"name": name, "type": type_, **more})


def spec(name: str, type_: str = "text", required: bool = False, unique: bool = False) -> ColumnSpec:
    return ColumnSpec(name=name, type=type_, required=required, unique=unique)


def live(**more: Any) -> LiveCollection:
    base: dict[str, Any] = {
        "collection_id": "col_1",
        "org_id": "org",
        "name": "refunds",
        "purpose": "Track refunds",
        "scope": "guild",
        "guild_id": "g1",
        "columns": (spec("order_id", required=True, unique=True), spec("amount", "number"), spec("note")),
        "access": (AccessRow("guild", "g1", "write"),),
        "version": 1,
        "updated_at": WHEN,
    }
    return LiveCollection(**{**base, **more})


@pytest.mark.parametrize(
    ("value", "to", "converts", "becomes"),
    [
        ("42", "integer", True, 42),
        ("-7", "integer", True, -7),
        (4.0, "integer", True, 4),
        (4.5, "integer", False, 4.5),
        ("4.5", "integer", False, "4.5"),
        ("n/a", "integer", False, "n/a"),
        (True, "integer", False, True),
        ("1234567890123456789", "integer", False, "1234567890123456789"),
        ("12\n", "integer", False, "12\n"),
        ("4.50", "number", True, 4.5),
        ("12", "number", True, 12),
        (3, "number", True, 3),
        ("1e5", "number", False, "1e5"),
        (42, "text", True, "42"),
        (4.5, "text", True, "4.5"),
        (False, "text", True, "false"),
        ("x", "text", True, "x"),
        ("true", "boolean", True, True),
        ("false", "boolean", True, False),
        ("yes", "boolean", False, "yes"),
        (1, "boolean", False, 1),
        ("2026-02-28", "date", True, "2026-02-28"),
        ("2026-13-01", "date", False, "2026-13-01"),
        (20260228, "date", False, 20260228),
        (None, "integer", True, None),
    ],
)
def test_convert(value: Any, to: str, converts: bool, becomes: Any) -> None:
    assert rules.convert(value, to) == (converts, becomes)


@pytest.mark.parametrize(
    ("value", "type_", "fits"),
    [
        ("x", "text", True),
        (1, "text", False),
        (1, "integer", True),
        (True, "integer", False),
        (1.5, "integer", False),
        (1.5, "number", True),
        (False, "boolean", True),
        ("2026-01-31", "date", True),
        ("2026-1-31", "date", False),
    ],
)
def test_a_written_value_is_of_its_type_as_it_is(value: Any, type_: str, fits: bool) -> None:
    assert rules.of_type(value, type_) is fits


@pytest.mark.parametrize(
    ("values", "whole", "code"),
    [
        ({"order_id": "A1"}, True, None),
        ({"amount": 3}, True, "missing_value"),
        ({"amount": 3}, False, None),
        ({"order_id": "A1", "amount": "3"}, True, "bad_value"),
        ({"order_id": "A1", "colour": "red"}, True, "unknown_column"),
        ({"order_id": "A1", "amount": None}, True, None),
    ],
)
def test_record_values_fit_the_columns(values: dict[str, Any], whole: bool, code: str | None) -> None:
    refusal = rules.check_values(live().columns, values, whole=whole)
    assert (None if refusal is None else refusal.code) == code


CURRENT = (spec("a"), spec("b", "integer"), spec("c"))


@pytest.mark.parametrize(
    ("wanted", "edit", "message"),
    [
        ([col("a"), col("a")], True, "named twice"),
        ([col("x", rename_from="a")], False, "rename_from is for an edit"),
        ([col("x", rename_from="zz")], True, "is not a current column"),
        ([col("x", rename_from="a"), col("y", rename_from="a")], True, "renamed twice"),
        ([col("x", rename_from="a"), col("a")], True, "also kept under its own name"),
        ([col("b", rename_from="a"), col("c")], True, "while a current column has that name"),
    ],
)
def test_column_lists_outside_the_dialect_are_refused(wanted: list[rules.Column], edit: bool, message: str) -> None:
    refusal = rules.plan_columns(CURRENT if edit else (), wanted, edit=edit)
    assert isinstance(refusal, Refusal) and refusal.code == "invalid_columns" and message in refusal.message


def test_a_plan_says_what_leaves_moves_is_renamed_retyped_and_becomes_required_or_unique() -> None:
    plan = rules.plan_columns(
        CURRENT,
        [col("c", required=True), col("aa", rename_from="a", unique=True), col("b", "text"), col("d", required=True)],
        edit=True,
    )
    assert isinstance(plan, rules.ColumnPlan)
    assert plan.added == ("d",)
    assert plan.removed == ()
    assert plan.renamed == (("a", "aa"),)
    assert plan.retyped == (("b", "b", "integer", "text"),)
    assert plan.moved == (("c", 3, 1), ("aa", 1, 2), ("b", 2, 3))
    assert plan.now_required == (("c", "c"), (None, "d"))
    assert plan.now_unique == (("a", "aa"),)
    assert plan.changes_records

    dropped = rules.plan_columns(CURRENT, [col("a"), col("c")], edit=True)
    assert isinstance(dropped, rules.ColumnPlan)
    assert (dropped.removed, dropped.moved, dropped.changes_records) == (("b",), (), True)
    added = rules.plan_columns(CURRENT, [col("a"), col("b", "integer"), col("c"), col("z")], edit=True)
    assert isinstance(added, rules.ColumnPlan) and not added.changes_records and added.added == ("z",)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"guild": "read"}, [("guild", "g1", "write", "read")]),
        ({"guild": "write"}, []),
        ({"guild": "none"}, [("guild", "g1", "write", None)]),
        ({"agents": [{"agent_id": "ada", "mode": "none"}]}, [("agent", "ada", None, "none")]),
        ({"agents": [{"agent_id": "bo", "mode": "inherit"}]}, [("agent", "bo", "read", None)]),
        ({"agents": [{"agent_id": "bo", "mode": "read"}]}, []),
        ({"agents": [{"agent_id": "gone", "mode": "read"}]}, "agent_out_of_reach"),
        ({"agents": [{"agent_id": "cy", "mode": "read"}]}, "agent_out_of_reach"),
        ({"agents": [{"agent_id": "nobody", "mode": "read"}]}, "unknown_agent"),
        ({"agents": [{"agent_id": "ada", "mode": "read"}, {"agent_id": "ada", "mode": "write"}]}, "invalid_access"),
    ],
)
def test_access_changes_only_the_source_guild_and_its_live_members(change: dict[str, Any], expected: Any) -> None:
    rows = (AccessRow("guild", "g1", "write"), AccessRow("agent", "bo", "read"), AccessRow("org", "org", "read"))
    planned = rules.plan_access(SESSION, rows, rules.AccessChange.model_validate(change), AGENTS)
    if isinstance(expected, str):
        assert isinstance(planned, Refusal) and planned.code == expected
    else:
        assert not isinstance(planned, Refusal)
        assert [(e.kind, e.subject_id, e.before, e.mode) for e in planned] == expected


def test_the_hash_binds_the_definition_and_the_source_guilds_rows_only() -> None:
    base = live(access=(AccessRow("guild", "g1", "write"), AccessRow("guild", "g2", "read")))
    h = rules.live_hash(base, DIRECTORY)
    assert rules.live_hash(live(access=(AccessRow("guild", "g1", "write"),)), DIRECTORY) == h  # another guild's row
    assert rules.live_hash(live(access=(*base.access, AccessRow("agent", "cy", "read"))), DIRECTORY) == h
    assert rules.live_hash(live(access=(*base.access, AccessRow("agent", "ada", "read"))), DIRECTORY) != h
    assert rules.live_hash(live(access=(AccessRow("guild", "g1", "read"),)), DIRECTORY) != h
    assert rules.live_hash(live(purpose="Other"), DIRECTORY) != h
    assert rules.live_hash(live(columns=(spec("order_id"),)), DIRECTORY) != h
    assert rules.live_hash(live(version=9, updated_at=datetime.now(UTC), records=5), DIRECTORY) == rules.live_hash(
        live(), DIRECTORY
    )


def edit(**more: Any) -> rules.EditCollection:
    return rules.EditCollection.model_validate(
        {"action": "edit", "collection": "refunds", "base_updated_at": WHEN.isoformat(), "reason": "r", **more}
    )


ORG_TABLE = live(scope="org", guild_id=None, access=(AccessRow("org", "org", "read"),))
OTHER_GUILDS = live(guild_id="g2")
COLUMNS: list[dict[str, Any]] = [
    {"name": "order_id", "type": "text", "required": True, "unique": True},
    {"name": "amount", "type": "number"},
    {"name": "note", "type": "text"},
]


@pytest.mark.parametrize(
    ("target", "args", "taken", "code", "status"),
    [
        (None, {}, False, "unknown_table", 422),
        (OTHER_GUILDS, {}, False, "unknown_table", 422),
        (live(org_id="other"), {}, False, "unknown_table", 422),
        (live(), {"base_updated_at": "yesterday"}, False, "invalid_arguments", 422),
        (live(), {"base_updated_at": "2026-12-01T10:00:00+00:00"}, False, "stale_base_updated_at", 409),
        (live(), {"purpose": "Track refunds"}, False, "no_change", 422),
        (live(), {"columns": COLUMNS}, False, "no_change", 422),
        (live(), {"access": {"guild": "write"}}, False, "no_change", 422),
        (live(), {"name": "payouts"}, True, "name_taken", 422),
        (ORG_TABLE, {"name": "payouts"}, False, "org_table_fixed", 422),
        (ORG_TABLE, {"purpose": "Other"}, False, "org_table_fixed", 422),
        (ORG_TABLE, {"columns": COLUMNS[:2]}, False, "org_table_fixed", 422),
        (ORG_TABLE, {"columns": [COLUMNS[1], COLUMNS[0], COLUMNS[2]]}, False, "org_table_fixed", 422),
        (ORG_TABLE, {"columns": [{**COLUMNS[0], "required": False}, *COLUMNS[1:]]}, False, "org_table_fixed", 422),
        (
            ORG_TABLE,
            {"columns": [*COLUMNS[:2], {"name": "memo", "type": "text", "rename_from": "note"}]},
            False,
            "org_table_fixed",
            422,
        ),
    ],
)
def test_an_edit_is_refused(
    target: LiveCollection | None, args: dict[str, Any], taken: bool, code: str, status: int
) -> None:
    refusal = rules.review_edit(SESSION, edit(**args), target, taken, AGENTS, DIRECTORY)
    assert isinstance(refusal, Refusal) and (refusal.code, refusal.status) == (code, status), refusal


def test_an_org_table_takes_added_columns_and_access() -> None:
    reviewed = rules.review_edit(
        SESSION,
        edit(columns=[*COLUMNS, {"name": "memo", "type": "text"}], access={"guild": "write"}),
        ORG_TABLE,
        False,
        AGENTS,
        DIRECTORY,
    )
    assert isinstance(reviewed, rules.Reviewed)
    assert reviewed.plan is not None and reviewed.plan.added == ("memo",)
    assert [(e.kind, e.subject_id, e.mode) for e in reviewed.access_edits] == [("guild", "g1", "write")]
    assert reviewed.base_hash == rules.live_hash(ORG_TABLE, DIRECTORY) and reviewed.proposed_hash != reviewed.base_hash


@pytest.mark.parametrize(
    ("target", "code"),
    [(ORG_TABLE, "org_table_fixed"), (OTHER_GUILDS, "unknown_table"), (None, "unknown_table")],
)
def test_a_delete_takes_the_source_guilds_own_tables_only(target: LiveCollection | None, code: str) -> None:
    args = rules.DeleteCollection(action="delete", collection="refunds", reason="r")
    refusal = rules.review_delete(SESSION, args, target, DIRECTORY)
    assert isinstance(refusal, Refusal) and (refusal.code, refusal.status) == (code, 422)


def test_a_create_starts_the_guild_at_write_or_the_org_at_read_and_refuses_a_taken_name() -> None:
    args = {"action": "create", "name": "refunds", "purpose": "P", "columns": COLUMNS, "reason": "r"}
    guild = rules.review_create(SESSION, rules.CreateCollection.model_validate(args), False, AGENTS, DIRECTORY)
    assert isinstance(guild, rules.Reviewed) and guild.rows_after == (AccessRow("guild", "g1", "write"),)
    org = rules.review_create(
        SESSION,
        rules.CreateCollection.model_validate({**args, "scope": "org", "access": {"guild": "write"}}),
        False,
        AGENTS,
        DIRECTORY,
    )
    assert isinstance(org, rules.Reviewed)
    assert set(org.rows_after) == {AccessRow("org", "org", "read"), AccessRow("guild", "g1", "write")}
    taken = rules.review_create(SESSION, rules.CreateCollection.model_validate(args), True, AGENTS, DIRECTORY)
    assert isinstance(taken, Refusal) and taken.code == "name_taken"


def test_the_card_text_has_the_owner_the_purpose_the_columns_and_the_rows_in_order() -> None:
    rows = (
        AccessRow("org", "org", "read"),
        AccessRow("guild", "g1", "write"),
        AccessRow("agent", "bo", "none"),
        AccessRow("guild", "g2", "read"),
        AccessRow("agent", "cy", "write"),
    )
    text = rules.as_text("refunds", "Track refunds", "guild", live().columns, rows, DIRECTORY)
    assert text.splitlines() == [
        "Table refunds, owned by guild Support",
        "Purpose: Track refunds",
        "Column order_id: text, required, unique",
        "Column amount: number",
        "Column note: text",
        "Organisation: read",
        "Guild Support: write",
        "Member Bo: none",
        "Outside the guild: agent Cy: write",
        "Outside the guild: guild Sales: read",
    ]
    assert rules.reach_line(rows, DIRECTORY) == (
        "Reached outside the guild by: every agent of the organisation (read); agent Cy: write; guild Sales: read"
    )
    assert rules.reach_line(rows[1:3], DIRECTORY) == "No one outside the guild reaches it"


def test_what_applying_does_in_numbers() -> None:
    plan = rules.plan_columns(
        live().columns,
        [
            col("order_id", required=True, unique=True),
            col("amount", "integer", required=True),
            col("memo", unique=True),
        ],
        edit=True,
    )
    assert isinstance(plan, rules.ColumnPlan)
    counts = RecordCounts(
        total=10,
        present={"note": 4, "amount": 7},
        unconvertible={("amount", "integer"): 2},
        missing={"amount": 3},
        duplicates={},
        kept={("amount", "integer"): ("n/a", "4.5")},
    )
    lines = rules.effects(
        "edit",
        "refunds",
        plan,
        counts,
        live().access,
        DIRECTORY,
        renamed_from="returns",
        task_carriers=[ADA],
        access_edits=[rules.AccessEdit("agent", "ada", None, "read")],
    )
    assert lines == (
        "Column note leaves: its values in 4 records are deleted",
        'Column amount becomes integer (was number): 5 records convert; 2 stored values stay as they are: "n/a", "4.5"',
        "Column memo is added, empty in all 10 records",
        "Column amount becomes required: 3 records have no value",
        "Column memo becomes unique: 0 records share a value with another",
        "Renamed from returns: the Task of Ada still names returns",
        "Access of Ada: no row → read",
        "No one outside the guild reaches it",
    )
    assert rules.effects("delete", "refunds", None, RecordCounts(total=1), (), DIRECTORY) == (
        "Deletes table refunds and its 1 record",
    )


def test_a_retype_names_a_few_of_the_values_it_keeps() -> None:
    plan = rules.plan_columns((spec("code"),), [col("code", "integer")], edit=True)
    assert isinstance(plan, rules.ColumnPlan)
    counts = RecordCounts(
        total=9,
        present={"code": 9},
        unconvertible={("code", "integer"): 5},
        kept={("code", "integer"): ("a", "b", "c")},
    )
    (line, _) = rules.effects("edit", "t", plan, counts, (), DIRECTORY)
    assert (
        line
        == 'Column code becomes integer (was text): 4 records convert; 5 stored values stay as they are: "a", "b", "c", …'
    )


def test_a_task_carries_a_name_as_a_whole_word() -> None:
    assert [a.name for a in rules.task_carriers(AGENTS.values(), "refunds")] == ["Ada", "Cy"]
    assert rules.task_carriers(AGENTS.values(), "refund") == []
