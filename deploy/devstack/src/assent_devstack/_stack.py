"""All three servers together, and the on-disk record the CLI keeps of them."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assent_devstack._kafka import KafkaEngine, start_kafka
from assent_devstack._kafka_cluster import replication_settings, start_kafka_cluster
from assent_devstack._postgres import start_postgres
from assent_devstack._redis import start_redis
from assent_devstack._service import DevstackError, Service

SERVICE_NAMES = ("kafka", "postgres", "redis")
PIDS_FILE = "pids.json"
ENV_FILE = "env"


@dataclass
class Stack:
    """Kafka, PostgreSQL and Redis started by `start_all`. `stop()` stops all three and is idempotent."""

    kafka: Service
    postgres: Service
    redis: Service
    kafka_engine: KafkaEngine
    kafka_brokers: int = 1
    """How many Kafka brokers `kafka` is: 1, or a cluster's (`kafka.endpoint` then lists them all)."""

    def services(self) -> dict[str, Service]:
        """The three services by role name: kafka, postgres, redis."""
        return {"kafka": self.kafka, "postgres": self.postgres, "redis": self.redis}

    def env(self) -> dict[str, str]:
        """Settings for Assent services (see assent.settings), as environment variables.

        KAFKA_IDEMPOTENCE is "false" on the tansu engine, which cannot serve idempotent producers. On a cluster,
        the services create their topics replicated (`topic_env`).
        """
        return {
            "KAFKA_BOOTSTRAP_SERVERS": self.kafka.endpoint,
            "KAFKA_IDEMPOTENCE": "true" if self.kafka_engine == "kafka" else "false",
            "DATABASE_URL": self.postgres.endpoint,
            "REDIS_URL": self.redis.endpoint,
            **topic_env(self.kafka_brokers),
        }

    def stop(self) -> None:
        """Stop every service (each gracefully, then killed), even if one of them fails to stop."""
        errors = []
        for service in self.services().values():
            try:
                service.stop()
            except DevstackError as e:
                errors.append(str(e))
        if errors:
            raise DevstackError("; ".join(errors))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able record for pids.json."""
        return {
            "kafka_engine": self.kafka_engine,
            "kafka_brokers": self.kafka_brokers,
            **{k: s.to_dict() for k, s in self.services().items()},
        }

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def topic_env(kafka_brokers: int) -> dict[str, str]:
    """What makes the services create their topics replicated on a cluster of `kafka_brokers` (nothing for one
    broker: one replica and the broker's `min.insync.replicas`, as before)."""
    if kafka_brokers <= 1:
        return {}
    replication = replication_settings(kafka_brokers)
    return {
        "ASSENT_TOPIC_REPLICATION_FACTOR": replication["replication_factor"],
        "ASSENT_TOPIC_MIN_INSYNC_REPLICAS": replication["min_insync_replicas"],
    }


def start_all(
    state_dir: Path, kafka_engine: KafkaEngine = "kafka", *, detached: bool = False, kafka_brokers: int = 1
) -> Stack:
    """Start Kafka, PostgreSQL and Redis side by side under `state_dir`, each on a free loopback port.

    `kafka_brokers` above 1 starts that many Apache Kafka nodes (`assent_devstack._kafka_cluster`) in place of the
    single one.

    Returns once all three answer clients. If any fails, the others are stopped and DevstackError
    names every failure. The servers end with the calling process, however it ends, unless `detached`
    (then they run until `Stack.stop()`).
    """
    started = start_services(state_dir, kafka_engine, SERVICE_NAMES, detached=detached, kafka_brokers=kafka_brokers)
    return Stack(started["kafka"], started["postgres"], started["redis"], kafka_engine, kafka_brokers)


def start_services(
    state_dir: Path,
    kafka_engine: KafkaEngine,
    names: tuple[str, ...],
    *,
    detached: bool = False,
    kafka_brokers: int = 1,
) -> dict[str, Service]:
    """Start the named services concurrently; all or nothing (see `start_all`)."""
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    if kafka_brokers > 1 and kafka_engine != "kafka":
        raise DevstackError("a cluster of several brokers needs the 'kafka' engine")

    def kafka() -> Service:
        if kafka_brokers > 1:
            return start_kafka_cluster(state_dir, kafka_brokers, detached=detached).service()
        return start_kafka(state_dir, engine=kafka_engine, detached=detached)

    starters: dict[str, Callable[[], Service]] = {
        "kafka": kafka,
        "postgres": lambda: start_postgres(state_dir, detached=detached),
        "redis": lambda: start_redis(state_dir, detached=detached),
    }
    # The starts mostly wait on child processes, so threads overlap them well (the JVM dominates).
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures: dict[str, Future[Service]] = {name: pool.submit(starters[name]) for name in names}
        errors: list[str] = []
        done: dict[str, Service] = {}
        for name, future in futures.items():
            try:
                done[name] = future.result()
            except DevstackError as e:
                errors.append(f"{name}: {e}")
            except BaseException:
                # Interrupted: let the other starts finish so that nothing is left running.
                for other in futures.values():
                    if other.exception() is None:  # waits for that start to end
                        other.result().stop()
                raise
    if errors:
        for service in done.values():
            service.stop()
        raise DevstackError("\n\n".join(errors))
    return done


def read_record(state_dir: Path) -> tuple[KafkaEngine | None, dict[str, Service]]:
    """The Kafka engine and services recorded in `<state_dir>/pids.json` ((None, {}) when absent)."""
    engine, _, services = read_record_brokers(state_dir)
    return engine, services


def read_record_brokers(state_dir: Path) -> tuple[KafkaEngine | None, int, dict[str, Service]]:
    """`read_record`, with the number of Kafka brokers recorded (1 when absent)."""
    path = Path(state_dir) / PIDS_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None, 1, {}
    except (json.JSONDecodeError, OSError) as e:
        raise DevstackError(f"cannot read {path}: {e}") from e
    services = {name: Service.from_dict(data[name]) for name in SERVICE_NAMES if name in data}
    return data.get("kafka_engine"), int(data.get("kafka_brokers", 1)), services


def write_record(state_dir: Path, stack: Stack) -> None:
    """Write `<state_dir>/pids.json` and the shell-sourceable `<state_dir>/env`, each atomically."""
    state_dir = Path(state_dir)
    _write_atomic(state_dir / PIDS_FILE, json.dumps(stack.to_dict(), indent=2) + "\n")
    _write_atomic(state_dir / ENV_FILE, "".join(f"{k}={shlex.quote(v)}\n" for k, v in stack.env().items()))


def remove_record(state_dir: Path) -> None:
    """Delete pids.json and env from `state_dir`, if present."""
    for name in (PIDS_FILE, ENV_FILE):
        (Path(state_dir) / name).unlink(missing_ok=True)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
