"""``make bench-compare``'s pure parts (``bench/compare.py``, ``bench/approval_round.py``): the order in which the
two systems take their blocks, the merging of a system's throughput runs, and the table of ratios. Nothing here
is timed or started."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def compare() -> Iterator[ModuleType]:
    """``bench/compare.py``, imported as the benchmark runs it (its folder first on the path)."""
    sys.path.insert(0, str(BENCH))
    try:
        import compare

        yield compare
    finally:
        sys.path.remove(str(BENCH))


def test_blocks_are_taken_in_abba_order(compare: ModuleType) -> None:
    order = compare.block_order(4)
    assert order == [0, 1, 1, 0, 0, 1, 1, 0]
    assert compare.block_order(1) == [0, 1]
    assert compare.block_order(3) == [0, 1, 1, 0, 0, 1]
    for blocks in range(1, 9):
        order = compare.block_order(blocks)
        assert order.count(0) == order.count(1) == blocks  # each system its blocks
        # Each system's mean position is the same for an even number of blocks: a steady drift weighs on both alike.
        if blocks % 2 == 0:
            assert sum(i for i, side in enumerate(order) if side == 0) == sum(
                i for i, side in enumerate(order) if side == 1
            )


def test_ratio_is_new_over_old_and_a_dash_where_a_figure_is_missing(compare: ModuleType) -> None:
    assert compare.ratio(10.0, 12.5) == "1.25x"
    assert compare.ratio(4.0, 2.0) == "0.50x"
    assert compare.ratio(None, 2.0) == "-"
    assert compare.ratio(2.0, None) == "-"
    assert compare.ratio(0.0, 2.0) == "-"
    assert compare.ratio(float("nan"), 2.0) == "-"
    assert [compare.number(v) for v in (0.123, 12.34, 1234.5, None)] == ["0.12", "12.3", "1234", "-"]


def test_table_has_a_column_each_for_old_new_and_their_ratio(compare: ModuleType) -> None:
    Row = compare.Row
    text = compare.table(
        [
            ("Latency", [Row("round p50 ms", 20.0, 25.0), Row("round p99 ms", 40.0, 30.0)]),
            ("CPU ms per round", [Row("gateway", 4.0, 5.0), Row("shelf", None, 0.5)]),
        ],
        "old (HEAD~3)",
        "new (this checkout)",
    )
    lines = text.splitlines()
    assert lines[0].split() == ["figure", "old", "(HEAD~3)", "new", "(this", "checkout)", "new/old"]
    assert set(lines[1]) == {"-"} and len(lines[1]) == len(lines[0])
    assert lines[2] == "Latency"
    assert lines[3].split() == ["round", "p50", "ms", "20.0", "25.0", "1.25x"]
    assert lines[4].split() == ["round", "p99", "ms", "40.0", "30.0", "0.75x"]
    assert lines[5] == "CPU ms per round"
    assert lines[6].split() == ["gateway", "4.00", "5.00", "1.25x"]
    assert lines[7].split() == ["shelf", "-", "0.50", "-"]  # a service only the new checkout runs
    # Every figure's line is as wide as the header, its numbers right-aligned under their column.
    assert {len(line) for line in lines[3:5] + lines[6:]} == {len(lines[0])}
    assert lines[3].index("1.25x") + len("1.25x") == len(lines[0])


def test_a_systems_throughput_runs_merge_into_one(compare: ModuleType) -> None:
    def load(rounds: int, seconds: float, gateway_ms: float, samples: list[float]) -> object:
        return compare.Load(
            replicas=1,
            sessions=8,
            seconds=seconds,
            rounds=rounds,
            round_ms=compare.ms(samples),
            cpu_ms_per_round={"gateway": gateway_ms},
            rss_after={"gateway": float(rounds)},
            samples=samples,
        )

    merged = compare.merged([load(100, 10.0, 4.0, [0.01, 0.02]), load(300, 10.0, 8.0, [0.03, 0.04])])
    assert merged.rounds == 400 and merged.seconds == 20.0 and merged.per_second == 20.0
    assert merged.cpu_ms_per_round == {"gateway": 7.0}  # weighted by each run's rounds
    assert merged.rss_after == {"gateway": 300.0}  # after the last run
    assert merged.samples == [0.01, 0.02, 0.03, 0.04]
    assert merged.round_ms == compare.ms([0.01, 0.02, 0.03, 0.04])
