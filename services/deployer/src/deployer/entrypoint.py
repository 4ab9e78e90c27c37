"""Wires the deployer: the source kind on the shared runtime, its read copy of the workspace, and its internal
API (repositories, deployments, the Proposals page, issues, builds, deploys, push webhooks), and the build and
deploy workers."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from assent.runtime import OwnerKit, ServiceRuntime

from . import api
from .adapters import tables
from .adapters.artifacts import Artifacts
from .adapters.formats import load_docs, load_schemas
from .adapters.git import GitRepos
from .adapters.repository import DeployerRepository
from .adapters.targets import Targets
from .deploys import Deploys
from .kinds.source import SourceKind
from .settings import DeployerSettings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"  # inside the package: installed with it


def create_app(settings: DeployerSettings) -> FastAPI:
    runtime = ServiceRuntime(
        settings,
        tables=tables.shared,
        migrations=MIGRATIONS,
        schema=tables.SCHEMA,
        stores=[DeployerRepository],
    )
    repos = GitRepos(settings.repos_root)
    schemas = load_schemas()
    deploys = Deploys(
        repos,
        Artifacts(settings.artifacts_root),
        Targets(settings.local_target_root, settings.deploy_target),
        schemas,
        concurrency=settings.build_concurrency,
        poll_seconds=settings.poll_seconds,
    )
    kind = SourceKind(repos, schemas, load_docs(), deploys)
    runtime.serve_kinds(OwnerKit(settings.service_name, [kind], max_result_bytes=settings.max_message_bytes))
    runtime.keep_workspace_copy()
    app = runtime.app(title="Assent deployer service (internal)", extra=lambda: deploys.running(runtime.unit_of_work))
    api.install(app, runtime, repos, kind, deploys)
    return app
