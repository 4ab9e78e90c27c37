import pytest

from assent.contracts import CardField, LineCounts, lines_of
from assent.hashing import content_hash, line_counts, unified_diff


def test_hash_is_stable_and_prefixed() -> None:
    assert content_hash("") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_line_counts() -> None:
    assert line_counts("a\nb\n", "a\nb\n") == (0, 0)
    assert line_counts("", "a\nb\n") == (2, 0)
    assert line_counts("a\nb\nc\n", "a\nc\nd\n") == (1, 1)
    assert line_counts("a\n", "") == (0, 1)


def test_unified_diff() -> None:
    diff = unified_diff("a\nb\n", "a\nc\n", "memory.md")
    assert diff.splitlines()[:2] == ["--- a/memory.md", "+++ b/memory.md"]
    assert "-b" in diff.splitlines() and "+c" in diff.splitlines()


@pytest.mark.parametrize(
    ("fields", "each", "total"),
    [
        ([("memory.md", "a\nb\n", "a\nc\nd\n")], [(2, 1)], (2, 1)),
        ([("guild/g/n.md", None, "a\nb\n")], [(2, 0)], (2, 0)),  # a create: nothing before
        ([("guild/g/n.md", "a\nb\n", None)], [(0, 2)], (0, 2)),  # a delete: nothing after
        ([("login", "server: s\n", "server: s\n")], [(0, 0)], (0, 0)),  # shown, not changed
        # A guild: each field on its own, an empty one counting no line (not the blank line a rendering gives it).
        (
            [("about", "", "We answer within a day."), ("description", "", "Support.\nRefunds.\n")],
            [(1, 0), (2, 0)],
            (3, 0),
        ),
        ([("a.md", "x\n", "y\n"), ("b.md", None, "z\n"), ("c.md", "w\n", None)], [(1, 1), (1, 0), (0, 1)], (2, 2)),
        ([], [], (0, 0)),
    ],
)
def test_a_requests_line_counts_are_its_card_fields_added_up(
    fields: list[tuple[str, str | None, str | None]], each: list[tuple[int, int]], total: tuple[int, int]
) -> None:
    cards = [CardField(name=name, before=before, after=after) for name, before, after in fields]
    assert [(f.lines.added, f.lines.removed) for f in cards] == each
    assert lines_of(cards) == LineCounts(added=total[0], removed=total[1])
