"""Where each service spends its CPU under the benchmark: py-spy samples every service while the rounds run, and
each profile is saved as folded stacks (``<service>.folded``), a flame graph (``<service>.svg``) and its top entries
(``<service>.top.txt``) in the run's folder.

py-spy records folded stacks (``--format raw``: one line per distinct stack, ``frame;frame;frame count``), from
which both the top entries and the flame graph are drawn here: the known renderers of folded stacks into SVG are
flamegraph.pl (Perl) and inferno (Rust), neither a Python library, and a flame graph is a few rectangles per frame.
It samples from outside the process without pausing it (``--nonblocking``), so the services run as they do unprofiled
but for the sampler's own CPU, which is why the profiled run is an extra one, never one of the measured runs.
"""

from __future__ import annotations

import asyncio
import html
import shutil
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

Stacks = Counter[tuple[str, ...]]
"""Samples per stack, outermost frame first."""

RATE = 200
"""Samples a second, per process."""


def fold(lines: Iterable[str]) -> Stacks:
    """The folded stacks of py-spy's raw output (``a;b;c 12`` per line; blank and malformed lines skipped)."""
    stacks: Stacks = Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack and count.isdigit():
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


@dataclass(frozen=True)
class Entry:
    """A frame's share of the samples: where it was running (``own``) and where it was on the stack (``total``)."""

    frame: str
    own: float
    total: float


def top(stacks: Stacks, n: int = 15) -> list[Entry]:
    """The ``n`` frames with the largest share of samples where they were running (at the top of the stack: the
    CPU they spend themselves), each with its share on the stack (a frame that recurses counted once per sample);
    largest first. (Ranked by the share on the stack, the first entries would be the frames every sample passes
    through: the entrypoint, the event loop.)"""
    samples = sum(stacks.values())
    if not samples:
        return []
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for stack, count in stacks.items():
        own[stack[-1]] += count
        for frame in set(stack):
            total[frame] += count
    ranked = sorted(own, key=lambda frame: (-own[frame], -total[frame], frame))[:n]
    return [Entry(frame, own[frame] / samples, total[frame] / samples) for frame in ranked]


def top_text(name: str, stacks: Stacks, n: int = 15) -> str:
    """The top entries as a table of text."""
    lines = [f"{name}: {sum(stacks.values())} samples", f"{'running':>8} {'on stack':>9}  frame"]
    lines += [f"{e.own:>8.1%} {e.total:>9.1%}  {e.frame}" for e in top(stacks, n)]
    return "\n".join(lines) + "\n"


WIDTH, ROW = 1200, 16


def svg(stacks: Stacks, title: str) -> str:
    """A flame graph of ``stacks``: the root at the bottom, each frame as wide as its share of the samples, its
    name and share in its tooltip; frames narrower than a tenth of a pixel left out."""
    counts: Counter[tuple[str, ...]] = Counter()
    children: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for stack, count in stacks.items():
        for depth in range(1, len(stack) + 1):
            counts[stack[:depth]] += count
            children.setdefault(stack[: depth - 1], set()).add(stack[:depth])
    samples = sum(stacks.values()) or 1
    height = (max((len(stack) for stack in stacks), default=0) + 2) * ROW
    rects: list[str] = []

    def draw(prefix: tuple[str, ...], x: float) -> None:
        for child in sorted(children.get(prefix, ())):
            width = counts[child] / samples * WIDTH
            if width >= 0.1:
                y = height - (len(child) + 1) * ROW
                frame = html.escape(child[-1])
                hue = 20 + sum(map(ord, child[-1])) % 40  # the same frame, the same colour, in every graph
                label = frame[: int(width / 7)] if width > 40 else ""
                rects.append(
                    f"<g><title>{frame} ({counts[child]} samples, {counts[child] / samples:.2%})</title>"
                    f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{ROW - 1}" fill="hsl({hue},90%,60%)"/>'
                    f'<text x="{x + 3:.1f}" y="{y + ROW - 4}" font-size="11">{label}</text></g>'
                )
                draw(child, x)
            x += width

    draw((), 0.0)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="monospace">'
        f'<text x="4" y="{ROW - 4}" font-size="13">{html.escape(title)} ({samples} samples)</text>'
        + "".join(rects)
        + "</svg>\n"
    )


async def record(pids: Mapping[str, int], seconds: float, folder: Path) -> dict[str, Stacks]:
    """Sample each process (by service name) for ``seconds``, at once; save each profile's folded stacks, flame
    graph and top entries in ``folder``, and answer the stacks. A service py-spy could not sample is left out, with
    why on stderr."""
    spy = shutil.which("py-spy")
    if spy is None:
        raise RuntimeError("py-spy is not installed (it is a dev dependency: make install)")
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    runs = {
        name: await asyncio.create_subprocess_exec(
            spy,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(max(1, round(seconds))),
            "--rate",
            str(RATE),
            "--format",
            "raw",
            "--nonblocking",
            "--output",
            str(folder / f"{name}.folded"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        for name, pid in pids.items()
    }
    profiles: dict[str, Stacks] = {}
    for name, run in runs.items():
        _, err = await run.communicate()
        stacks = await asyncio.to_thread(save, folder, name) if run.returncode == 0 else None
        if stacks is None:
            print(f"(py-spy could not sample {name}: {err.decode(errors='replace').strip()[-300:]})")
        else:
            profiles[name] = stacks
    return profiles


def save(folder: Path, name: str) -> Stacks | None:
    """The service's folded stacks as py-spy wrote them, with their flame graph and top entries written beside."""
    path = folder / f"{name}.folded"
    if not path.exists():
        return None
    stacks = fold(path.read_text().splitlines())
    (folder / f"{name}.svg").write_text(svg(stacks, f"{name}, under the benchmark's rounds"))
    (folder / f"{name}.top.txt").write_text(top_text(name, stacks))
    return stacks
