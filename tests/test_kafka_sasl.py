"""Kafka with SASL: the services and the coach against a SASL_PLAINTEXT listener that takes SCRAM-SHA-512 only.

A private Apache Kafka (the devstack's, from Maven Central jars) is started with SCRAM users; PostgreSQL and
Redis come from the shared ``endpoints``. The services get the credentials from the same variables the
coach reads (``KAFKA_SECURITY_PROTOCOL``, ``KAFKA_SASL_MECHANISM``, ``KAFKA_SASL_USERNAME``,
``KAFKA_SASL_PASSWORD``). A memory round runs end to end; a wrong password fails at once, with a message
that names authentication and not the password; no password reaches a log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assent.coach import CoachClient
from assent.kafka_security import KafkaAuthenticationError, KafkaSecurity
from assent_devstack import Service
from assent_devstack.system import build_system
from tests.conftest import API_TOKENS, OPERATOR, Endpoints, create_database, new_world, running_stack
from tests.test_memory_edits import memory, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration

SERVICE_PASSWORD = "svc-Pw-7f3a9c41"
COACH_PASSWORD = "coach-Pw-2b8e6d05"
WRONG_PASSWORD = "wrong-Pw-9d1c4e77"
PASSWORDS = (SERVICE_PASSWORD, COACH_PASSWORD, WRONG_PASSWORD)


def sasl_env(username: str, password: str) -> dict[str, str]:
    return {
        "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KAFKA_SASL_USERNAME": username,
        "KAFKA_SASL_PASSWORD": password,
    }


def _missing_kafka_tools() -> str | None:
    from assent_devstack._kafka import KAFKA_VERSION, default_kafka_libs

    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and (Path(java_home) / "bin" / "java").is_file()) and shutil.which("java") is None:
        return "Java is not installed (the local Apache Kafka needs Java 17+)"
    if not (default_kafka_libs() / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file() and shutil.which("mvn") is None:
        return "the Kafka jars are not cached and Maven (mvn) is not installed to fetch them"
    return None


@pytest.fixture(scope="module")
def sasl_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A private Apache Kafka whose only client listener is SASL_PLAINTEXT with SCRAM-SHA-512."""
    missing = _missing_kafka_tools()
    if missing is not None:
        print(f"skipping the SASL tests: {missing}")
        pytest.skip(missing)
    from assent_devstack import start_kafka

    kafka = start_kafka(
        tmp_path_factory.mktemp("sasl-kafka"),
        engine="kafka",
        scram_users={"assent": SERVICE_PASSWORD, "coach": COACH_PASSWORD},
    )
    try:
        yield kafka
    finally:
        kafka.stop()


def assert_no_password(text: str, where: str) -> None:
    for password in PASSWORDS:
        assert password not in text, f"a password appears in {where}"


async def test_memory_round_over_sasl_scram(
    sasl_kafka: Service, endpoints: Endpoints, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    private = Endpoints(sasl_kafka.endpoint, endpoints.database_url, endpoints.redis_url)
    log_dir = tmp_path / "logs"
    # The coach reads the very variables the services get.
    coach_security = KafkaSecurity.from_env(sasl_env("coach", COACH_PASSWORD))
    assert coach_security.protocol == "SASL_PLAINTEXT" and coach_security.sasl_username == "coach"
    assert_no_password(repr(coach_security), "the settings' repr")

    async with running_stack(private, log_dir, extra_env=sasl_env("assent", SERVICE_PASSWORD)) as stack:
        async with (
            stack.http() as http,
            CoachClient(private.kafka, topic_prefix=stack.prefix, security=coach_security) as coach,
        ):
            world = await new_world(http, memory="Prefer short answers.\n")
            turn = await open_turn(coach, world)
            read = await turn.call("studio_read_memory", {"agent_id": world.agent_id})
            assert read.ok and read.output is not None, read.error
            assert read.output["content"] == "Prefer short answers.\n"
            base_version = read.output["version"]

            new_text = "Prefer short answers.\nAlways cite the order number.\n"
            result = await propose(turn, world.agent_id, new_text, base_version, "refund mixups")
            assert result.ok, result.error
            await turn.end_step()
            seq = turn.calls[result.tool_call_id].seq
            await wait_pending(http, turn.session.session_id, 1)

            decided = await http.post(
                f"/api/studio/sessions/{turn.session.session_id}/edits/{seq}", json={"decision": "apply"}
            )
            assert decided.status_code == 200, decided.text
            assert decided.json()["outcome"] == "applied" and decided.json()["resolved_by"] == OPERATOR
            live = await memory(http, world.agent_id)
            assert live["content"] == new_text and live["version"] == base_version + 1

            continuation = await turn.continuation()
            assert [(d.seq, d.outcome) for d in continuation.decisions] == [(seq, "applied")]

        # A coach with a wrong password is refused at once, and says so without the password.
        wrong = KafkaSecurity.from_env(sasl_env("coach", WRONG_PASSWORD))
        started = time.monotonic()
        with pytest.raises(KafkaAuthenticationError) as refused:
            await CoachClient(private.kafka, topic_prefix=stack.prefix, security=wrong).start()
        assert time.monotonic() - started < 10, "the refusal took too long"
        message = str(refused.value)
        assert "authentication failed" in message.lower(), message
        assert "'coach'" in message and "SCRAM-SHA-512" in message, message
        assert_no_password(message, "the coach's error")
        assert_no_password(repr(refused.value.__cause__), "the coach's error's cause")

    for log in log_dir.glob("*.log"):
        assert_no_password(log.read_text(errors="replace"), f"the service log {log.name}")
    assert_no_password("\n".join(r.getMessage() for r in caplog.records), "the test process's log")


async def test_service_with_a_wrong_password_does_not_become_ready(
    sasl_kafka: Service, endpoints: Endpoints, tmp_path: Path
) -> None:
    database_url = await create_database(endpoints.database_url, f"assent_sasl_{os.getpid()}_{time.time_ns()}")
    system = build_system(
        kafka_bootstrap_servers=sasl_kafka.endpoint,
        database_url=database_url,
        redis_url=endpoints.redis_url,
        log_dir=tmp_path / "logs",
        topic_prefix=f"w{time.time_ns()}.",
        api_tokens=API_TOKENS,
        extra_env=sasl_env("assent", WRONG_PASSWORD),
    )
    edits = system.processes["edits"]
    try:
        with pytest.raises((RuntimeError, TimeoutError)):
            await asyncio.to_thread(edits.start, timeout=30.0)
    finally:
        await asyncio.to_thread(edits.stop)
    log = edits.log_path.read_text(errors="replace")
    assert "Kafka authentication failed" in log, log[-3000:]
    assert "'assent'" in log and "KAFKA_SASL_PASSWORD" in log, log[-3000:]
    assert_no_password(log, "the service's log")
