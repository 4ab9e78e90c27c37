"""Command line: `python -m assent_devstack up|down|status [--state-dir DIR] [--kafka kafka|tansu] [--kafka-brokers N]`.

up      Start Kafka, PostgreSQL and Redis detached (they outlive this command), reusing any that are
        already up and healthy. Writes DIR/env (KEY=value lines, shell-sourceable) and DIR/pids.json,
        and prints the env lines on stdout (progress goes to stderr). `--kafka-brokers 3` (default: the
        KAFKA_BROKERS environment variable, else 1) starts a cluster of three Apache Kafka nodes, fresh at each
        start, and the env then has the services create their topics replicated.
down    Stop what `up` started and remove DIR/env and DIR/pids.json. Data (PostgreSQL, Kafka) is kept.
status  Print each server's health; exit 0 only when all three answer.

Every command exits non-zero with a message on stderr when it fails.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from assent_devstack._kafka import KafkaEngine
from assent_devstack._postgres import running_postgres
from assent_devstack._service import DevstackError, Service
from assent_devstack._stack import (
    SERVICE_NAMES,
    Stack,
    read_record_brokers,
    remove_record,
    start_services,
    write_record,
)

DEFAULT_STATE_DIR = Path(".devstack")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = argparse.ArgumentParser(
        prog="assent-devstack", description="Local Kafka, PostgreSQL and Redis for Assent."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("up", "start all servers (or reuse healthy ones) and write DIR/env"),
        ("down", "stop the servers started by up"),
        ("status", "report whether each server answers"),
    ):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument(
            "--state-dir",
            type=Path,
            default=DEFAULT_STATE_DIR,
            metavar="DIR",
            help=f"where data, logs, env and pids.json live (default: {DEFAULT_STATE_DIR})",
        )
        if name == "up":
            command.add_argument(
                "--kafka",
                choices=("kafka", "tansu"),
                default="kafka",
                help="Apache Kafka on Java (default) or the Tansu broker (no Java, no idempotent producer)",
            )
            command.add_argument(
                "--kafka-brokers",
                type=int,
                default=int(os.environ.get("KAFKA_BROKERS") or 1),
                metavar="N",
                help="Apache Kafka brokers to start (default: $KAFKA_BROKERS, else 1); 3 is a replicated cluster",
            )
    args = parser.parse_args(argv)
    state_dir: Path = args.state_dir.resolve()
    try:
        if args.command == "up":
            if args.kafka_brokers < 1:
                parser.error("--kafka-brokers needs at least 1")
            return _up(state_dir, args.kafka, args.kafka_brokers)
        if args.command == "down":
            return _down(state_dir)
        return _status(state_dir)
    except DevstackError as e:
        print(f"assent-devstack {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"assent-devstack {args.command}: interrupted", file=sys.stderr)
        return 130


def _up(state_dir: Path, engine: KafkaEngine, brokers: int = 1) -> int:
    recorded_engine, recorded_brokers, recorded = _known_services(state_dir)
    keep: dict[str, Service] = {}
    for name, service in recorded.items():
        if name == "kafka" and (recorded_engine != engine or recorded_brokers != brokers):
            service.stop()
        elif service.healthy():
            keep[name] = service
        elif service.alive():
            service.stop()
    missing = tuple(name for name in SERVICE_NAMES if name not in keep)
    started = start_services(state_dir, engine, missing, detached=True, kafka_brokers=brokers) if missing else {}
    running = {**keep, **started}
    stack = Stack(running["kafka"], running["postgres"], running["redis"], engine, brokers)
    write_record(state_dir, stack)
    for name, service in stack.services().items():
        how = f"started in {service.startup_seconds:.1f}s" if name in started else "already up"
        label = f"{name} ({engine}{f' x{brokers}' if brokers > 1 else ''})" if name == "kafka" else name
        print(f"{label:16} {service.endpoint:60} pid {service.pid:<8} {how}", file=sys.stderr)
    print(f"env written to {state_dir / 'env'}", file=sys.stderr)
    for key, value in stack.env().items():
        print(f"{key}={value}")
    return 0


def _down(state_dir: Path) -> int:
    _, _, services = _known_services(state_dir)
    running = {name: s for name, s in services.items() if s.alive()}
    for name, service in running.items():
        service.stop()
        print(f"stopped {name} (pid {service.pid})", file=sys.stderr)
    if not running:
        print(f"nothing running for {state_dir}", file=sys.stderr)
    remove_record(state_dir)
    return 0


def _status(state_dir: Path) -> int:
    engine, _, services = _known_services(state_dir)
    if not services:
        print(f"not up: no servers recorded in {state_dir}")
        return 1
    all_healthy = True
    for name in SERVICE_NAMES:
        service = services.get(name)
        if service is None:
            print(f"{name:16} not started")
            all_healthy = False
            continue
        healthy = service.healthy()
        all_healthy &= healthy
        state = "healthy" if healthy else ("NOT ANSWERING" if service.alive() else "NOT RUNNING")
        label = f"{name} ({engine})" if name == "kafka" else name
        rss = f"rss {service.rss_bytes() / 2**20:.0f} MiB" if service.alive() else ""
        print(f"{label:16} {state:14} {service.endpoint:60} pid {service.pid:<8} {rss}")
    return 0 if all_healthy else 1


def _known_services(state_dir: Path) -> tuple[str | None, int, dict[str, Service]]:
    """The services in pids.json, with PostgreSQL taken from its own pid file, which is the truth even
    when an interrupted run never wrote pids.json."""
    engine, brokers, services = read_record_brokers(state_dir)
    if postgres := running_postgres(state_dir):
        services["postgres"] = postgres
    return engine, brokers, services


if __name__ == "__main__":
    sys.exit(main())
