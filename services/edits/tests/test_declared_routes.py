"""The edits service serves every public route it declares (:mod:`edits_contract.workspace`), and the note path its
schema states is the one its rules parse."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from assent.api import mismatches, routes_of
from assent.domain import Refusal
from edits.api import RESOURCES
from edits.domain.notes import parse_display_path
from edits_contract.workspace import NOTE_PATH, OWNER


def test_every_declared_route_has_its_handler() -> None:
    assert routes_of(OWNER), "the workspace owner declares its routes"
    assert mismatches(routes_of(OWNER), RESOURCES) == []


PARTS = st.sampled_from(
    ["org", "agent", "guild", "a1", "x.md", "task.md", "Memory.md", " x.md", "a..md", ".md", "", "a\\b.md"]
)


@settings(derandomize=True, max_examples=300, database=None)
@given(st.lists(PARTS, min_size=1, max_size=4).map("/".join))
def test_the_note_path_pattern_accepts_what_the_rules_parse(path: str) -> None:
    assert (re.fullmatch(NOTE_PATH, path) is not None) == (not isinstance(parse_display_path(path), Refusal)), path
