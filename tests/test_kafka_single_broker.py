"""The single-broker figures the cluster's are compared with: a single Kafka broker of its own killed with ``kill -9``
under the same hundred sessions of rounds, and started again at once (``make test-cluster``).

The load, the checks and the figures are :mod:`tests.test_kafka_cluster`'s; a module of its own, so that the cluster
of that module and its services are gone before this one's start.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator

import pytest

from tests.conftest import Endpoints
from tests.test_kafka_cluster import Cluster, Load, restart, running_cluster, sessions, under_load

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # as tests.test_kafka_cluster's


@pytest.fixture(scope="module")
async def single(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Cluster]:
    async with running_cluster(endpoints, tmp_path_factory, 1) as running:
        yield running


@pytest.fixture(scope="module")
async def single_load(single: Cluster) -> AsyncIterator[Load]:
    async with sessions(single) as running:
        yield running


@pytest.mark.kafka_cluster
async def test_kill_9_of_a_single_broker_for_comparison(
    single: Cluster, single_load: Load, capsys: pytest.CaptureFixture[str]
) -> None:
    async def fault() -> None:
        # One broker: nothing moves until it is back on its data.
        await asyncio.to_thread(single.kafka.signal_node, 1, signal.SIGKILL)
        await restart(single, 1)

    await under_load(single, single_load, fault, "kill -9 of a single broker (restarted at once)", capsys)
