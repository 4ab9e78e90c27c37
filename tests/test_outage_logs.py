"""A service whose broker is gone keeps a small log, reports not ready, and still stops at once.

The deployer runs on a broker of its own (Tansu, from its wheel) that the test stops: aiokafka's clients fail many
times a second meanwhile, and the service's log takes the first line of each kind and then one per interval
(``ASSENT_LOG_REPEAT_SECONDS``, 60 s by default, 15 s here so that the suite does not wait a minute for the note)
saying how many more there were.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import signal
import uuid
from pathlib import Path

import httpx
import pytest

from assent_devstack._kafka import start_kafka
from assent_devstack.system import ServiceProcess, free_port
from tests.conftest import Endpoints, create_database, wait_for

pytestmark = pytest.mark.integration

UNABLE = "aiokafka: Unable connect to node with id"
NOTE = re.compile(r" \(and [\d,]+ more like it in the last \d+ s\)$")


def readable(line: str) -> str:
    """A JSON log line as ``<logger>: <message>``."""
    entry = json.loads(line)
    return f"{entry['logger']}: {entry['message']}"


async def test_a_service_that_lost_its_broker_logs_a_line_per_kind_an_interval_and_stops_at_once(
    endpoints: Endpoints, tmp_path: Path
) -> None:
    broker = await asyncio.to_thread(start_kafka, tmp_path / "broker", None, "tansu")
    database_url = await create_database(endpoints.database_url, f"assent_o{uuid.uuid4().hex[:10]}")
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": broker.endpoint,
        "ASSENT_KAFKA_IDEMPOTENCE": "false",
        "DATABASE_URL": database_url,
        "REDIS_URL": endpoints.redis_url,
        "ASSENT_TOPIC_PREFIX": f"o{uuid.uuid4().hex[:10]}.",
        "ASSENT_SERVICE_KEY": secrets.token_urlsafe(48),
        "ASSENT_REPOS_DIR": str(tmp_path / "repos"),
        "ASSENT_ARTIFACTS_DIR": str(tmp_path / "artifacts"),
        "ASSENT_LOCAL_TARGET_DIR": str(tmp_path / "live"),
        "ASSENT_LOG_REPEAT_SECONDS": "15",
    }
    deployer = ServiceProcess("deployer", free_port(), env, tmp_path / "deployer.log")
    try:
        await asyncio.to_thread(deployer.start)
        before = len(deployer.log_path.read_text().splitlines())
        await asyncio.to_thread(broker.stop)

        async with httpx.AsyncClient(timeout=10) as http:

            async def unready() -> bool:
                response = await http.get(f"{deployer.url}/readyz")
                return response.status_code == 503 and response.json()["checks"]["kafka"] == "down"

            await wait_for(unready, timeout=60, interval=0.5)

        def entries() -> list[str]:
            return deployer.log_path.read_text().splitlines()[before:]

        def lines() -> list[str]:
            return [readable(line) for line in entries()]

        # The first connection failure after the interval is written, with the count of those left out.
        await wait_for(lambda: any(UNABLE in line and NOTE.search(line) for line in lines()), timeout=150, interval=1)
        written = lines()
        noted = next(i for i, line in enumerate(written) if UNABLE in line and NOTE.search(line))
        plain = [line for line in written[:noted] if UNABLE in line]
        assert len(plain) == 1, plain  # the first failure, then nothing of its kind until the note
        left_out = int(re.search(r"and ([\d,]+) more", written[noted]).group(1).replace(",", ""))  # type: ignore[union-attr]
        assert left_out > 100, written[noted]  # many a second: without the filter the log held every one
        assert json.loads(entries()[noted])["repeated"] == left_out  # the count as a field of its own too
        assert len(written[: noted + 1]) < 60, "\n".join(written)

        assert deployer.process is not None
        deployer.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(deployer.wait_exit, 10) in (0, -signal.SIGTERM)
    finally:
        await asyncio.to_thread(deployer.stop)
        await asyncio.to_thread(broker.stop)
