"""Run Assent's services as separate processes against given Kafka, PostgreSQL and Redis endpoints.

Used by ``make run`` and by the integration tests: each service is its own OS process (``python -m edits``,
``python -m gateway``), configured only through its environment, exactly as in a deployment.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServiceProcess:
    """One service process. ``start`` waits until its ``/readyz`` answers (migrations ran, database and broker answer)."""

    module: str
    port: int
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, extra_env: dict[str, str] | None = None, timeout: float = 60.0) -> None:
        """Start the process and wait until it is ready: ``/readyz`` answers 200 naming this service, the
        process is still running after that answer, and (where /proc tells) it is the one listening on the
        port, so that another process on the port is never taken for it. Raises RuntimeError with the log
        tail when the process exits, TimeoutError (after stopping it) when it is not ready within ``timeout``.
        """
        from assent_devstack._service import listens_on

        env = {**os.environ, **self.env, "ASSENT_HTTP_PORT": str(self.port), **(extra_env or {})}
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()  # the child has its own copy
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                response: httpx.Response | None = httpx.get(f"{self.url}/readyz", timeout=1.0)
            except httpx.HTTPError as e:
                response, last = None, f"no answer ({type(e).__name__})"
            # Checked after the request: once ours has exited, whatever answers on the port is not ours.
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.module} exited with {self.process.returncode}:\n{self.log_tail()}")
            if response is not None:
                try:
                    body = response.json()
                except ValueError:
                    body = None
                service = body.get("service") if isinstance(body, dict) else None
                last = f"HTTP {response.status_code} {response.text[:200]!r}"
                if service != self.module:
                    last = f"{last}, which is not {self.module!r}'s answer"
                elif response.status_code == 200 and listens_on(self.process.pid, self.port) is not False:
                    return
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(
            f"{self.module} did not become ready on port {self.port} in {timeout}s (last answer: {last}):\n"
            f"{self.log_tail()}"
        )

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


@dataclass
class System:
    """The edits service and the gateway, wired to each other and to the given endpoints."""

    edits: ServiceProcess
    gateway: ServiceProcess
    env: dict[str, str]

    def start(self) -> None:
        self.edits.start()
        self.gateway.start()

    def stop(self) -> None:
        self.gateway.stop()
        self.edits.stop()


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
    edits_port, gateway_port = free_port(), gateway_port or free_port()
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap_servers,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "ASSENT_TOPIC_PREFIX": topic_prefix,
        "ASSENT_KAFKA_IDEMPOTENCE": "true" if kafka_idempotence else "false",
        "ASSENT_API_TOKENS": api_tokens,
        "ASSENT_EDITS_URL": f"http://127.0.0.1:{edits_port}",
        **(extra_env or {}),
    }
    return System(
        edits=ServiceProcess("edits", edits_port, env, log_dir / "edits.log"),
        gateway=ServiceProcess("gateway", gateway_port, env, log_dir / "gateway.log"),
        env=env,
    )
