"""Run Assent's services as separate processes against given Kafka, PostgreSQL and Redis endpoints.

Used by ``make run`` and by the integration tests: each service is its own OS process (``python -m edits``,
``python -m gateway``), configured only through its environment, exactly as in a deployment.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from assent_devstack._progress import StartWatch
from assent_devstack._service import free_port as free_port  # the services' ports come from the same place


@dataclass
class ServiceProcess:
    """One service process. ``start`` waits until its ``/readyz`` answers (migrated, database and broker up)."""

    module: str
    port: int
    env: dict[str, str]
    log_path: Path
    python: str = sys.executable
    """The interpreter that runs it: this one, or another checkout's environment's."""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    ready_seconds: float | None = field(default=None, init=False)
    """Seconds from launch to ready, once :meth:`wait_ready` (or :meth:`ready_now`) has seen it ready."""
    _launched: float = field(default=0.0, init=False, repr=False)
    _last_answer: str = field(default="no answer", init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, extra_env: dict[str, str] | None = None, timeout: float | None = None) -> None:
        """Start the process and wait until it is ready (:meth:`launch`, then :meth:`wait_ready`)."""
        self.launch(extra_env)
        self.wait_ready(timeout)

    def launch(self, extra_env: dict[str, str] | None = None) -> None:
        """Start the process, without waiting for it.

        The process runs in a session of its own (the terminal's Ctrl-C reaches only the caller, which stops it)
        and is sent SIGTERM when the calling process ends, however it ends (``start_tied``).
        """
        from assent_devstack._service import start_tied

        env = {**os.environ, **self.env, "ASSENT_HTTP_PORT": str(self.port), **(extra_env or {})}
        self.ready_seconds = None
        with self.log_path.open("ab") as log:  # the child has its own copy
            self.process = start_tied(
                [self.python, "-m", self.module],
                death_signal=signal.SIGTERM,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._launched = time.monotonic()

    def watch(self, timeout: float | None = None) -> StartWatch:
        """A watch of the launched process's start (:class:`~assent_devstack._progress.StartWatch`): its log and
        its CPU; ``timeout`` overrides ``ASSENT_START_TIMEOUT_SECONDS``."""
        assert self.process is not None, "launch() first"
        process = self.process
        return StartWatch(self.module, lambda: (process.pid,), (self.log_path,), timeout=timeout)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the launched process is ready (:meth:`ready_now`) for as long as it makes progress
        (:class:`~assent_devstack._progress.StartWatch`; ``timeout`` overrides the bound of
        ``ASSENT_START_TIMEOUT_SECONDS``). Raises RuntimeError with the log tail when the process exits, TimeoutError
        (after stopping it) when it stops making progress or reaches the bound.
        """
        watch = self.watch(timeout)
        while not self.ready_now(watch):
            time.sleep(0.1)

    def ready_now(self, watch: StartWatch) -> bool:
        """One look at a starting process: True once ``/readyz`` answers 200 naming this service, the process is
        still running after that answer, and (where /proc tells) it is the one listening on the port, so that
        another process on the port is never taken for it; False while it may still get there. Sets
        :attr:`ready_seconds`. Raises as :meth:`wait_ready` does.
        """
        from assent_devstack._service import listens_on

        assert self.process is not None, "launch() first"
        try:
            response: httpx.Response | None = httpx.get(f"{self.url}/readyz", timeout=1.0)
        except httpx.HTTPError as e:
            response, self._last_answer = None, f"no answer ({type(e).__name__})"
        # Checked after the request: once ours has exited, whatever answers on the port is not ours.
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.module} exited with {self.process.returncode}:\n{self.log_tail()}")
        if response is not None:
            try:
                body = response.json()
            except ValueError:
                body = None
            service = body.get("service") if isinstance(body, dict) else None
            self._last_answer = f"HTTP {response.status_code} {response.text[:200]!r}"
            if service != self.module:
                self._last_answer = f"{self._last_answer}, which is not {self.module!r}'s answer"
            elif response.status_code == 200 and listens_on(self.process.pid, self.port) is not False:
                self.ready_seconds = round(time.monotonic() - self._launched, 2)
                return True
        if (why := watch.verdict()) is not None:
            self.stop()
            raise TimeoutError(f"{why} (last answer on port {self.port}: {self._last_answer}):\n{self.log_tail()}")
        return False

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
            return processes[name]  # type: ignore[no-any-return]  # a dict of ServiceProcess read through __dict__
        raise AttributeError(name)

    def start(self, timeout: float | None = None) -> None:
        """Start every service and wait until all are ready, each for as long as it makes progress (see
        :meth:`ServiceProcess.wait_ready`); when one fails (or the start is interrupted), stop every one started,
        then raise. Each one's :attr:`~ServiceProcess.ready_seconds` says how long it took."""
        try:
            # All at once: each migrates its own schema and joins its own consumer group, and none needs another
            # to start; waiting for each in turn would add up their start-up times.
            for process in self.processes.values():
                process.launch()
            watches = {name: process.watch(timeout) for name, process in self.processes.items()}
            while watches:
                for name in list(watches):
                    if self.processes[name].ready_now(watches[name]):
                        del watches[name]
                if watches:
                    time.sleep(0.1)
        except BaseException:
            self.stop()
            raise

    def ready_seconds(self) -> dict[str, float | None]:
        """Each service's time from launch to ready, in start order (None for one not seen ready)."""
        return {name: process.ready_seconds for name, process in self.processes.items()}

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
    api_tokens: str = '{"dev-token": {"user": "operator", "org": "acme", "roles": ["admin"]}}',
    kafka_idempotence: bool = True,
    extra_env: dict[str, str] | None = None,
    gateway_port: int | None = None,
    image_tag: str | None = None,
    services: list[ServiceSpec] | None = None,
    python: str = sys.executable,
) -> System:
    """The system, with a fresh random service key (``ASSENT_SERVICE_KEY``) that its services share, a fresh key
    for logins' credentials (``ASSENT_CREDENTIALS_KEY``, a Fernet key) and a fresh key that signs the history's
    checkpoints (``ASSENT_HISTORY_SIGNING_KEY``, an Ed25519 seed in base64); an ``extra_env`` entry of the same name
    overrides any of them (an empty ``ASSENT_HISTORY_SIGNING_KEY``: no checkpoints).

    Each service is a process of this environment, or, with ``image_tag`` (by default ``ASSENT_SERVICE_IMAGES``,
    which ``make test-containers`` sets), a container of its image ``assent-<service>:<image_tag>``
    (:class:`~assent_devstack.containers.ServiceContainer`).

    ``services`` (by default this checkout's :func:`service_list`) and ``python`` (by default this interpreter) run
    another checkout's services from its own environment: ``make bench-compare`` runs a git ref's beside these."""
    log_dir.mkdir(parents=True, exist_ok=True)
    services = service_list() if services is None else services
    # Each port is free when chosen, but none is bound until its service starts: a port chosen for one service must
    # not be chosen again for another (two services on one port: the second fails to bind and exits).
    ports: dict[str, int] = {}
    for spec in services:
        ports[spec.name] = gateway_port if spec.public and gateway_port else free_port(exclude=tuple(ports.values()))
    owner_urls = {spec.name: f"http://127.0.0.1:{ports[spec.name]}" for spec in services if not spec.public}
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap_servers,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "ASSENT_TOPIC_PREFIX": topic_prefix,
        "ASSENT_KAFKA_IDEMPOTENCE": "true" if kafka_idempotence else "false",
        "ASSENT_API_TOKENS": api_tokens,
        "ASSENT_OWNER_URLS": json.dumps(owner_urls),
        "ASSENT_SERVICE_KEY": secrets.token_urlsafe(48),
        "ASSENT_CREDENTIALS_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "ASSENT_HISTORY_SIGNING_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        **(extra_env or {}),
    }
    image_tag = image_tag or os.environ.get("ASSENT_SERVICE_IMAGES") or None
    if image_tag:
        from assent_devstack.containers import ServiceContainer

        return System(
            processes={
                spec.name: ServiceContainer(
                    spec.name, ports[spec.name], env, log_dir / f"{spec.name}.log", tag=image_tag
                )
                for spec in services
            },
            env=env,
        )
    return System(
        processes={
            spec.name: ServiceProcess(spec.name, ports[spec.name], env, log_dir / f"{spec.name}.log", python=python)
            for spec in services
        },
        env=env,
    )
