"""What undoes an applied collection request, from its change log alone: a table of logs against the inverse."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from assent.domain import Refusal
from edits.domain import collection_reverts as reverts
from edits.domain.collections import AccessRow, ColumnSpec, LiveCollection
from edits_contract.collections import CollectionChange

WHEN = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)
COLS = [
    {"name": "order_id", "type": "text", "required": True, "unique": True},
    {"name": "amount", "type": "number", "required": False, "unique": False},
]


def entry(change: str, detail: dict[str, Any], seq: int, **more: Any) -> CollectionChange:
    return CollectionChange.model_validate(
        {
            "change": change,
            "kind": None,
            "subject_id": None,
            "mode": None,
            "detail": detail,
            "actor_user_id": "olga",
            "tool_call_id": None,
            "tool_name": None,
            "studio_session_id": "ses_a",
            "studio_seq": seq,
            "created_at": WHEN,
            **more,
        }
    )


def create(seq: int = 1, scope: str = "guild") -> CollectionChange:
    start = [["guild", "g1", "write"]] if scope == "guild" else [["org", "org", "read"]]
    return entry(
        "create", {"name": "refunds", "purpose": "Track refunds", "scope": scope, "columns": COLS, "access": start}, seq
    )


def update(seq: int, columns: list[dict[str, Any]], **more: Any) -> CollectionChange:
    detail = {
        "name": "refunds",
        "renamed_from": None,
        "purpose": "Track refunds",
        "columns": columns,
        "removed": [],
        "renamed": [],
        "retyped": [],
        "records_changed": 0,
        **more,
    }
    return entry("update", detail, seq)


def access(seq: int, kind: str, subject: str, mode: str | None) -> CollectionChange:
    return entry("access", {"mode": mode}, seq, kind=kind, subject_id=subject, mode=mode)


def delete(seq: int) -> CollectionChange:
    return entry("delete", {"name": "refunds", "records": 3}, seq)


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
        "columns": (spec("order_id", required=True, unique=True), spec("amount", "number")),
        "access": (AccessRow("guild", "g1", "write"),),
        "version": 2,
        "updated_at": WHEN,
    }
    return LiveCollection(**{**base, **more})


ORDER = {"name": "order_id", "type": "text", "required": True, "unique": True}
AMOUNT = {"name": "amount", "type": "number"}
EDIT = {"action": "edit", "collection": "col_1", "base_updated_at": WHEN.isoformat()}

CASES = [
    pytest.param("create", [create(1)], 1, live(), {"action": "delete", "collection": "col_1"}, id="create-deleted"),
    pytest.param(
        "create", [create(1), delete(2)], 1, None, Refusal(409, "already_reverted", ""), id="create-gone-since"
    ),
    pytest.param(
        "edit",
        [create(1), update(2, [*COLS, {"name": "note", "type": "text", "required": False, "unique": False}])],
        2,
        live(columns=(spec("order_id", required=True, unique=True), spec("amount", "number"), spec("note"))),
        {**EDIT, "columns": [ORDER, AMOUNT]},
        id="added-column-removed",
    ),
    pytest.param(
        "edit",
        [
            create(1),
            update(
                2,
                [COLS[0], {"name": "total", "type": "number", "required": False, "unique": False}],
                renamed=[["amount", "total"]],
            ),
        ],
        2,
        live(columns=(spec("order_id", required=True, unique=True), spec("total", "number"))),
        {**EDIT, "columns": [ORDER, {**AMOUNT, "rename_from": "total"}]},
        id="renamed-column-renamed-back",
    ),
    pytest.param(
        "edit",
        [create(1), update(2, [COLS[0]], removed=["amount"])],
        2,
        live(columns=(spec("order_id", required=True, unique=True),)),
        {**EDIT, "columns": [ORDER, AMOUNT]},
        id="removed-column-back-empty",
    ),
    pytest.param(
        "edit",
        [create(1), update(2, COLS, name="payouts", renamed_from="refunds", purpose="Track payouts")],
        2,
        live(name="payouts", purpose="Track payouts"),
        {**EDIT, "name": "refunds", "purpose": "Track refunds"},
        id="name-and-purpose-back",
    ),
    pytest.param(
        "edit",
        [create(1), access(2, "guild", "g1", "read"), access(2, "agent", "ada", "write")],
        2,
        live(access=(AccessRow("agent", "ada", "write"), AccessRow("guild", "g1", "read"))),
        {**EDIT, "access": {"guild": "write", "agents": [{"agent_id": "ada", "mode": "inherit"}]}},
        id="access-rows-back",
    ),
    pytest.param(
        "edit",
        [create(1), access(2, "agent", "ada", "write"), access(3, "agent", "ada", None)],
        2,
        live(),
        Refusal(409, "already_reverted", ""),
        id="edit-undone-since",
    ),
    pytest.param(
        "edit",
        [create(1), update(2, COLS, purpose="x"), delete(3)],
        2,
        None,
        Refusal(409, "deleted_since", ""),
        id="edit-of-a-table-deleted-since",
    ),
    pytest.param(
        "delete",
        [create(1), access(1, "agent", "ada", "read"), update(2, [COLS[0]], removed=["amount"]), delete(3)],
        3,
        None,
        {
            "action": "create",
            "name": "refunds",
            "purpose": "Track refunds",
            "scope": "guild",
            "columns": [ORDER],
            "access": {"agents": [{"agent_id": "ada", "mode": "read"}]},
        },
        id="delete-made-again-as-it-was",
    ),
    pytest.param(
        "delete",
        [create(1, scope="org"), delete(2)],
        2,
        None,
        {"action": "create", "name": "refunds", "purpose": "Track refunds", "scope": "org", "columns": [ORDER, AMOUNT]},
        id="org-table-made-again",
    ),
    pytest.param("edit", [create(1)], 7, live(), Refusal(409, "before_unknown", ""), id="not-in-the-log"),
]


@pytest.mark.parametrize(("action", "changes", "seq", "now", "expected"), CASES)
def test_the_inverse_of_each_request(
    action: str, changes: list[CollectionChange], seq: int, now: LiveCollection | None, expected: Any
) -> None:
    found = reverts.inverse(action, changes, "ses_a", seq, now, "g1")
    if isinstance(expected, Refusal):
        assert isinstance(found, Refusal)
        assert (found.status, found.code) == (expected.status, expected.code)
    else:
        assert found == expected


def test_replay_follows_the_log_to_the_state_before() -> None:
    state = reverts.replay([create(1), access(2, "agent", "ada", "read"), update(3, [COLS[0]], purpose="Refunds")])
    assert state == reverts.State(
        "refunds",
        "Refunds",
        "guild",
        (spec("order_id", required=True, unique=True),),
        (AccessRow("agent", "ada", "read"), AccessRow("guild", "g1", "write")),
    )
    assert reverts.replay([create(1), delete(2)]) is None
    assert reverts.replay([]) is None
