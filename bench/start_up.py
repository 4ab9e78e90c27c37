"""``make bench-start``: how long ``make run`` takes to start, and where the time goes.

Each run starts ``make run``'s program as ``make run`` does once installed (``uv run --frozen python -m
assent_devstack.run``, with a state directory and a gateway port of its own), times each line it prints until the
demo's curl commands (``Ctrl-C stops everything.``), reads each service's ``started in ...`` log line for its steps
(imports, migrations, topics, own resources, consumer group), then stops it with SIGINT, as Ctrl-C does, and times
the stop. It prints each run, then the median of the runs:

- ``curl commands``: from the start of the program to its curl commands: the figure ``make run`` is held to
  (40 s on 2 cores);
- ``servers``: Kafka (Tansu by default), PostgreSQL and Redis started afresh;
- each service's time from its launch to ready, and the slowest of them;
- ``demo``: seeding the workspace and the coach's five calls, until the curl commands are printed;
- each step of each service's own start;
- ``stop``: from SIGINT to ``Stopped``.

Beside them, measured in the same run, the raw floor of a service's start: a Python interpreter importing the
libraries every service imports (FastAPI, SQLAlchemy, aiokafka, FastStream, OpenTelemetry, alembic), and the ratio
of the slowest service's start to it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "deploy" / "devstack" / "src"))

from assent_devstack._service import free_port  # noqa: E402  # after the path above

FLOOR_IMPORTS = "import fastapi, sqlalchemy.ext.asyncio, aiokafka, faststream.kafka, opentelemetry.sdk.trace, alembic"
READY_LINE = re.compile(r"^Ready ([\d.]+)s after start: (.*) from launch")
STARTED_LINE = re.compile(r"started in [\d.]+ s: (.*)$")


def floor_seconds(python: str) -> float:
    """Seconds a fresh interpreter takes to import what every service imports (the raw floor of a start)."""
    began = time.monotonic()
    subprocess.run([python, "-c", FLOOR_IMPORTS], check=True, cwd=REPO)
    return time.monotonic() - began


def one_run(kafka: str, timeout: float) -> dict[str, Any]:
    """Start ``make run``'s program, time it to its curl commands, stop it; the figures of this run."""
    with tempfile.TemporaryDirectory(prefix="assent-bench-start-") as scratch:
        state = Path(scratch) / "run"
        env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL", "REDIS_URL")}
        env["UV_PYTHON_DOWNLOADS"] = "never"
        command = ["uv", "run", "--frozen", "python", "-m", "assent_devstack.run"]
        command += ["--state-dir", str(state), "--port", str(free_port()), "--kafka", kafka]
        began = time.monotonic()
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert process.stdout is not None
        lines: list[tuple[float, str]] = []
        seen = threading.Event()
        stopped = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append((time.monotonic() - began, line.rstrip("\n")))
                if "Ctrl-C stops everything." in line:
                    seen.set()
                if line.startswith("Stopped"):
                    stopped.set()
            seen.set()
            stopped.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            if not seen.wait(timeout) or process.poll() is not None:
                raise SystemExit("make run did not print its curl commands:\n" + "\n".join(t for _, t in lines[-40:]))
            figures = figures_of(lines)
            figures["steps"] = service_steps(state / "logs")
            stop_began = time.monotonic()
            os.killpg(process.pid, signal.SIGINT)
            stopped.wait(120)
            process.wait(120)
            figures["stop"] = time.monotonic() - stop_began
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        return figures


def figures_of(lines: list[tuple[float, str]]) -> dict[str, Any]:
    """The run's figures from its timed output."""
    at = {text: t for t, text in reversed(lines)}

    def when(prefix: str) -> float:
        return next(t for text, t in at.items() if text.startswith(prefix))

    ready_at, services = next((t, match.group(2)) for t, text in lines if (match := READY_LINE.match(text)) is not None)
    per_service = {
        name: float(seconds.rstrip("s")) for name, seconds in (part.split() for part in services.split(", "))
    }
    curl = when("Ctrl-C stops everything.")
    return {
        "curl commands": curl,
        "servers": when("Starting the services") - when("Starting Kafka"),
        "services": per_service,
        "slowest service": max(per_service.values()),
        "demo": curl - ready_at,
    }


def service_steps(logs: Path) -> dict[str, dict[str, float]]:
    """Each service's steps, from its ``started in`` log line (readable or JSON)."""
    steps: dict[str, dict[str, float]] = {}
    for log in sorted(logs.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if "start_seconds" in record:
                    steps[log.stem] = record["start_seconds"]
            elif (match := STARTED_LINE.search(line)) is not None:
                parts = (part.rsplit(" ", 2) for part in match.group(1).split(", "))
                steps[log.stem] = {name: float(seconds) for name, seconds, _ in parts}
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="how many starts to time (default 3)")
    parser.add_argument(
        "--kafka", choices=("tansu", "kafka"), default="tansu", help="make run's broker (default tansu)"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="give up on a run after this many seconds")
    args = parser.parse_args()
    python = str(REPO / ".venv" / "bin" / "python")
    runs = []
    floors = []
    for n in range(1, args.runs + 1):
        floors.append(floor_seconds(python))
        run = one_run(args.kafka, args.timeout)
        runs.append(run)
        services = "  ".join(f"{name} {seconds:.1f}" for name, seconds in run["services"].items())
        print(
            f"run {n}: curl commands {run['curl commands']:.1f} s  (servers {run['servers']:.1f}, services "
            f"[{services}], demo {run['demo']:.1f}; stop {run['stop']:.1f} s; import floor {floors[-1]:.2f} s)",
            flush=True,
        )
    median = statistics.median
    print(f"\nmedian of {len(runs)} runs, {os.cpu_count()} cores, broker {args.kafka}:")
    print(f"  curl commands printed   {median(r['curl commands'] for r in runs):6.1f} s   (target 40 s)")
    print(f"  servers                 {median(r['servers'] for r in runs):6.1f} s")
    for name in runs[0]["services"]:
        print(f"  {name:<23} {median(r['services'][name] for r in runs):6.1f} s   to ready, from launch")
    slowest, floor = median(r["slowest service"] for r in runs), median(floors)
    print(f"  slowest service         {slowest:6.1f} s   {slowest / floor:.1f}x the import floor ({floor:.2f} s)")
    print(f"  demo turn               {median(r['demo'] for r in runs):6.1f} s")
    print(f"  stop                    {median(r['stop'] for r in runs):6.1f} s")
    steps = [r["steps"] for r in runs if r["steps"]]
    if steps:
        print("\n  each service's own start (median s):")
        names = list(steps[0][next(iter(steps[0]))])
        print(f"  {'':<12}" + "".join(f"{name:>16}" for name in names))
        for service in steps[0]:
            cells = [median(s[service].get(name, 0.0) for s in steps if service in s) for name in names]
            print(f"  {service:<12}" + "".join(f"{cell:16.2f}" for cell in cells))


if __name__ == "__main__":
    main()
