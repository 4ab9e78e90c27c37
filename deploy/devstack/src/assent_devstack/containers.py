"""Assent's services as containers of their own images (``make images``), for ``make test-containers``.

A :class:`ServiceContainer` is a :class:`~assent_devstack.system.ServiceProcess` whose process is a container:
``start``, ``wait_ready``, ``kill``, ``stop`` and ``log_tail`` mean the same, so every test that starts, kills or
reads a service works on either. The container:

- runs ``assent-<service>:<tag>`` with the image's own entrypoint and only the environment it is given (never the
  caller's whole environment, unlike a process);
- shares the host's network, so the ports, the owner URLs of ``build_system`` and whatever a test serves on
  127.0.0.1 (an MCP server, an issuer, a collector) mean the same inside;
- has a read-only root filesystem, no capabilities and no privilege escalation, as the Kubernetes manifests ask;
  its /tmp is the host's /tmp (the deployer's repositories and a test's files are where the test looks), and it
  runs as the calling user, so that what it writes there is the caller's; the image's own user (10001) is checked
  by ``tests/containers``;
- runs under the engine's init, so that the service is not PID 1 (see ``launch``);
- has its output copied, as it comes, to the service's log file.

Docker is reached as ``DOCKER_HOST`` says (``deploy/containers/engine.sh`` prints it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assent_devstack.system import ServiceProcess

STOPPED = ("exited", "dead", "removing")


def docker_client() -> Any:
    """A client of the engine ``DOCKER_HOST`` names (``docker.from_env``)."""
    import docker

    return docker.from_env()


@dataclass
class ContainerProcess:
    """What :class:`ServiceProcess` needs of a ``subprocess.Popen``, answered by a running container."""

    container: Any
    returncode: int | None = None

    @property
    def pid(self) -> int:
        """The service's process as the host numbers it: the child of the container's init (0 once it has
        exited)."""
        self.container.reload()
        init = int(self.container.attrs["State"]["Pid"])
        try:
            children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
        except OSError:
            return init
        return int(children[0]) if children else init

    def poll(self) -> int | None:
        if self.returncode is None:
            self.container.reload()
            state = self.container.attrs["State"]
            if state["Status"] in STOPPED:
                self.returncode = _as_popen(int(state["ExitCode"]))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import requests

        if self.returncode is None:
            try:
                answer = self.container.wait(timeout=timeout)
            except requests.exceptions.ConnectionError as exc:  # the engine's read timed out
                raise subprocess.TimeoutExpired(f"container {self.container.name}", timeout or 0) from exc
            self.returncode = _as_popen(int(answer["StatusCode"]))
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            self.container.kill(signal=int(sig))

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


@dataclass
class ServiceContainer(ServiceProcess):
    """One service as a container of image ``assent-<module>:<tag>``; see the module."""

    tag: str = "0.1.0"
    containers: list[Any] = field(default_factory=list, repr=False)

    @property
    def image(self) -> str:
        return f"assent-{self.module}:{self.tag}"

    def launch(self, extra_env: dict[str, str] | None = None) -> None:
        """Start a new container of the image (the previous one, if any, is removed first), without waiting."""
        self.remove()
        env = {
            "HOME": "/tmp",  # the calling user has no home in the image; git and the like want one
            **self.env,
            "ASSENT_HTTP_HOST": "127.0.0.1",
            "ASSENT_HTTP_PORT": str(self.port),
            **(extra_env or {}),
        }
        container = docker_client().containers.run(
            self.image,
            detach=True,
            name=f"assent-{self.module}-{uuid.uuid4().hex[:8]}",
            environment=env,
            network_mode="host",
            user=f"{os.getuid()}:{os.getgid()}",
            read_only=True,
            volumes={"/tmp": {"bind": "/tmp", "mode": "rw"}},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            labels={"org.assent.test": "true"},
            # The engine's init (tini) is PID 1 and the service its child: the kernel ignores a SIGKILL that PID 1
            # sends itself, which the tests' crash points (ASSENT_CRASH_AT) do.
            init=True,
        )
        self.containers.append(container)
        self._launched, self.ready_seconds = time.monotonic(), None
        self.process = ContainerProcess(container)  # type: ignore[assignment]  # answers what is asked of a Popen
        threading.Thread(target=_copy_logs, args=(container, self.log_path), daemon=True).start()

    def stop(self) -> None:
        super().stop()
        self.remove()

    def remove(self) -> None:
        """Remove this service's containers that have exited (their output is in the log file already)."""
        import docker

        for container in list(self.containers):
            try:
                container.reload()
                if container.attrs["State"]["Status"] not in STOPPED:
                    continue
                container.wait(timeout=30)  # the exit is recorded before the log stream closes
                container.remove(v=True)
            except docker.errors.NotFound:
                pass
            self.containers.remove(container)


def _as_popen(status: int) -> int:
    """An exit status as ``Popen.returncode`` says it: a process killed by signal N is -N (the engine says 128+N,
    as a shell would)."""
    return -(status - 128) if 128 < status < 128 + 65 else status


def _copy_logs(container: Any, path: Path) -> None:
    """Append the container's output to ``path`` as it comes, until the container exits."""
    with path.open("ab") as log:
        for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
            log.write(chunk)
            log.flush()
