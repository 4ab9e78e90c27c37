"""A cluster of Apache Kafka brokers for local runs and the fault tests: `start_kafka_cluster(state_dir, 3)`.

Every node is a combined broker and controller (`process.roles=broker,controller`), so three JVMs make a
three-voter KRaft quorum and three brokers: the quorum survives one node lost, as the brokers' data does with
replication factor 3 and `min.insync.replicas` 2 (docs/how-to/run-a-kafka-cluster.md argues the choice). The
nodes share one cluster id and listen on 127.0.0.1 only, each on a client port and a controller port of its own;
each keeps its data under `<state_dir>/kafka-cluster/node-<id>`, so a node stopped (or killed) and started again
comes back with its log, as a real broker does. The jars, JVM flags and broker settings are the single node's
(`assent_devstack._kafka`), with the replication of the internal topics raised to the cluster's.

Plain listeners only: the SCRAM listener of the single node is not offered here.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from assent_devstack._kafka import (
    JVM_FLAGS,
    KAFKA_DEPLOY_DIR,
    _cluster_id,
    _java,
    _server_properties,
    ensure_kafka_libs,
)
from assent_devstack._service import DevstackError, Service, free_port, run_tied, spawn, wait_ready

CLUSTER_JVM_HEAP = ["-Xmx384m", "-Xms128m"]
"""Three JVMs on a small machine: each node's heap is smaller than the single node's (512 MiB), which is plenty
for the suite's few hundred partitions."""

# The raft state's transitions name the quorum's leader (the active controller) in every node's log: Kafka's own
# loggers are at WARN in deploy/kafka/log4j.properties, so this one logger is raised for the cluster's nodes.
_QUORUM_LOGGING = "log4j.logger.org.apache.kafka.raft.QuorumState=INFO\n"
_LEADER = re.compile(r"Completed transition to Leader\(localReplicaKey=ReplicaKey\(id=(\d+),.*?\), epoch=(\d+)")
_FOLLOWER = re.compile(r"Completed transition to FollowerState\(.*?epoch=(\d+), leader=(\d+)")


def replication_settings(brokers: int) -> dict[str, str]:
    """The replication a cluster of `brokers` gives every topic: up to three replicas, and `min.insync.replicas`
    one fewer than the replicas (2 of 3), so that a write acknowledged by all in-sync replicas survives the loss of
    any one broker, and writes go on while one is down."""
    replicas = min(brokers, 3)
    return {"replication_factor": str(replicas), "min_insync_replicas": str(max(1, replicas - 1))}


@dataclass
class KafkaNode:
    """One combined broker+controller of a `KafkaCluster`; `service` is None while it is stopped."""

    node_id: int
    port: int
    controller_port: int
    home: Path
    service: Service | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.service.pid if self.service is not None and self.service.alive() else None


@dataclass
class KafkaCluster:
    """The nodes of `start_kafka_cluster`, and what stops and starts them one by one (the fault tests' means)."""

    nodes: list[KafkaNode]
    detached: bool = False
    _base: list[str] = field(default_factory=list, repr=False)
    _timeout: float | None = None

    @property
    def bootstrap_servers(self) -> str:
        """Every node's client address, comma-separated (what clients are given)."""
        return ",".join(node.endpoint for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(node for node in self.nodes if node.node_id == node_id)

    def service(self) -> Service:
        """One handle on all the nodes, for the devstack's `Stack`: its endpoint is the bootstrap list, its pids
        every running node's, and `stop()` stops them all."""
        running = [node.service for node in self.nodes if node.service is not None]
        pids = tuple(pid for service in running for pid in service.pids)
        ticks = tuple(tick for service in running for tick in service.start_ticks)
        return Service(
            name="kafka",
            kind="kafka",
            endpoint=self.bootstrap_servers,
            pids=pids,
            start_ticks=ticks,
            logs=tuple(log for service in running for log in service.logs),
            startup_seconds=max((service.startup_seconds for service in running), default=0.0),
        )

    def start_node(self, node_id: int, *, wait: bool = True) -> KafkaNode:
        """Start node `node_id` on its ports and data (again); with `wait`, return once it answers a client."""
        node = self.node(node_id)
        if node.service is not None and node.service.alive():
            raise DevstackError(f"Kafka node {node_id} is running already (pid {node.service.pid})")
        started = time.monotonic()
        out = node.home / "kafka.out"
        proc = spawn(
            [
                *self._base,
                f"-Dkafka.logs.dir={node.home / 'logs'}",
                "kafka.Kafka",
                str(node.home / "server.properties"),
            ],
            out,
            cwd=node.home,
            detached=self.detached,
        )
        node.service = Service(
            name=f"kafka-{node_id}",
            kind="kafka",
            endpoint=node.endpoint,
            pids=(proc.pid,),
            logs=(node.home / "logs" / "server.log", out),
            _popen=proc,
        )
        if wait:
            wait_ready(node.service, self._timeout, started)
        return node

    def wait_node(self, node_id: int) -> None:
        """Wait until node `node_id`, started with `start_node(..., wait=False)`, answers a client."""
        service = self.node(node_id).service
        if service is None:
            raise DevstackError(f"Kafka node {node_id} is not started")
        wait_ready(service, self._timeout)

    def signal_node(self, node_id: int, sig: int) -> None:
        """Send `sig` to node `node_id`'s JVM (SIGKILL, SIGSTOP, SIGCONT...); after SIGKILL, wait until it is gone."""
        service = self.node(node_id).service
        if service is None or not service.alive():
            raise DevstackError(f"Kafka node {node_id} is not running")
        os.kill(service.pid, sig)
        if sig == signal.SIGKILL:
            deadline = time.monotonic() + 30
            while service.alive():
                if time.monotonic() > deadline:
                    raise DevstackError(f"Kafka node {node_id} survived SIGKILL")
                time.sleep(0.05)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Stop node `node_id` gracefully (SIGTERM: a controlled shutdown that moves its leaderships away first)."""
        node = self.node(node_id)
        if node.service is not None:
            node.service.stop(timeout)

    def active_controller(self) -> int | None:
        """The node id of the KRaft quorum's leader (the active controller) of the newest epoch any node's log
        names, or None before one is elected."""
        newest: tuple[int, int] | None = None
        for node in self.nodes:
            for epoch, leader in _quorum_transitions(node.home / "logs" / "server.log"):
                if newest is None or epoch > newest[0]:
                    newest = (epoch, leader)
        return None if newest is None else newest[1]

    def stop(self) -> None:
        """Stop every node (all asked at once, then killed after 10 s); safe to call twice.

        One after another, each node's controlled shutdown would wait for the quorum that the ones before took away.
        """
        running = [node.service for node in self.nodes if node.service is not None and node.service.alive()]
        for service in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(service.pid, service.stop_signal)
        errors = []
        for node in self.nodes:
            try:
                self.stop_node(node.node_id, timeout=10.0)
            except DevstackError as e:
                errors.append(str(e))
        if errors:
            raise DevstackError("; ".join(errors))

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _quorum_transitions(log: Path) -> Iterator[tuple[int, int]]:
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return
    for line in text.splitlines():
        if "Completed transition to" not in line:
            continue
        if match := _LEADER.search(line):
            yield int(match.group(2)), int(match.group(1))
        elif match := _FOLLOWER.search(line):
            yield int(match.group(1)), int(match.group(2))


def start_kafka_cluster(
    state_dir: Path, brokers: int = 3, timeout: float | None = None, *, detached: bool = False
) -> KafkaCluster:
    """Start `brokers` combined KRaft nodes on 127.0.0.1 and wait until every one answers a metadata request.

    Tied to the calling process like the single node (`spawn`), unless `detached`. Raises DevstackError, with the
    log tails, when a node fails to start; the others are stopped then.
    """
    if brokers < 1:
        raise ValueError(f"a cluster needs at least one broker, not {brokers}")
    state_dir = Path(state_dir).resolve()
    java = _java()
    log4j = KAFKA_DEPLOY_DIR / "log4j.properties"
    if not log4j.is_file():
        raise DevstackError(f"{log4j} is missing; assent_devstack must run from the source tree")
    libs = ensure_kafka_libs()
    root = state_dir / "kafka-cluster"
    # Every start is a fresh cluster: its ports (and with them the voters) are chosen anew.
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    cluster_log4j = root / "log4j.properties"
    cluster_log4j.write_text(log4j.read_text() + _QUORUM_LOGGING)
    taken: list[int] = []
    for _ in range(brokers * 2):
        taken.append(free_port(exclude=tuple(taken)))
    nodes = [KafkaNode(i + 1, taken[2 * i], taken[2 * i + 1], root / f"node-{i + 1}") for i in range(brokers)]
    voters = ",".join(f"{node.node_id}@127.0.0.1:{node.controller_port}" for node in nodes)
    replication = replication_settings(brokers)
    replicas, min_isr = replication["replication_factor"], replication["min_insync_replicas"]
    base = [java, *JVM_FLAGS, *CLUSTER_JVM_HEAP, f"-Dlog4j.configuration=file:{cluster_log4j}", "-cp", f"{libs}/*"]
    cluster_id = _cluster_id()
    for node in nodes:
        data = node.home / "data"
        data.mkdir(parents=True, exist_ok=True)
        overrides = {
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "default.replication.factor": replicas,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            # A replica that was not in sync never becomes leader: what it lacks would be lost.
            "unclean.leader.election.enable": "false",
        }
        config = node.home / "server.properties"
        config.write_text(_server_properties(node.port, node.controller_port, data, overrides))
        fmt = run_tied(
            [*base, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if fmt.returncode != 0:
            raise DevstackError(f"formatting Kafka storage in {data} failed:\n{fmt.stdout}{fmt.stderr}")
    cluster = KafkaCluster(nodes, detached=detached, _base=base, _timeout=timeout)
    try:
        # All at once: no node answers a client before a majority of the voters has elected a leader.
        for node in nodes:
            cluster.start_node(node.node_id, wait=False)
        for node in nodes:
            cluster.wait_node(node.node_id)
    except BaseException:
        for node in nodes:
            if node.service is not None and node.service.alive():
                node.service.stop(timeout=5.0)
        raise
    return cluster
