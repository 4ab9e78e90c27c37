"""``bench/statements.py``: what it takes from two snapshots of ``pg_stat_statements``. Nothing here connects."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def statements() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        import statements

        yield statements
    finally:
        sys.path.remove(str(BENCH))


def test_a_difference_keeps_what_ran_between_the_snapshots(statements: ModuleType) -> None:
    before = ({("SELECT 1", True): (5, 5, 1.0, 1, 0.25), ("BEGIN", True): (2, 0, 0.1, 0, 0.0)}, 10)
    after = (
        {
            ("SELECT 1", True): (8, 8, 1.5, 2, 0.5),
            ("BEGIN", True): (2, 0, 0.1, 0, 0.0),
            ("INSERT", False): (3, 3, 0.25, 3, 0.125),
        },
        14,
    )
    ran, commits = statements.diff(after, before)
    assert ran == {("SELECT 1", True): (3, 3, 0.5, 1, 0.25), ("INSERT", False): (3, 3, 0.25, 3, 0.125)}
    assert commits == 4
