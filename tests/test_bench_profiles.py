"""The profiles of ``make bench-profile`` (``bench/profiles.py``): py-spy's folded stacks read, the top entries of a
profile (a recursing frame counted once per sample), and its flame graph. Nothing here samples a process."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
FOLDED = [
    "main (app.py:1);serve (app.py:9);parse (json.py:3) 30",
    "main (app.py:1);serve (app.py:9);query (db.py:7) 50",
    "main (app.py:1);walk (tree.py:2);walk (tree.py:2);walk (tree.py:2) 20",
    "",
    "not a line",
]


@pytest.fixture(scope="module")
def profiles() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        import profiles

        yield profiles
    finally:
        sys.path.remove(str(BENCH))


def test_the_top_entries_are_where_the_cpu_went_and_count_each_frame_once_per_sample(profiles: ModuleType) -> None:
    stacks = profiles.fold(FOLDED)
    assert sum(stacks.values()) == 100
    ranked = [(e.frame, round(e.own, 2), round(e.total, 2)) for e in profiles.top(stacks, 4)]
    assert ranked == [  # by the share where each was running; frames that only pass the samples on come last
        ("query (db.py:7)", 0.5, 0.5),
        ("parse (json.py:3)", 0.3, 0.3),
        ("walk (tree.py:2)", 0.2, 0.2),
    ]
    walk = next(e for e in profiles.top(stacks, 10) if e.frame.startswith("walk"))
    assert (round(walk.total, 2), round(walk.own, 2)) == (0.2, 0.2)  # three frames deep, 20 samples


def test_the_flame_graph_draws_each_frame_as_wide_as_its_share(profiles: ModuleType) -> None:
    drawn = ET.fromstring(profiles.svg(profiles.fold(FOLDED), "gateway <one>"))
    ns = "{http://www.w3.org/2000/svg}"
    groups = list(drawn.iter(f"{ns}g"))
    assert len(groups) == 7  # main, serve, parse, query, and walk three times (each a frame of its own)
    frames = {g.find(f"{ns}title").text: g.find(f"{ns}rect") for g in groups}  # type: ignore[union-attr]
    width = {
        title.split(" (")[0] + " " + title.rsplit(", ", 1)[1]: float(r.get("width")) for title, r in frames.items()
    }
    assert width["main 100.00%)"] == profiles.WIDTH
    assert width["serve 80.00%)"] == pytest.approx(0.8 * profiles.WIDTH)
    assert "gateway &lt;one&gt;" in profiles.svg(profiles.fold(FOLDED), "gateway <one>")


def test_no_samples_give_no_entries(profiles: ModuleType) -> None:
    assert profiles.top(profiles.fold([]), 5) == []
