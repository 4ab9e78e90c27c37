"""``make service`` in a clone of the repository: the service it writes, with its contract package, is taken in with
no other edit, and nothing outside its folder changes but generated files. There, its unit tests (its kind, its
event, its route), the kind registry's, the routes', the contracts' and the service list's tests, the migration test
and ``make lint`` pass, and it starts against the real servers (migrated, ``/readyz`` 200). A name that would clash
is refused, saying why.

The clone holds what is committed: the command is tried on the repository as a newcomer would get it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import httpx
import pytest

from assent_devstack.system import REPO, ServiceProcess, free_port
from templates.new_service import Refused, check_kind_name, check_service_name, service_rows
from tests.conftest import create_database, fresh_prefix

NAME, KIND = "shelf", "book"


@pytest.mark.parametrize(
    ("name", "kind", "reason"),
    [
        ("collections", "book", "would shadow the standard library's module 'collections'"),
        ("fastapi", "book", "would shadow the module 'fastapi' of this environment"),
        ("tests", "book", "would shadow the module 'tests'"),
        ("edits", "book", "there is a service 'edits' already"),
        ("my_shelf", "book", "the Kubernetes name, which allows no '_'"),
        ("shelf", "memory", "the registry has a kind 'memory' already"),
        ("shelf", "agents", "the name of a table every service holds"),
        ("deploys", "book", "the registry has a topic 'deploys.events' already"),
        ("shelf", "org", "its event 'OrgChanged' is a message of the contracts already"),
        (
            "shelf",
            "deploy_settings",
            "its route GET /api/workspace/agents/{agent_id}/deploy-settings is an owner's route",
        ),
    ],
)
def test_make_service_refuses_a_name_that_would_clash_and_says_why(name: str, kind: str, reason: str) -> None:
    with pytest.raises(Refused) as refused:
        check_service_name(name, service_rows())
        check_kind_name(kind, (f"studio_read_{kind}", f"studio_edit_{kind}"))
    assert reason in str(refused.value)


GENERATED = (
    "services.toml",
    "uv.lock",
    "deploy/k8s/base/",  # deploy/k8s/render.py
    "deploy/helm/assent/values.yaml",
    "contracts/asyncapi/",  # contracts/export.py
    "contracts/schemas/",
    "deploy/kafka/",
)
"""What ``make service`` may change outside the new service's folder: files that tools write from the code."""


def run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.integration
def test_make_service_writes_a_service_that_every_reader_takes_in_and_that_starts(
    endpoints: Any, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    # The clone's own environment, not this one's (uv and make would otherwise act on this checkout's .venv).
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    try:
        run(["git", "clone", "--quiet", str(REPO), str(clone)], tmp_path, env)
        made = run(["make", "--no-print-directory", "service", f"NAME={NAME}", f"KIND={KIND}"], clone, env)
        assert f"services.toml: the {NAME} service" in made.stdout, made.stdout
        status = run(["git", "status", "--porcelain", "--untracked-files=all"], clone, env).stdout.splitlines()
        changed = [line[3:] for line in status]
        assert [path for path in changed if not path.startswith((f"services/{NAME}/", *GENERATED))] == []
        assert f"services/{NAME}/contract/src/{NAME}_contract/__init__.py" in changed
        assert f"contracts/asyncapi/{NAME}.yaml" in changed

        tests = clone / "services" / NAME / "tests" / f"test_{KIND}.py"
        written = tests.read_text().count("\nasync def test_")
        report = tmp_path / "report.xml"
        servers = {
            "KAFKA_BOOTSTRAP_SERVERS": endpoints.kafka,
            "DATABASE_URL": endpoints.database_url,
            "REDIS_URL": endpoints.redis_url,
        }
        run(
            [
                str(clone / ".venv/bin/pytest"),
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={report}",
                str(tests.relative_to(clone)),
                "shared/tests/test_kinds.py",
                "shared/tests/test_api.py",
                "shared/tests/test_contracts.py",
                "tests/test_contracts_published.py",
                "tests/test_service_list.py",
                f"tests/test_migrations.py::test_migrations_match_the_models[{NAME}]",
                # These start a whole system: what they check does not depend on the new service.
                "--deselect=tests/test_service_list.py::test_a_system_that_fails_to_start_stops_what_it_started",
                "--deselect=tests/test_contracts_published.py::"
                "test_the_readme_tool_call_sent_with_kafkas_console_producer_is_answered",
                "--deselect=tests/test_contracts_published.py::"
                "test_a_malformed_call_is_answered_with_the_bad_field_and_only_an_unreadable_one_is_dead_lettered",
            ],
            clone,
            {**env, **servers},
        )
        cases = ElementTree.parse(report).getroot().iter("testcase")
        outcomes = {f"{case.get('classname')}.{case.get('name')}": [child.tag for child in case] for case in cases}
        assert {name: tags for name, tags in outcomes.items() if tags} == {}  # no failure, error or skip
        assert len([name for name in outcomes if f"test_{KIND}." in name]) == written > 0
        assert f"tests.test_migrations.test_migrations_match_the_models[{NAME}]" in outcomes
        assert f"tests.test_service_list.test_each_listed_service_is_a_complete_folder[{NAME}]" in outcomes

        # mypy's cache of this checkout, where `make lint` left one: the clone's lint then reads again only what
        # differs (its files' hashes decide, not their times), the new service's modules and what imports them.
        if (REPO / ".mypy_cache").is_dir():
            shutil.copytree(REPO / ".mypy_cache", clone / ".mypy_cache")
        run(["make", "--no-print-directory", "lint"], clone, env)

        url = asyncio.run(create_database(endpoints.database_url, f"scaffold_{secrets.token_hex(4)}"))
        service = ServiceProcess(
            NAME,
            free_port(),
            {
                **servers,
                "DATABASE_URL": url,
                "ASSENT_TOPIC_PREFIX": fresh_prefix("scaffold"),
                "ASSENT_SERVICE_KEY": secrets.token_urlsafe(48),
            },
            tmp_path / f"{NAME}.log",
            python=str(clone / ".venv/bin/python"),
        )
        service.start()  # returns once /readyz answers 200 naming it: migrated, database and broker up
        try:
            assert httpx.get(f"{service.url}/livez").json() == {"service": NAME, "status": "live"}
        finally:
            service.stop()
    finally:
        shutil.rmtree(clone, ignore_errors=True)  # its environment is a few hundred megabytes
