"""Run Assent's services as separate processes against given Kafka, PostgreSQL and Redis endpoints.

Used by ``make run`` and by the integration tests: each service is its own OS process (``python -m edits``,
``python -m gateway``), configured only through its environment, exactly as in a deployment.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServiceProcess:
    """One service process. ``start`` waits until its ``/readyz`` answers (migrated, database and broker up)."""

    module: str
    port: int
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, extra_env: dict[str, str] | None = None, timeout: float = 60.0) -> None:
        env = {**os.environ, **self.env, "ASSENT_HTTP_PORT": str(self.port), **(extra_env or {})}
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.module} exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"{self.module} did not become healthy in {timeout}s:\n{self.log_tail()}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)

    def wait_exit(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


REPO = Path(__file__).resolve().parents[4]


@dataclass(frozen=True)
class ServiceSpec:
    """One row of ``services.toml``."""

    name: str
    public: bool = False


def service_list(path: Path = REPO / "services.toml") -> list[ServiceSpec]:
    """The services of Assent, in start order, as ``services.toml`` lists them."""
    with path.open("rb") as file:
        rows = tomllib.load(file)["service"]
    return [ServiceSpec(row["name"], bool(row.get("public", False))) for row in rows]


@dataclass
class System:
    """Every service of ``services.toml``, each its own process, wired to each other and to the endpoints."""

    processes: dict[str, ServiceProcess]
    env: dict[str, str]

    def __getattr__(self, name: str) -> ServiceProcess:
        processes = self.__dict__.get("processes", {})
        if name in processes:
            return processes[name]  # type: ignore[no-any-return]
        raise AttributeError(name)

    def start(self) -> None:
        for process in self.processes.values():
            process.start()

    def stop(self) -> None:
        for process in reversed(self.processes.values()):
            process.stop()


def build_system(
    *,
    kafka_bootstrap_servers: str,
    database_url: str,
    redis_url: str,
    log_dir: Path,
    topic_prefix: str = "",
    api_tokens: str = '{"dev-token": "operator"}',
    kafka_idempotence: bool = True,
    extra_env: dict[str, str] | None = None,
    gateway_port: int | None = None,
) -> System:
    log_dir.mkdir(parents=True, exist_ok=True)
    services = service_list()
    ports = {spec.name: (gateway_port if spec.public and gateway_port else free_port()) for spec in services}
    owner_urls = {spec.name: f"http://127.0.0.1:{ports[spec.name]}" for spec in services if not spec.public}
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap_servers,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "ASSENT_TOPIC_PREFIX": topic_prefix,
        "ASSENT_KAFKA_IDEMPOTENCE": "true" if kafka_idempotence else "false",
        "ASSENT_API_TOKENS": api_tokens,
        "ASSENT_OWNER_URLS": json.dumps(owner_urls),
        **(extra_env or {}),
    }
    return System(
        processes={
            spec.name: ServiceProcess(spec.name, ports[spec.name], env, log_dir / f"{spec.name}.log")
            for spec in services
        },
        env=env,
    )
