"""How a batch's changes to proposals become one-statement updates (``assent.runtime.uow.grouped_changes``)."""

from __future__ import annotations

from typing import Any

import pytest

from assent.runtime.uow import grouped_changes

STALE = {"stale": True}
FRESH = {"stale": False}
APPLIED = {"status": "applied", "stale": False, "resolved_by": "olga"}


@pytest.mark.parametrize(
    ("changes", "grouped"),
    [
        pytest.param([], {}, id="nothing"),
        pytest.param(
            [("p1", STALE), ("p2", STALE)], {("stale",): [("p1", STALE), ("p2", STALE)]}, id="one-set-of-fields"
        ),
        pytest.param(
            [("p1", STALE), ("p2", APPLIED)],
            {("stale",): [("p1", STALE)], ("resolved_by", "stale", "status"): [("p2", APPLIED)]},
            id="a-statement-per-set-of-fields",
        ),
        pytest.param([("p1", STALE), ("p1", FRESH)], {("stale",): [("p1", FRESH)]}, id="the-later-value-wins"),
        pytest.param(
            [("p1", STALE), ("p2", STALE), ("p1", APPLIED)],
            {("stale",): [("p2", STALE)], ("resolved_by", "stale", "status"): [("p1", APPLIED)]},
            id="a-proposal-changed-twice-is-one-row-with-both",
        ),
    ],
)
def test_changes_are_merged_per_proposal_and_grouped_per_set_of_fields(
    changes: list[tuple[str, dict[str, Any]]], grouped: dict[tuple[str, ...], list[tuple[str, dict[str, Any]]]]
) -> None:
    assert grouped_changes(changes) == grouped
