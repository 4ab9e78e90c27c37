"""The approval round of this checkout beside that of a git ref, measured in turn in one run: each figure's ratio
new/old, so that a change's cost is measured side by side rather than against a figure taken on another day.

    uv run python bench/compare.py REF [--rounds 200] [--concurrency 64] [--seconds 10] [--blocks 4] [--no-telemetry]

REF (a branch, a tag, a commit, ``HEAD~3``) is checked out in a git worktree of its own, ``.bench/compare/<commit>``
(git-ignored; kept for the next run against the same commit, ``make clean`` removes it), and installed there from
its own ``uv.lock`` (``uv sync --frozen``: an environment of its own). Then, in one run:

- one set of servers (the benchmark's own devstack, or ``KAFKA_BOOTSTRAP_SERVERS``, ``DATABASE_URL`` and
  ``REDIS_URL``) serves both systems, so that what the servers cost is the same for both; each system has a database
  of its own (its own migrations) and a topic prefix of its own (its topics, consumer groups and Redis keys);
- two systems start: this checkout's services from this environment ("new"), and the ref's, as its
  ``services.toml`` lists them, each from the ref's environment and code ("old"); both are configured as this
  checkout's devstack configures services (:func:`~assent_devstack.system.build_system`);
- each runs the throughput load for ``WARM_UP_SECONDS`` (not a figure), then the raw floors are measured
  (:class:`approval_round.Raw`, as ``make bench`` does);
- latency: ``--rounds`` rounds one after another on each, in ``--blocks`` blocks taken in turn, old new new old
  old new … (ABBA, :func:`approval_round.block_order`: a drift of the machine's speed weighs on both alike);
- throughput: ``--concurrency`` sessions at once for ``--seconds``, ``--blocks`` runs on each in the same order:
  rounds per second, the round's p50 and p99, CPU ms per round of each service, of the servers, of the benchmark's
  client and of the whole machine (over all the runs of the system), and each service's RSS after the last run.

Both systems are driven by this checkout's benchmark client (its coach client and HTTP calls), so that both do the
same work; a ref whose services do not start with this checkout's settings, or whose API or messages differ from
this checkout's, stops the run with a message saying which, and the services' logs are kept.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop
from approval_round import (
    WARM_UP_SECONDS,
    Bench,
    Load,
    Raw,
    Servers,
    Systems,
    block_order,
    interleaved,
    ms,
)

from assent_devstack.system import ServiceSpec, service_list

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".bench" / "compare"
"""Where each ref's worktree is kept, by commit (git-ignored)."""
LEGS = ("propose → visible", "apply → 200", "round", "GET …/pending")
GATEWAY = "gateway"
"""The service the benchmark's operators talk to; the ref must have it, public."""
NO_LIST = (
    "the ref has no services.toml: the harness starts the services it lists (this ref is older than the list, and"
    " cannot be compared)"
)


class Unfit(SystemExit):
    """The ref (or this machine) lacks what the comparison needs: the message says what."""

    def __init__(self, message: str) -> None:
        super().__init__(f"bench-compare: {message}")


# --- the table ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One figure of each system (None: the system has no such figure, e.g. a service only one of them runs)."""

    figure: str
    old: float | None
    new: float | None


def number(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    if abs(value) < 10:
        return f"{value:.2f}"
    if abs(value) < 1000:
        return f"{value:.1f}"
    return f"{value:.0f}"


def ratio(old: float | None, new: float | None) -> str:
    """``new / old`` as ``1.23x``; a dash where either is missing or old is zero."""
    if old is None or new is None or math.isnan(old) or math.isnan(new) or old == 0:
        return "-"
    return f"{new / old:.2f}x"


def table(sections: Iterable[tuple[str, list[Row]]], old: str, new: str) -> str:
    """The figures as a table: figure, old, new, new/old; each section's title on a line of its own."""
    sections = list(sections)
    header = ("figure", old, new, "new/old")
    cells = [(f"  {r.figure}", number(r.old), number(r.new), ratio(r.old, r.new)) for _, rows in sections for r in rows]
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(4)]

    def line(values: tuple[str, str, str, str]) -> str:
        first, *rest = values
        return "  ".join([first.ljust(widths[0]), *(v.rjust(w) for v, w in zip(rest, widths[1:], strict=True))])

    lines = [line(header), "-" * len(line(header))]
    for title, rows in sections:
        lines.append(title)
        lines += [line((f"  {r.figure}", number(r.old), number(r.new), ratio(r.old, r.new))) for r in rows]
    return "\n".join(lines)


def keys(*dicts: dict[str, Any]) -> list[str]:
    """Every key of the dicts, in the order first seen."""
    return list(dict.fromkeys(k for d in dicts for k in d))


def latency_rows(old: dict[str, list[float]], new: dict[str, list[float]]) -> list[Row]:
    rows = []
    for leg in LEGS:
        for q, label in ((0, "p50"), (1, "p99")):
            rows.append(Row(f"{leg} {label} ms", ms(old[leg])[q], ms(new[leg])[q]))
    return rows


def merged(loads: list[Load]) -> Load:
    """Several throughput runs of one system as one: their rounds over their seconds, the percentiles of all their
    rounds, CPU per round weighted by each run's rounds, the RSS after the last."""
    rounds = sum(load.rounds for load in loads)
    samples = [sample for load in loads for sample in load.samples]
    return Load(
        replicas=loads[0].replicas,
        sessions=loads[0].sessions,
        seconds=sum(load.seconds for load in loads),
        rounds=rounds,
        round_ms=ms(samples),
        cpu_ms_per_round={
            name: sum(load.cpu_ms_per_round[name] * load.rounds for load in loads) / rounds
            for name in loads[0].cpu_ms_per_round
        },
        rss_after=loads[-1].rss_after,
        samples=samples,
    )


def load_sections(old: Load, new: Load) -> list[tuple[str, list[Row]]]:
    return [
        (
            f"Throughput: {new.sessions} sessions at once, one replica of each service",
            [
                Row("rounds/s", old.per_second, new.per_second),
                Row("round p50 ms", *(load.round_ms[0] for load in (old, new))),
                Row("round p99 ms", *(load.round_ms[1] for load in (old, new))),
            ],
        ),
        (
            "CPU ms per round",
            [
                Row(name, old.cpu_ms_per_round.get(name), new.cpu_ms_per_round.get(name))
                for name in keys(new.cpu_ms_per_round, old.cpu_ms_per_round)
            ],
        ),
        (
            "RSS MiB after the last run",
            [
                Row(name, old.rss_after.get(name), new.rss_after.get(name))
                for name in keys(new.rss_after, old.rss_after)
            ],
        ),
    ]


# --- the ref's checkout ------------------------------------------------------------------------------------------


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)


def git(*args: str, cwd: Path = ROOT) -> str:
    done = run(["git", *args], cwd)
    if done.returncode != 0:
        raise Unfit(f"git {' '.join(args)} failed:\n{done.stderr.strip()}")
    return done.stdout.strip()


def resolve(ref: str) -> str:
    """The commit ``ref`` names."""
    done = run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], ROOT)
    if done.returncode != 0:
        raise Unfit(f"{ref!r} names no commit of this repository")
    return done.stdout.strip()


def worktree(commit: str) -> Path:
    """A git worktree of ``commit`` under :data:`CACHE`: the one kept from an earlier run, else a new one."""
    path = CACHE / commit[:12]
    if path.exists():
        here = run(["git", "rev-parse", "HEAD"], path)
        if (
            here.returncode == 0
            and here.stdout.strip() == commit
            and not run(["git", "status", "--porcelain"], path).stdout
        ):
            return path
        run(["git", "worktree", "remove", "--force", str(path)], ROOT)
        shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    # --force: also where the folder was removed by hand while git still lists it.
    git("worktree", "add", "--force", "--detach", "--quiet", str(path), commit)
    return path


def install(checkout: Path) -> str:
    """The checkout's own environment, made from its ``uv.lock`` as ``make install`` makes it: its interpreter."""
    if not (checkout / "uv.lock").exists():
        raise Unfit(f"{checkout} has no uv.lock: the harness installs the ref with `uv sync --frozen`")
    uv = shlex.split(os.environ.get("UV") or shutil.which("uv") or f"{sys.executable} -m uv")
    # Its own environment, not this one's (uv would otherwise act on this checkout's .venv).
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    env |= {"UV_COMPILE_BYTECODE": "1", "UV_PYTHON_DOWNLOADS": "never"}
    done = run([*uv, "sync", "--frozen", "--all-packages", "--quiet"], checkout, env)
    python = checkout / ".venv" / "bin" / "python"
    if done.returncode != 0 or not python.exists():
        raise Unfit(f"`uv sync --frozen --all-packages` failed in {checkout}:\n{done.stderr.strip()[-2000:]}")
    # Its workspace's sources too, as `make install` compiles this checkout's: neither system compiles as it starts.
    sources = [str(p) for p in (checkout / "shared", checkout / "services") if p.exists()]
    run([str(python), "-m", "compileall", "-q", "-j0", *sources], checkout)
    return str(python)


def services_of(checkout: Path) -> list[ServiceSpec]:
    """The ref's services, as its ``services.toml`` lists them (read before anything is installed)."""
    listing = checkout / "services.toml"
    if not listing.exists():
        raise Unfit(NO_LIST)
    try:
        services = service_list(listing)
    except (KeyError, TypeError, tomllib.TOMLDecodeError) as e:
        raise Unfit(f"the ref's services.toml is not in the form this harness reads ({type(e).__name__}: {e})") from e
    if not any(spec.name == GATEWAY and spec.public for spec in services):
        raise Unfit(f"the ref's services.toml lists no public {GATEWAY!r} service, which the benchmark talks to")
    return services


def check_importable(checkout: Path, python: str, services: list[ServiceSpec]) -> None:
    """Each of the ref's services is a module its environment imports (``python -m <name>`` runs it)."""
    missing = run(
        [
            python,
            "-c",
            "import importlib.util, sys;"
            " print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))",
            *(spec.name for spec in services),
        ],
        checkout,
    )
    if missing.returncode != 0 or missing.stdout.strip():
        raise Unfit(
            f"the ref's environment cannot import the services its services.toml lists: {missing.stdout.strip()}"
            f"{missing.stderr.strip()[-500:]}"
        )


def describe(commit: str) -> str:
    return f"{commit[:10]} {git('log', '-1', '--format=%s', commit)[:60]}"


# --- the run -----------------------------------------------------------------------------------------------------


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ref", help="the git ref to compare this checkout with (a branch, a tag, a commit, HEAD~3)")
    parser.add_argument("--rounds", type=int, default=200, help="sequential rounds on each for the latency figures")
    parser.add_argument("--concurrency", type=int, default=64, help="sessions at once for the throughput runs")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each throughput run")
    parser.add_argument("--blocks", type=int, default=4, help="blocks (and throughput runs) on each, taken in turn")
    parser.add_argument("--no-telemetry", action="store_true", help="run the services with OTEL_SDK_DISABLED=true")
    args = parser.parse_args()
    if args.rounds < args.blocks:
        parser.error("--rounds must be at least --blocks (each block runs rounds / blocks rounds)")

    commit = resolve(args.ref)
    head = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain"))
    print(f"old: {args.ref} = {describe(commit)}", flush=True)
    print(f"new: this checkout, {describe(head)}{' with uncommitted changes' if dirty else ''}", flush=True)
    if run(["git", "cat-file", "-e", f"{commit}:services.toml"], ROOT).returncode != 0:
        raise Unfit(NO_LIST)  # before a worktree is made for nothing
    checkout = worktree(commit)
    print(f"(the ref's worktree and environment: {checkout.relative_to(ROOT)})", flush=True)
    old_services = services_of(checkout)
    python = install(checkout)
    check_importable(checkout, python, old_services)
    new_services = service_list()
    for which, names in (
        ("old", {s.name for s in old_services} - {s.name for s in new_services}),
        ("new", {s.name for s in new_services} - {s.name for s in old_services}),
    ):
        if names:
            print(f"(services only in {which}: {', '.join(sorted(names))})")

    # The services' logs (removed after a run that finished, kept after one that failed) and the servers' data.
    scratch = [Path(tempfile.mkdtemp(prefix="assent-bench-compare-logs-"))]
    logs = {"old": scratch[0] / "old", "new": scratch[0] / "new"}
    servers = Servers.start(scratch)
    systems = Systems(servers, telemetry=not args.no_telemetry)
    started: list[Any] = []
    finished = False
    try:
        system, prefix, database = await systems.new(logs["new"])
        started.append(system)
        new = Bench(system, servers.kafka, prefix, database, servers.devstack)
        try:
            system, prefix, database = await systems.new(logs["old"], services=old_services, python=python)
        except (RuntimeError, TimeoutError) as e:
            raise Unfit(
                f"the ref's services did not start with this checkout's settings (same environment as its own"
                f" services, a database and topics of their own):\n{e}"
            ) from e
        started.append(system)
        old = Bench(system, servers.kafka, prefix, database, servers.devstack)
        benches = (old, new)  # 0 and 1 in block_order

        await asyncio.sleep(2)
        rest = {"old": old.rss(), "new": new.rss()}
        await new.throughput(args.concurrency, WARM_UP_SECONDS)  # not a figure: warms every part
        try:  # bounded: a round the ref's services never answer would otherwise wait for ever
            await asyncio.wait_for(old.throughput(args.concurrency, WARM_UP_SECONDS), WARM_UP_SECONDS + 120)
        except Exception as e:
            raise Unfit(
                "this checkout's benchmark client could not run approval rounds on the ref's services (does their"
                f" API or do their messages differ from this checkout's?): {type(e).__name__}: {e}"
            ) from e
        raw = await Raw.measure(servers.kafka, new.database_url, args.rounds)
        latency = await interleaved(old, new, args.rounds, args.blocks)
        runs: tuple[list[Load], list[Load]] = ([], [])
        for side in block_order(args.blocks):
            runs[side].append(await benches[side].throughput(args.concurrency, args.seconds))
        loads = merged(runs[0]), merged(runs[1])
        once = [await bench.exactly_once() for bench in benches]
        finished = True
    finally:
        for system in reversed(started):
            system.stop()
        servers.stop()
        for path in scratch[0 if finished else 1 :]:  # the logs are kept after a run that failed
            shutil.rmtree(path, ignore_errors=True)
        if finished:
            await systems.remove()
        else:
            print(f"the services' logs are kept in {logs['old']} and {logs['new']}", file=sys.stderr)
            if servers.devstack is None:
                print(f"their databases and topics are kept: {', '.join(systems.names)}", file=sys.stderr)

    print(f"\nApproval round, {args.ref} (old) and this checkout (new), in turn on {os.cpu_count()} cores;", end=" ")
    print(f"telemetry {'off' if args.no_telemetry else 'on'}; order of the blocks: ", end="")
    print(" ".join(("old", "new")[side] for side in block_order(args.blocks)))
    print("\nRaw floors, one set for both (the same servers)")
    raw.print()
    print()
    sections = [
        (f"Latency: {args.rounds} rounds one after another on each, in {args.blocks} blocks", latency_rows(*latency)),
        *load_sections(*loads),
        (
            "RSS MiB at rest",
            [Row(name, rest["old"].get(name), rest["new"].get(name)) for name in keys(rest["new"], rest["old"])],
        ),
    ]
    print(table(sections, f"old ({args.ref})", "new (this checkout)"))
    # Each run's figure, in the order run: how far apart runs of one system are says how much of a ratio is noise.
    each = {side: " ".join(f"{load.per_second:.0f}" for load in runs[i]) for i, side in enumerate(("old", "new"))}
    print(f"\nrounds/s of each throughput run: old {each['old']}; new {each['new']}")
    print(
        f"Throughput: {args.blocks} runs of {args.seconds:.0f} s on each; every apply answered 200, nothing left"
        f" pending, every turn continued exactly once (old {once[0][0]}, new {once[1][0]} turns). Above 1x, new"
        " takes longer or costs more, except in rounds/s (more done)."
    )
    sys.stdout.flush()


if __name__ == "__main__":
    uvloop.run(main())
