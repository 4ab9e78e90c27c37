"""The edits service serves every public route it declares (:mod:`edits_contract.workspace`), the note path its
schema states is the one its rules parse, and its answers write moments as they always have."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from fastapi.encoders import jsonable_encoder
from hypothesis import given, settings
from hypothesis import strategies as st

from assent.api import mismatches, routes_of
from assent.domain import Refusal
from edits.api import RESOURCES
from edits.domain.notes import parse_display_path
from edits_contract.workspace import NOTE_PATH, OWNER, MemoryRevision


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


def test_an_answer_writes_its_moments_with_the_offset_and_its_schema_says_a_date_time() -> None:
    at = datetime(2026, 12, 1, 9, 30, 15, 250000, tzinfo=UTC)
    revision = MemoryRevision(
        version=2,
        hash="h",
        author_user_id="u",
        created_at=at,
        tool_call_id=None,
        tool_name=None,
        studio_session_id=None,
        studio_seq=None,
    )
    assert jsonable_encoder(revision)["created_at"] == "2026-12-01T09:30:15.250000+00:00" == at.isoformat()
    for mode in ("validation", "serialization"):
        schema = MemoryRevision.model_json_schema(mode=mode)["properties"]["created_at"]
        assert (schema["type"], schema["format"]) == ("string", "date-time")
