"""The `Service` handle and the process plumbing every server shares.

Linux only: liveness and memory are read from /proc.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assent_devstack._probes import Kind as Kind
from assent_devstack._probes import port_open as port_open
from assent_devstack._probes import probe
from assent_devstack._probes import run_async as run_async

LOG_TAIL_LINES = 40


class DevstackError(RuntimeError):
    """A server could not be started, reached or stopped. The message says why (with its log tail)."""


@dataclass
class Service:
    """A running server started by this package, or one recorded by an earlier run (see `from_dict`).

    Contract:
      - `endpoint` is what a client needs: Kafka's bootstrap `host:port`, otherwise a URL.
      - `pids` are the server's top-level processes; their children exit with them.
      - `stop()` asks politely (`stop_signal`), kills after `timeout`, and is safe to call twice.
      - `healthy()` is a real client round trip, not just a liveness check.
    """

    name: str
    kind: Kind
    endpoint: str
    pids: tuple[int, ...]
    logs: tuple[Path, ...]
    stop_signal: int = signal.SIGTERM
    startup_seconds: float = 0.0
    # Start times (clock ticks since boot) guard against signalling a recycled pid.
    start_ticks: tuple[int | None, ...] = ()
    _popen: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)
    # Extra client arguments the health probe needs (a SASL listener's credentials). Not in `to_dict`:
    # a handle rebuilt in another process cannot probe such a listener.
    probe_kwargs: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.start_ticks:
            self.start_ticks = tuple(proc_start_ticks(pid) for pid in self.pids)

    @property
    def pid(self) -> int:
        """The main process id."""
        return self.pids[0]

    def alive(self) -> bool:
        """True while any of the server's top-level processes is still running."""
        if self._popen is not None and self._popen.poll() is not None:
            return False
        return any(_same_process_alive(p, t) for p, t in zip(self.pids, self.start_ticks, strict=True))

    def healthy(self, timeout: float = 5.0) -> bool:
        """True when the server answers a client request within `timeout` seconds."""
        return self.alive() and probe(self.kind, self.endpoint, timeout, **self.probe_kwargs)

    def rss_bytes(self) -> int:
        """Resident memory of the server's processes and all their descendants."""
        return sum(_rss(pid) for pid in _with_descendants(self._live_pids()))

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of each of the server's non-empty log files, labelled, for error messages."""
        return "\n".join(
            f"--- {log} ---\n{tail(log, lines)}" for log in self.logs if not log.exists() or log.stat().st_size
        )

    def stop(self, timeout: float = 30.0) -> None:
        """Stop gracefully, then SIGKILL whatever is left after `timeout` seconds."""
        for pid in self._live_pids():
            _signal(pid, self.stop_signal)
        if not self._wait_dead(timeout):
            for pid in self._live_pids():
                _signal(pid, signal.SIGKILL)
            if not self._wait_dead(10.0):
                raise DevstackError(f"{self.name} (pids {self.pids}) survived SIGKILL")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able record from which `from_dict` rebuilds this handle in another process."""
        return {
            "name": self.name,
            "kind": self.kind,
            "endpoint": self.endpoint,
            "pids": list(self.pids),
            "start_ticks": list(self.start_ticks),
            "logs": [str(p) for p in self.logs],
            "stop_signal": int(self.stop_signal),
            "startup_seconds": self.startup_seconds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Service:
        """Inverse of `to_dict`."""
        return cls(
            name=data["name"],
            kind=data["kind"],
            endpoint=data["endpoint"],
            pids=tuple(data["pids"]),
            start_ticks=tuple(data["start_ticks"]),
            logs=tuple(Path(p) for p in data["logs"]),
            stop_signal=data["stop_signal"],
            startup_seconds=data.get("startup_seconds", 0.0),
        )

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _live_pids(self) -> list[int]:
        if self._popen is not None:
            self._popen.poll()  # reaps our own child so it is not left as a zombie
        return [p for p, t in zip(self.pids, self.start_ticks, strict=True) if _same_process_alive(p, t)]

    def _wait_dead(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._live_pids():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True


def wait_ready(service: Service, timeout: float | None = None, started: float | None = None) -> Service:
    """Block until `service.healthy()`, then set `service.startup_seconds` (counted from `started`, a
    `time.monotonic()` value, default now) and return it.

    The server is waited for as long as it makes progress (its logs grow or its processes spend CPU), up to
    `timeout` seconds (default: ASSENT_START_TIMEOUT_SECONDS; see :mod:`assent_devstack._progress`). If the
    server dies, stops making progress, reaches that bound, or the wait is interrupted, the server is stopped and
    DevstackError (with its log tail) or the interrupt is raised.
    """
    from assent_devstack._progress import StartWatch

    started = time.monotonic() if started is None else started
    watch = StartWatch(service.name, lambda: _with_descendants(service._live_pids()), service.logs, timeout=timeout)
    try:
        while True:
            answered = probe(service.kind, service.endpoint, timeout=5.0, **service.probe_kwargs)
            # Checked after the probe, so that another server answering on the same port is not
            # mistaken for ours when ours has died.
            if not service.alive():
                code = service._popen.poll() if service._popen is not None else None
                raise DevstackError(f"{service.name} exited during start-up (exit code {code})\n{service.log_tail()}")
            if answered:
                break
            if (why := watch.verdict()) is not None:
                raise DevstackError(f"{why}; it did not answer on {service.endpoint}\n{service.log_tail()}")
            time.sleep(0.1)
    except BaseException:
        if service.alive():
            service.stop(timeout=5.0)
        raise
    service.startup_seconds = round(time.monotonic() - started, 2)
    return service


def spawn(
    cmd: list[str],
    log: Path,
    cwd: Path,
    env: dict[str, str] | None = None,
    *,
    detached: bool = False,
    death_signal: int = signal.SIGKILL,
) -> subprocess.Popen[bytes]:
    """Start `cmd` in a session of its own (the terminal's Ctrl-C does not reach it), stdout+stderr appended
    to `log`.

    Unless `detached`, it is tied to this process (`start_tied`): it receives `death_signal` when this
    process ends, however it ends. A detached one outlives this process until it is stopped.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        kwargs: dict[str, Any] = {
            "cwd": cwd,
            "env": env,
            "stdin": subprocess.DEVNULL,
            "stdout": out,
            "stderr": subprocess.STDOUT,
            "start_new_session": True,
        }
        if detached:
            return subprocess.Popen(cmd, **kwargs)
        return start_tied(cmd, death_signal=death_signal, **kwargs)


# --- the lifeline: children that end with this process -------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl  # ctypes does not type C functions
        return prctl
    except (OSError, AttributeError):  # not Linux: no lifeline, the clean-up alone stops the children
        return None


_PRCTL = _load_prctl()
_forker: tuple[int, ThreadPoolExecutor] | None = None
_forker_lock = threading.Lock()


def _forker_thread() -> ThreadPoolExecutor:
    """The one thread that forks every tied child, made on first use (and again in a forked copy of this process).

    The kernel sends a child its parent-death signal when the *thread* that forked it ends, not the process:
    forked from a short-lived thread (a pool's worker, the thread of `asyncio.to_thread`), a server would be
    killed as soon as that thread finished. This thread lives as long as the process (it is joined only at
    interpreter exit).
    """
    global _forker
    with _forker_lock:
        if _forker is None or _forker[0] != os.getpid():
            _forker = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="devstack-forker"))
        return _forker[1]


def start_tied(args: list[str], *, death_signal: int = signal.SIGKILL, **popen_kwargs: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(args, **popen_kwargs)` whose process ends with this one.

    The child asks the kernel (`prctl(PR_SET_PDEATHSIG)`, after any change of user that `user=` makes, so
    that the change does not clear it) for `death_signal` when this process ends: a clean exit, an
    exception, SIGKILL. The request holds across `exec` of an ordinary program, but not for processes the child
    forks, so the program must be the long-lived process itself (not a launcher that daemonises). A child
    whose parent is already gone when it makes the request exits at once. Should the caller be interrupted
    (Ctrl-C) while the child starts, the child still starts, unseen by the caller, and ends with this process.
    """
    parent = os.getpid()
    prctl = _PRCTL

    def tie() -> None:  # runs in the child, between fork and exec
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(death_signal), 0, 0, 0)
        if os.getppid() != parent:  # this process ended before the request was made
            os._exit(1)

    def start() -> subprocess.Popen[Any]:
        return subprocess.Popen(args, preexec_fn=tie, **popen_kwargs)

    return _forker_thread().submit(start).result()


def run_tied(
    args: list[str], *, death_signal: int = signal.SIGKILL, **popen_kwargs: Any
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run(args, **popen_kwargs)` (without `input`, `timeout` or `check`) for a tool tied to this
    process as by `start_tied`: killed should this process end while it runs (a download, a format, initdb)."""
    with start_tied(args, death_signal=death_signal, **popen_kwargs) as process:
        try:
            stdout, stderr = process.communicate()
        except BaseException:
            process.kill()
            raise
        return subprocess.CompletedProcess(process.args, process.wait(), stdout, stderr)


LOWEST_PORT = 10000


def _ephemeral_ports() -> tuple[int, int]:
    """The range the kernel picks the local port of an outgoing connection from."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(exclude: tuple[int, ...] = ()) -> int:
    """A port on 127.0.0.1 that nothing holds now, below the kernel's ephemeral range where it can.

    A service binds its port seconds after it is chosen (the services before it start first). A port from the
    ephemeral range could meanwhile become the local end of any outgoing connection, to Kafka, PostgreSQL or
    Redis, and the service would fail to bind it; a port below that range is never handed out so.
    """
    low, _ = _ephemeral_ports()
    candidates = random.sample(range(LOWEST_PORT, low), min(50, low - LOWEST_PORT)) if low > LOWEST_PORT else []
    for port in candidates:
        if port in exclude:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    while True:  # no free port below the range: any the kernel picks
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in exclude:
            return port


def pick_port(port: int | None, exclude: tuple[int, ...] = ()) -> int:
    """`port` if nothing listens on it (else DevstackError), or a free port when `port` is None."""
    if port is None:
        return free_port(exclude)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # SO_REUSEADDR as the servers set it: bind then fails only if something listens on the port.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise DevstackError(f"port {port} on 127.0.0.1 is already in use") from e
    return port


def listens_on(pid: int, port: int) -> bool | None:
    """Whether process `pid` holds a listening TCP socket on `port` (any address, IPv4 or IPv6).

    Read from /proc/net/tcp{,6} and /proc/<pid>/fd; None when /proc cannot tell.
    """
    inodes: set[str] = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...; st 0A is LISTEN
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    if not readable:
        return None
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[len("socket:[") : -1] in inodes:
            return True
    return False


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a text file, or a note that it does not exist."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - 256 * lines, 0))
            text = f.read().decode(errors="replace")
    except FileNotFoundError:
        return "(no log file)"
    return "\n".join(text.splitlines()[-lines:])


def proc_start_ticks(pid: int) -> int | None:
    """The process start time from /proc/<pid>/stat, or None when there is no such process."""
    stat = _read_stat(pid)
    return int(stat[19]) if stat else None


def _read_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (so index 0 is the state)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rindex(")") + 2 :].split()


def _same_process_alive(pid: int, ticks: int | None) -> bool:
    stat = _read_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    return ticks is None or int(stat[19]) == ticks


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _with_descendants(pids: list[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _read_stat(int(entry.name))):
            children.setdefault(int(stat[1]), []).append(int(entry.name))
    found, todo = set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0
