"""A start is waited for while it makes progress: a slow service is not failed by a fixed wait, a stuck or dead one
is, with the reason and its log tail."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from assent_devstack._progress import StartSettings, StartWatch, cpu_seconds
from assent_devstack.system import ServiceProcess, free_port


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def idle() -> Iterator[subprocess.Popen[bytes]]:
    """A process that spends no CPU and writes nothing (as one stuck on a lock would)."""
    process = subprocess.Popen(["sleep", "600"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_start_that_writes_its_log_is_waited_for_past_the_stall_window(
    tmp_path: Path, idle: subprocess.Popen[bytes]
) -> None:
    log, clock = tmp_path / "service.log", Clock()
    log.write_text("starting\n")
    watch = StartWatch(
        "edits",
        lambda: (idle.pid,),
        (log,),
        StartSettings(timeout_seconds=100, stall_seconds=5),
        clock=clock,
    )
    for step in range(10):  # 40 s in all, 8 times the stall window, a line every 4 s
        clock.now += 4
        with log.open("a") as f:
            f.write(f"still migrating {step}\n")
        assert watch.verdict() is None


@pytest.mark.parametrize(
    ("advance", "limits", "reason"),
    [
        (6.0, StartSettings(timeout_seconds=100, stall_seconds=5), "edits stopped making progress"),
        (101.0, StartSettings(timeout_seconds=100, stall_seconds=500), "ASSENT_START_TIMEOUT_SECONDS"),
    ],
    ids=["no log and no CPU for longer than the stall window", "still going at the bound"],
)
def test_a_start_fails_when_it_stalls_or_reaches_the_bound(
    tmp_path: Path, idle: subprocess.Popen[bytes], advance: float, limits: StartSettings, reason: str
) -> None:
    log, clock = tmp_path / "service.log", Clock()
    log.write_text("starting\n")
    watch = StartWatch("edits", lambda: (idle.pid,), (log,), limits, clock=clock)
    clock.now += advance - 1
    assert watch.verdict() is None
    clock.now += 1.5
    verdict = watch.verdict()
    assert verdict is not None and reason in verdict


def test_cpu_spent_counts_as_progress(tmp_path: Path) -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        clock = Clock()
        watch = StartWatch(
            "gateway", lambda: (busy.pid,), (), StartSettings(timeout_seconds=1000, stall_seconds=5), clock=clock
        )
        spent = cpu_seconds((busy.pid,))
        for _ in range(4):  # 4 windows long: a busy process is never taken for a stuck one
            target = cpu_seconds((busy.pid,)) + 0.05
            while cpu_seconds((busy.pid,)) < target:
                pass
            clock.now += 4
            assert watch.verdict() is None
        assert cpu_seconds((busy.pid,)) > spent
    finally:
        busy.kill()
        busy.wait()


SLOW_SERVICE = """
import sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

for i in range({lines}):  # a slow start that says how it goes: imports, migrations, a consumer group
    print("starting, step", i, flush=True)
    time.sleep({pause})
time.sleep({silence})

class Ready(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{{"service": "{name}", "status": "ready"}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", {port}), Ready).serve_forever()
"""


def service(tmp_path: Path, name: str, *, lines: int, pause: float, silence: float) -> ServiceProcess:
    """A stand-in service, ``python -m <name>``, that answers ``/readyz`` after a start of its own pace."""
    port = free_port()
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(SLOW_SERVICE.format(lines=lines, pause=pause, silence=silence, name=name, port=port))
    )
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    return ServiceProcess(name, port, env, tmp_path / f"{name}.log")


def test_a_service_slower_than_the_stall_window_but_making_progress_becomes_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSENT_START_STALL_SECONDS", "1.5")
    slow = service(tmp_path, "slowpoke", lines=8, pause=0.5, silence=0)  # 4 s, each step well inside the window
    try:
        slow.start()
        assert slow.ready_seconds is not None and slow.ready_seconds >= 4
    finally:
        slow.stop()


def test_a_service_that_stops_making_progress_fails_the_start_with_its_log_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSENT_START_STALL_SECONDS", "1.5")
    stuck = service(tmp_path, "stuck", lines=2, pause=0.1, silence=600)
    with pytest.raises(TimeoutError, match="stuck stopped making progress") as failed:
        stuck.start()
    assert "starting, step 1" in str(failed.value)  # the log tail
    assert stuck.process is not None and stuck.process.poll() is not None  # and it was stopped


def test_a_service_that_exits_fails_the_start_at_once_with_its_log_tail(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("print('no DATABASE_URL given', flush=True)\nraise SystemExit(3)\n")
    broken = ServiceProcess("broken", free_port(), {"PYTHONPATH": str(tmp_path)}, tmp_path / "broken.log")
    with pytest.raises(RuntimeError, match="broken exited with 3") as failed:
        broken.start()
    assert "no DATABASE_URL given" in str(failed.value)


def test_a_bound_that_is_not_a_number_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSENT_START_TIMEOUT_SECONDS", "soon")
    with pytest.raises(ValueError, match="timeout_seconds"):
        StartSettings()
