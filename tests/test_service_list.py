"""One list of services (``services.toml``) drives the devstack, the migration test, the images and the
kustomize base; every service in it is a complete folder. Only the last test needs the servers: it starts
services."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assent.kinds import KINDS, OWNERS
from assent_devstack.system import REPO, build_system, service_list
from tests.conftest import fresh_prefix

SERVICES = [spec.name for spec in service_list()]


@pytest.mark.parametrize("service", SERVICES)
def test_each_listed_service_is_a_complete_folder(service: str) -> None:
    folder = REPO / "services" / service
    for path in (
        "pyproject.toml",
        "Dockerfile",
        "alembic.ini",
        f"src/{service}/migrations/env.py",
        f"src/{service}/__main__.py",
    ):
        assert (folder / path).is_file(), f"services/{service}/{path}"
    assert callable(importlib.import_module(f"{service}.entrypoint").create_app)
    assert importlib.import_module(f"{service}.adapters.tables").SCHEMA == service


def test_every_service_folder_is_listed_and_every_listed_owner_serves_its_kinds() -> None:
    built = {path.name for path in (REPO / "services").iterdir() if (path / "pyproject.toml").is_file()}
    assert set(SERVICES) == built
    for service in set(SERVICES) & set(OWNERS):
        served = {kind for spec in KINDS.values() if spec.owner == service for kind in [spec.name]}
        assert served, service


def test_the_devstack_starts_every_listed_service_and_tells_the_gateway_where_owners_live(tmp_path: Path) -> None:
    system = build_system(
        kafka_bootstrap_servers="k:1", database_url="postgresql+asyncpg://x/y", redis_url="r", log_dir=tmp_path
    )
    assert list(system.processes) == SERVICES
    public = {spec.name for spec in service_list() if spec.public}
    assert set(json.loads(system.env["ASSENT_OWNER_URLS"])) == set(SERVICES) - public


def test_the_kustomize_base_is_rendered_from_the_list() -> None:
    check = subprocess.run(
        [sys.executable, str(REPO / "deploy/k8s/render.py"), "--check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    text = (REPO / "deploy/k8s/base/services.yaml").read_text()
    named = [line.split("assent-")[1] for line in text.splitlines() if line.startswith("  name: assent-")]
    assert list(dict.fromkeys(named)) == SERVICES  # each service's Deployment, Service and PodDisruptionBudget
    base = {path.name: path.read_text() for path in (REPO / "deploy/k8s/base").glob("*.yaml")}
    assert not [name for name, text in base.items() if "kind: Secret" in text], "the Secret is the operator's"
    assert "change-me" not in "".join(base.values())
    owners = [spec.name for spec in service_list() if not spec.public]
    policies = base["network.yaml"]
    assert [
        line.split("assent-")[1] for line in policies.splitlines() if line.startswith("  name: assent-")
    ] == SERVICES
    # Each owner's policy admits the gateway; the gateway's own selects it (tests/test_deploy_manifests.py: the rules).
    assert policies.count("app.kubernetes.io/name: assent-gateway") == len(owners) + 1


def test_a_system_that_fails_to_start_stops_what_it_started(endpoints: Any, tmp_path: Path) -> None:
    """The gateway refuses its settings (a token naming no organisation); edits, started first, is stopped too."""
    system = build_system(
        kafka_bootstrap_servers=endpoints.kafka,
        database_url=endpoints.database_url,
        redis_url=endpoints.redis_url,
        log_dir=tmp_path,
        topic_prefix=fresh_prefix("failing"),
        api_tokens='{"t": "not an identity"}',
    )
    with pytest.raises(RuntimeError, match="gateway exited"):
        system.start()
    edits = system.processes["edits"].process
    assert edits is not None and edits.poll() is not None  # stopped, not orphaned
