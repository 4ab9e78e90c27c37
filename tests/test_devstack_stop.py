"""Nothing ``make run`` or the test suite starts outlives them, however they end.

Each test of ``make run`` starts it in a temporary copy of this checkout (shared by the module: its ``make install``
is paid once) on the embedded servers (Tansu, PostgreSQL, Redis), waits for the demo to be up, ends it one way, and
then waits until no process of that run is left: the launcher, the services, the servers and their children.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from assent_devstack._service import free_port
from assent_devstack.system import REPO

pytestmark = pytest.mark.integration

MARK = "ASSENT_TEST_RUN_MARK"
"""An environment variable only the processes of one run carry (read by these tests, by nothing else)."""
READY = "Assent is running."
STOPPED = "Stopped: every service and server this run started has ended."


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    start_ticks: int
    cmdline: str


def wait_until(probe: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` seconds, saying ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.2)


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()  # [0] state, [1] ppid, [19] start time


def _live_processes() -> dict[int, Proc]:
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or (stat := _stat(int(entry.name))) is None or stat[0] in ("Z", "X"):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found[int(entry.name)] = Proc(int(entry.name), int(stat[1]), int(stat[19]), cmdline)
    return found


def _carries(pid: int, mark: str, clone: Path) -> bool:
    """Whether the process has the run's mark in its environment, or runs from or in the clone. (Redis and
    PostgreSQL's workers write their titles over their environment, so the mark alone does not find them.)"""
    proc = Path(f"/proc/{pid}")
    try:
        if f"{MARK}={mark}".encode() in (proc / "environ").read_bytes().split(b"\0"):
            return True
        return any(_within(os.readlink(proc / link), clone) for link in ("exe", "cwd"))
    except OSError:
        return False


def _within(path: str, folder: Path) -> bool:
    return path == str(folder) or path.startswith(f"{folder}/")


def processes_of_run(mark: str, clone: Path, roots: tuple[int, ...] = ()) -> dict[int, Proc]:
    """The live processes of a run: those that carry its mark or run from its clone, ``roots``, and every
    descendant of them."""
    live = _live_processes()
    found = {pid: p for pid, p in live.items() if pid in roots or _carries(pid, mark, clone)}
    children: dict[int, list[Proc]] = {}
    for p in live.values():
        children.setdefault(p.ppid, []).append(p)
    todo = list(found.values())
    while todo:
        for child in children.get(todo.pop().pid, []):
            if child.pid not in found:
                found[child.pid] = child
                todo.append(child)
    return found


def still_running(procs: dict[int, Proc]) -> list[str]:
    live = _live_processes()
    return [p.cmdline[:120] for pid, p in procs.items() if pid in live and live[pid].start_ticks == p.start_ticks]


def wait_all_gone(procs: dict[int, Proc], mark: str, clone: Path) -> None:
    """Wait until none of ``procs`` runs and no other process of the run has appeared meanwhile."""

    def gone() -> bool:
        return not still_running(procs) and not processes_of_run(mark, clone)

    try:
        wait_until(gone, 30, "every process of the run gone")
    except AssertionError:
        left = still_running(procs) + [p.cmdline[:120] for p in processes_of_run(mark, clone).values()]
        for pid in {*procs, *processes_of_run(mark, clone)}:  # leave nothing behind for the next test
            with_start = procs.get(pid)
            if with_start is None or still_running({pid: with_start}):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        raise AssertionError(f"still running 30 s after the run ended: {left}") from None


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout's files as they are now (committed or not), without its virtualenv or state."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    target = tmp_path_factory.mktemp("clone")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@dataclass
class Run:
    """A ``make run`` in the clone, in a process group of its own (as a shell's job)."""

    process: subprocess.Popen[bytes]
    output: Path
    mark: str
    clone: Path

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout: float) -> None:
        def seen() -> bool:
            if text in self.text():
                return True
            if self.process.poll() is not None:
                raise AssertionError(f"make run exited with {self.process.returncode}:\n{self.text()[-3000:]}")
            return False

        wait_until(seen, timeout, f"make run saying {text!r}")

    def exited(self) -> int:
        return self.process.wait(60)


@pytest.fixture
def make_run(clone: Path, tmp_path: Path) -> Iterator[Callable[..., Run]]:
    """Starts ``make run`` (behind ``wrapper``, a command that runs it, when given) and waits for its demo; after
    the test, every run it started is sure to be gone."""
    started: list[Run] = []

    def start(*wrapper: str) -> Run:
        mark = uuid.uuid4().hex
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ASSENT_", "KAFKA_")) and k != "VIRTUAL_ENV"}
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
        env.update({MARK: mark, "ASSENT_GATEWAY_PORT": str(free_port())})
        output = tmp_path / "make-run.out"
        with output.open("wb") as out:
            process = subprocess.Popen(
                [*wrapper, "make", "run"],
                cwd=clone,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        run = Run(process, output, mark, clone)
        started.append(run)
        run.wait_for_output(READY, timeout=240)
        return run

    try:
        yield start
    finally:
        for run in started:
            if run.process.poll() is None:
                os.killpg(run.process.pid, signal.SIGKILL)
                run.process.wait()
            for pid in processes_of_run(run.mark, run.clone):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def the_run(run: Run) -> dict[int, Proc]:
    """Every process of the run now; fails unless the launcher, each service and each server is among them."""
    procs = processes_of_run(run.mark, run.clone, roots=(run.process.pid,))
    commands = [p.cmdline for p in procs.values()]
    for expected in (
        "assent_devstack.run",
        "-m edits",
        "-m deployer",
        "-m gateway",
        "broker --listener-url",
        "redis-server",
        "postgres -D",
    ):
        assert any(expected in command for command in commands), (expected, commands)
    return procs


def launcher(procs: dict[int, Proc]) -> int:
    """The Python process of ``python -m assent_devstack.run`` (not ``uv run``, whose command line names it too)."""
    [pid] = [
        p.pid
        for p in procs.values()
        if "-m assent_devstack.run" in p.cmdline and Path(p.cmdline.split()[0]).name.startswith("python")
    ]
    return pid


def the_printed_commands_answer_readably(run: Run) -> None:
    """The demo's first two printed commands, run as a user pastes them, answer JSON over several indented lines."""
    text = run.text()
    for label, until in (("See what waits:", "See a card"), ("Ada's Memory now:", "When you have decided")):
        command = text.split(label, 1)[1].split(until, 1)[0].rsplit("\n", 1)[0]
        answer = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, check=True)
        assert answer.stdout.count("\n") > 2 and "\n    " in answer.stdout, (command, answer.stdout)
        assert isinstance(json.loads(answer.stdout), dict)


def ctrl_c(run: Run, procs: dict[int, Proc]) -> None:
    the_printed_commands_answer_readably(run)
    os.killpg(run.process.pid, signal.SIGINT)  # what the terminal does on Ctrl-C: the whole foreground job
    run.exited()
    wait_until(lambda: STOPPED in run.text(), 30, "make run saying it has stopped")  # it says so, once it has
    assert run.text().index("Stopping ...") < run.text().index(STOPPED)


def sigterm_to_make(run: Run, procs: dict[int, Proc]) -> None:
    os.kill(run.process.pid, signal.SIGTERM)
    run.exited()


def sigterm_to_the_group_again_while_stopping_then_sigkill(run: Run, procs: dict[int, Proc]) -> None:
    """As a supervisor does: SIGTERM to the process group (make passes it on once more), again twice while the
    run stops its services, and SIGKILL to the group once make has exited."""
    os.killpg(run.process.pid, signal.SIGTERM)
    run.wait_for_output("Stopping ...", timeout=60)
    os.killpg(run.process.pid, signal.SIGTERM)
    os.killpg(run.process.pid, signal.SIGTERM)
    run.exited()
    try:
        os.killpg(run.process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the whole group had exited


def the_launcher_killed(run: Run, procs: dict[int, Proc]) -> None:
    os.kill(launcher(procs), signal.SIGKILL)
    assert run.exited() != 0


ENDINGS: dict[str, Callable[[Run, dict[int, Proc]], None]] = {
    "ctrl-c": ctrl_c,
    "sigterm to make": sigterm_to_make,
    "sigterm to the group, again while stopping, then sigkill": sigterm_to_the_group_again_while_stopping_then_sigkill,
    "kill -9 of the launcher": the_launcher_killed,
}


@pytest.mark.parametrize("end", ENDINGS.values(), ids=ENDINGS.keys())
def test_however_make_run_ends_nothing_it_started_is_left(
    make_run: Callable[..., Run], end: Callable[[Run, dict[int, Proc]], None]
) -> None:
    run = make_run()
    procs = the_run(run)
    end(run, procs)
    wait_all_gone(procs, run.mark, run.clone)


def test_when_its_timeout_runs_out_nothing_make_run_started_is_left(
    make_run: Callable[..., Run],
) -> None:
    run = make_run("timeout", "-s", "TERM", "3600")
    procs = the_run(run)
    os.kill(run.process.pid, signal.SIGALRM)  # GNU timeout takes SIGALRM as its time being up
    assert run.exited() == 124  # timeout's own code for "timed out"
    wait_all_gone(procs, run.mark, run.clone)


STACK_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from assent_devstack import start_all
    from assent_devstack.system import build_system

    async def main():
        state = Path(sys.argv[1])
        stack = await asyncio.to_thread(start_all, state / "servers", kafka_engine="tansu")
        env = stack.env()
        system = build_system(
            kafka_bootstrap_servers=env["KAFKA_BOOTSTRAP_SERVERS"],
            database_url=env["DATABASE_URL"],
            redis_url=env["REDIS_URL"],
            log_dir=state / "logs",
            kafka_idempotence=False,
        )
        system.processes = {"edits": system.processes["edits"]}
        await asyncio.to_thread(system.start)  # as the suite's fixtures start theirs, from a passing thread
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def test_servers_and_services_the_suite_starts_end_with_it(tmp_path: Path) -> None:
    """A test process that holds a stack as the suite's fixtures do (servers, and a service started from another
    thread than the main one) and is killed, so that none of its clean-up runs, leaves nothing running."""
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASSENT_", "KAFKA_"))}
    output = tmp_path / "holder.out"
    with output.open("wb") as out:
        holder = subprocess.Popen(
            [sys.executable, "-c", STACK_HOLDER, str(tmp_path)],
            env={**env, MARK: mark},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:

        def ready() -> bool:
            assert holder.poll() is None, output.read_text()
            return output.read_text().startswith("ready")

        wait_until(ready, 180, "the stack up")
        procs = processes_of_run(mark, tmp_path, roots=(holder.pid,))
        commands = [p.cmdline for p in procs.values()]
        for expected in ("-m edits", "broker --listener-url", "redis-server", "postgres -D"):
            assert any(expected in command for command in commands), (expected, commands)
        holder.kill()
        assert holder.wait(30) == -signal.SIGKILL
        wait_all_gone(procs, mark, tmp_path)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
