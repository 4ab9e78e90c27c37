"""Wires the gateway: projection handlers on their topics, the workspace copy, the Redis event feed, the
public HTTP API."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from assent.db import create_engine
from assent.runtime import ServiceRuntime
from assent.topics import (
    PROPOSALS_OUTCOMES,
    PROPOSALS_PROPOSED,
    STUDIO_SESSIONS,
    STUDIO_TURNS,
    TOOL_RESULTS,
    WORKSPACE_WRITES,
)

from . import api, console, desk, handlers
from .adapters import tables
from .adapters.checkpoints import CheckpointSigner, HistoryPruner
from .adapters.history import HistoryLinker, WrittenEntries
from .adapters.metrics import PendingDecisions
from .adapters.notify import EventFeed
from .adapters.owners import Owners
from .adapters.rules import RuleWorker
from .adapters.webhooks import WebhookWorker
from .auth import Authenticator
from .mcp_face import McpFace
from .settings import GatewaySettings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"  # inside the package: installed with it
log = logging.getLogger(__name__)


def history_jobs(
    settings: GatewaySettings, deps: handlers.Deps, engine: AsyncEngine, engines: list[AsyncEngine]
) -> list[CheckpointSigner | HistoryPruner]:
    """The history's jobs beside the linker: the checkpoint signer, where a signing key is set, and the retention
    job, where a retention period is set too (a prune must leave a signed checkpoint). A retention job's own
    engine (``ASSENT_HISTORY_RETENTION_DATABASE_URL``) is appended to ``engines``, to be disposed of."""
    keys = deps.history_keys  # refuses a key it cannot read, as the gateway starts
    if not keys.can_sign:
        if settings.history_retention_days is not None:
            log.warning(
                "ASSENT_HISTORY_RETENTION_DAYS is set but ASSENT_HISTORY_SIGNING_KEY is not: the history is not pruned"
                " (a prune leaves a signed checkpoint)"
            )
        return []
    jobs: list[CheckpointSigner | HistoryPruner] = [CheckpointSigner(engine, keys, settings.history_checkpoint_seconds)]
    if settings.history_retention_days is not None:
        url = settings.history_retention_database_url
        if url is not None:
            engine = create_engine(url.get_secret_value(), pool_size=1)
            engines.append(engine)
        jobs.append(
            HistoryPruner(
                engine,
                keys,
                timedelta(days=settings.history_retention_days),
                settings.history_prune_seconds,
                settings.history_prune_batch,
            )
        )
    return jobs


def create_app(settings: GatewaySettings) -> FastAPI:
    runtime = ServiceRuntime(
        settings, tables=tables.shared, migrations=MIGRATIONS, schema=tables.SCHEMA, stores=[WrittenEntries]
    )
    events = EventFeed(settings.redis_url, f"{settings.topic_prefix}assent:events")
    owners = Owners(settings.owner_urls, runtime.signer, tracer_provider=runtime.provider)
    deps = handlers.Deps(runtime, settings, events)
    projection = handlers.Projection(events)
    runtime.consume(STUDIO_SESSIONS, projection.on_session_event)
    runtime.consume_in_one_statement(PROPOSALS_PROPOSED, projection.on_proposed, after_commit=projection.proposed)
    # Only refused calls matter to the turn barrier; accepted ones arrive as ProposalProposed.
    runtime.consume(TOOL_RESULTS, projection.on_tool_result, when=lambda result: not result.ok)
    runtime.consume_batch(PROPOSALS_OUTCOMES, projection.on_outcome, after_commit=projection.outcome)
    runtime.consume_batch(STUDIO_TURNS, projection.on_step_ended, after_commit=projection.step_ended)
    runtime.keep_workspace_copy()
    # Every owner's direct writes, filed in their organisations' history (the linker chains them with the rest).
    runtime.consume_batch(WORKSPACE_WRITES, handlers.file_writes, label="written")
    runtime.on_scrape(PendingDecisions(runtime.engine).refresh)
    retention_engines: list[AsyncEngine] = []
    linker = HistoryLinker(runtime.engine, settings.history_link_seconds, settings.history_link_batch)
    jobs = history_jobs(settings, deps, runtime.engine, retention_engines)
    rules = RuleWorker(runtime.engine, runtime.outbox, lambda: runtime.relay.claimed, settings.policy_rules_seconds)
    webhooks = WebhookWorker(
        runtime.engine,
        lambda: runtime.relay.claimed,
        console_url=settings.console_url,
        every=settings.webhook_seconds,
        timeout=settings.webhook_timeout_seconds,
        retry=settings.webhook_retry_seconds,
        give_up=settings.webhook_give_up_seconds,
        concurrency=settings.webhook_concurrency,
    )
    # /mcp: the coach's tools over MCP; a wait that times out answers the step's decisions made so far
    face = McpFace(settings, Authenticator(settings), functools.partial(handlers.decided_in_step, runtime.engine))

    @asynccontextmanager
    async def feed_owners_and_linker() -> AsyncIterator[None]:
        await events.start()
        linker.start()
        rules.start()
        webhooks.start()
        for job in jobs:
            job.start()
        try:
            async with face.running():
                yield
        finally:
            for job in reversed(jobs):
                await job.stop()
            await webhooks.stop()
            await rules.stop()
            await linker.stop()
            await events.stop()
            await owners.close()
            for engine in retention_engines:
                await engine.dispose()

    app = runtime.app(
        title="Assent",
        description="AI agents propose changes; people decide them. The public HTTP API.",
        extra=feed_owners_and_linker,
        public_docs=True,  # the public API's document, at /openapi.json (its /docs page: console.mount)
    )
    api.install(app, deps, owners)
    console.mount(app, settings)  # the web console and /docs, from the files the gateway ships
    desk.install(app, deps)  # the sessions, the pending items, the tray, Apply all, Decline all, Idempotency-Key
    app.router.routes[:0] = face.routes()  # before the console's catch-all
    return app
