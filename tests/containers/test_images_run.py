"""The services' images as built (collected only in ``make test-containers``, where they exist).

The rest of the suite runs the services as containers of these images, but as the calling user (see
``assent_devstack.containers``); here each image runs as it would on Kubernetes: as its own user, on a read-only
root, with no capabilities, taking the chart's arguments.
"""

from __future__ import annotations

import os
import tomllib
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy.engine import make_url

from assent_devstack.containers import docker_client
from tests.conftest import Endpoints, Stack, create_database

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
with (REPO / "services.toml").open("rb") as _file:
    ROWS = tomllib.load(_file)["service"]
TAG = os.environ.get("ASSENT_SERVICE_IMAGES", "")


def restricted(image: str, command: list[str], **kwargs: Any) -> bytes:
    """Run ``image`` to its end as the restricted Pod Security Standard would (its own user), and its output."""
    return docker_client().containers.run(  # type: ignore[no-any-return]  # bytes when not detached
        image,
        command,
        network_mode="host",
        read_only=True,
        tmpfs={"/tmp": ""},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        remove=True,
        **kwargs,
    )


@pytest.mark.parametrize("row", ROWS, ids=[row["name"] for row in ROWS])
def test_each_image_names_its_user_entrypoint_port_and_labels(row: dict) -> None:
    name = row["name"]
    config = docker_client().images.get(f"assent-{name}:{TAG}").attrs["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["python", "-m", name]
    assert f"{row['port']}/tcp" in config["ExposedPorts"]
    assert f"ASSENT_HTTP_PORT={row['port']}" in config["Env"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == f"assent-{name}"
    assert labels["org.opencontainers.image.base.name"] == "assent/python:3.11-bookworm"
    assert len(labels["org.opencontainers.image.revision"].removesuffix("-dirty")) == 40
    # Its own user, and only what it needs beside Python (the deployer's git).
    user = restricted(f"assent-{name}:{TAG}", [], entrypoint=["id", "-u"])
    assert user == b"10001\n"
    for package in row.get("packages", []):
        assert restricted(f"assent-{name}:{TAG}", ["--version"], entrypoint=[package]).startswith(package.encode())


async def test_an_image_migrates_its_schema_as_the_chart_job_runs_it(endpoints: Endpoints, stack: Stack) -> None:
    """`migrate` (the chart's Job's argument) brings a fresh database to the newest revision and exits 0, as the
    image's user on a read-only root: the migrations travel inside the installed package."""
    url = await create_database(endpoints.database_url, f"image_{uuid.uuid4().hex[:8]}")
    env = {**stack.system.env, "DATABASE_URL": url}
    output = restricted(f"assent-edits:{TAG}", ["migrate"], environment=env)
    from edits.entrypoint import MIGRATIONS

    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    parsed = make_url(url)
    conn = await asyncpg.connect(
        host=parsed.host, port=parsed.port, user=parsed.username, password=parsed.password, database=parsed.database
    )
    try:
        assert await conn.fetchval("SELECT version_num FROM edits.alembic_version") == head, output
    finally:
        await conn.close()
