"""A real Kubernetes control plane on this machine, for the tests: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (which plays the kubelet: it runs fake nodes and brings their pods to Running and a Job's
pods to Succeeded, so rollouts, hooks and Jobs complete as on a cluster).

The binaries come from ``deploy/tools/kube/build.sh`` (built once per machine into
``~/.cache/assent/tools/kube-<version>/bin``). :func:`start` runs them with their state in a directory of the
caller's, each process tied to the caller (it ends with it, however it ends), and writes a kubeconfig for an
administrator's token; :meth:`ControlPlane.stop` ends them.

    python -m assent_devstack.kube STATE_DIR   # start one and print its kubeconfig's path; Ctrl-C stops it
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ._service import free_port, start_tied

VERSION = os.environ.get("KUBE_VERSION", "1.32.4")
FAKE_NODE = "kwok-node-0"


def binaries(version: str = VERSION) -> Path:
    """Where ``deploy/tools/kube/build.sh`` puts the control plane's binaries (``ASSENT_TOOLS`` moves the cache)."""
    tools = Path(os.environ.get("ASSENT_TOOLS", Path.home() / ".cache" / "assent" / "tools"))
    return tools / f"kube-{version}" / "bin"


def available(version: str = VERSION) -> bool:
    names = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
    return all((binaries(version) / name).is_file() for name in names)


@dataclass
class ControlPlane:
    """A running control plane: ``kubeconfig`` reaches it as an administrator (group ``system:masters``)."""

    state: Path
    kubeconfig: Path
    server: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def stop(self) -> None:
        """End every process, newest first (kwok and the controllers before the API server, etcd last)."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.processes.clear()


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _wait_ready(server: str, token: str, plane: ControlPlane, timeout: float = 90.0) -> None:
    context = ssl.create_default_context(cafile=str(plane.state / "apiserver.crt"))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in plane.processes:
            if process.poll() is not None:
                raise RuntimeError(f"process {process.pid} exited with {process.returncode}: see {plane.state}/*.log")
        request = urllib.request.Request(f"{server}/readyz", headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the API server was not ready within {timeout:.0f} s: see {plane.state}/kube-apiserver.log")


def start(state: Path, version: str = VERSION) -> ControlPlane:
    """Start etcd, the API server, the controller manager, the scheduler and kwok with one fake node; return once
    the API server is ready (the node and the namespace's service accounts follow within seconds)."""
    bin_dir = binaries(version)
    state.mkdir(parents=True, exist_ok=True)
    token = os.urandom(16).hex()
    (state / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
    key = state / "service-accounts.key"
    if not key.exists():
        _openssl("genrsa", "-out", str(key), "2048")
        _openssl("rsa", "-in", str(key), "-pubout", "-out", str(state / "service-accounts.pub"))
    serving, serving_key = state / "apiserver.crt", state / "apiserver.key"
    if not serving.exists():  # the API server's certificate, its own authority: clients verify it against itself
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "7", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout", str(serving_key), "-out", str(serving),
        )  # fmt: skip
    etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
    server = f"https://127.0.0.1:{api_port}"
    kubeconfig = state / "kubeconfig"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
  - name: assent-test
    cluster:
      server: {server}
      certificate-authority: {serving}
users:
  - name: admin
    user:
      token: {token}
contexts:
  - name: assent-test
    context:
      cluster: assent-test
      user: admin
current-context: assent-test
"""
    )
    plane = ControlPlane(state=state, kubeconfig=kubeconfig, server=server)

    def run(name: str, *args: str) -> None:
        with (state / f"{name}.log").open("ab") as log:
            plane.processes.append(
                start_tied([str(bin_dir / name), *args], death_signal=signal.SIGTERM, stdout=log, stderr=log)
            )

    try:
        run(
            "etcd",
            f"--data-dir={state / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync",  # a test cluster: no durability needed, and fsync is slow on a busy disk
        )
        run(
            "kube-apiserver",
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--tls-cert-file={serving}",
            f"--tls-private-key-file={serving_key}",
            f"--token-auth-file={state / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-key-file={state / 'service-accounts.pub'}",
            f"--service-account-signing-key-file={key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--enable-admission-plugins=PodSecurity",
        )
        _wait_ready(server, token, plane)
        common = [f"--kubeconfig={kubeconfig}", "--leader-elect=false", "--bind-address=127.0.0.1"]
        run(
            "kube-controller-manager",
            *common,
            f"--secure-port={free_port()}",
            f"--service-account-private-key-file={key}",
            "--use-service-account-credentials=false",
            "--controllers=*,-nodeipam,-route,-service,-cloud-node-lifecycle",
        )
        run("kube-scheduler", *common, f"--secure-port={free_port()}")
        run(
            "kwok",
            f"--kubeconfig={kubeconfig}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.0.0.1/24",
            "--node-ip=10.0.0.1",
            f"--node-port={free_port()}",
            f"--server-address=127.0.0.1:{free_port()}",
        )
        _fake_node(kubeconfig)
    except BaseException:
        plane.stop()
        raise
    return plane


def _fake_node(kubeconfig: Path) -> None:
    """One node kwok answers for: Ready, with room for every pod of the tests."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
    api.create_node(
        client.V1Node(
            metadata=client.V1ObjectMeta(
                name=FAKE_NODE,
                annotations={"kwok.x-k8s.io/node": "fake"},
                labels={"kubernetes.io/hostname": FAKE_NODE, "type": "kwok"},
            ),
            status=client.V1NodeStatus(
                allocatable={"cpu": "64", "memory": "256Gi", "pods": "250", "ephemeral-storage": "1Ti"},
                capacity={"cpu": "64", "memory": "256Gi", "pods": "250", "ephemeral-storage": "1Ti"},
            ),
        )
    )


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    stopping = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stopping)  # taken by sigwait below, not as an exception mid-start
    plane = start(Path(sys.argv[1]).resolve())
    print(plane.kubeconfig, flush=True)
    try:
        signal.sigwait(stopping)
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
