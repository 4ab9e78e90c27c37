"""What every Assent service process is made of: telemetry, its engine, outbox and shared tables, a broker
with its consumers, the outbox relay, and one HTTP app whose lifespan starts and stops them all.

A service's ``entrypoint.py`` builds a :class:`ServiceRuntime`, hands it its kinds (:meth:`serve_kinds`)
or its own consumers (:meth:`consume`), adds its routes to :meth:`app`, and its ``__main__`` calls
:func:`serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import MetaData, text
from sqlalchemy.ext.asyncio import AsyncConnection

from .. import inbox, topics
from ..api import Caller, caller
from ..contracts import SessionClosed
from ..db import create_engine, driver_connection, migrate, session_key
from ..domain import Refusal
from ..faults import crash_point
from ..http import PathId, install_guards
from ..kinds import WORKSPACE_OWNER
from ..logs import TRAIL, setup_logging
from ..messaging import broker_answers, ensure_topics, make_broker, start_broker
from ..metrics import READY
from ..outbox import Outbox, OutboxRelay
from ..service_auth import InvalidServiceToken, ServiceSigner, ServiceVerifier, service_keys
from ..settings import ServiceSettings
from ..telemetry import setup_telemetry
from ..topics import Topic
from .consumer import EndOffsets, FailurePolicy, MalformedAnswer, Offsets, Received, batch_span, subscribe
from .kit import LiveCard, OwnerKit, Reverted, RevertRequest
from .malformed_calls import answer_malformed_call
from .tables import MIGRATIONS as SHARED_MIGRATIONS
from .tables import VERSION_TABLE as SHARED_VERSION_TABLE
from .tables import SharedTables, shared_tables
from .uow import SqlUnitOfWork, UnitOfWork
from .walls import CallerOrg, NotFound

log = logging.getLogger(__name__)


class _Refused(Exception):
    """A refusal that rolls back what its unit of work wrote (a session copy made for nothing)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


UowHandler = Callable[[Any, UnitOfWork], Awaitable[None]]
BatchUowHandler = Callable[[Sequence[Received], UnitOfWork], Awaitable[None]]
StatementOf = Callable[[Sequence[Received], int], tuple[str, Sequence[Any]]]
"""What a batch writes, as one statement: given the batch and the number of its first parameter, the text and the
arguments (see :meth:`ServiceRuntime.consume_in_one_statement`)."""
StoreFactory = Callable[[AsyncConnection], Any]
UNTRACED_PATHS = frozenset({"/livez", "/readyz", "/metrics"})
"""The probes' and the scraper's paths: every pod answers them every few seconds, and a trace of each would bury
the traces of the work."""
GC_THRESHOLDS = (20_000, 20, 50)
COPY_CATCH_UP_SECONDS = 3.0
"""How long a lookup that misses in the workspace copy waits for the copy to catch up with ``workspace.events``
before it answers that the entity does not exist (:meth:`ServiceRuntime.keep_workspace_copy`)."""
"""The cyclic collector's thresholds once a service has started (CPython's defaults are 700, 10, 10).

A message or request allocates thousands of short-lived objects, nearly all freed by reference counting; at
the defaults the collector ran every few hundred of them and took about a twentieth of the gateway's CPU
under load. Collections stay, only rarer: what cycles do form is still freed.
"""


def service_metadata(schema: str) -> tuple[MetaData, SharedTables]:
    """A service's metadata in its own schema, holding the shared tables already."""
    metadata = MetaData(schema=schema)
    return metadata, shared_tables(metadata)


class ServiceRuntime:
    """The parts of one service process. Nothing connects until the app's lifespan starts."""

    def __init__(
        self,
        settings: ServiceSettings,
        *,
        tables: SharedTables,
        migrations: Path,
        schema: str,
        stores: Sequence[type[Any]] = (),
        policy: FailurePolicy | None = None,
    ) -> None:
        self.settings = settings
        self.service = settings.service_name
        keys = service_keys(settings.service_key)  # refuses to start without ASSENT_SERVICE_KEY
        self.signer = ServiceSigner(settings.service_name, keys)
        self.verifier = ServiceVerifier(settings.service_name, keys, settings.service_callers)
        self.provider = setup_telemetry(settings.service_name, settings.otlp_endpoint)
        self.engine = create_engine(
            settings.database_url, pool_size=settings.db_pool_size, max_overflow=settings.db_pool_overflow
        )
        self.tables = tables
        self.outbox = Outbox(tables.outbox, settings.topic_prefix)
        self.broker = make_broker(
            settings.kafka_bootstrap_servers,
            client_id=settings.service_name,
            idempotent=settings.kafka_idempotence,
            tracer_provider=self.provider,
            security=settings.kafka_security(),
        )
        self.relay = OutboxRelay(self.engine, self.outbox, self.broker, poll_seconds=settings.outbox_poll_seconds)
        self.migrations = migrations
        self.schema = schema
        self.stores: dict[type[Any], StoreFactory] = {store: store for store in stores}
        """A unit of work's repositories, by class (:meth:`UnitOfWork.store`); each is made from the connection."""
        self.policy = policy or FailurePolicy(max_attempts=settings.handler_max_attempts)
        self.group_timeouts = settings.group_timeouts()  # refuses to start on a heartbeat no shorter than the session
        self.kit: OwnerKit | None = None
        self._routers: list[APIRouter] = []
        self._routes: dict[Topic, Callable[[Sequence[Received]], Coroutine[Any, Any, None]]] = {}
        self._names: dict[Topic, str] = {}
        self._scrapes: list[Callable[[], Awaitable[None]]] = []
        self._answers: dict[Topic, MalformedAnswer] = {}
        self._offsets: Offsets | None = None
        self._directory_catch_up: Callable[[], Awaitable[bool]] | None = None
        self._end_offsets: EndOffsets | None = None

    @property
    def routes(self) -> Mapping[Topic, Callable[[Sequence[Received]], Coroutine[Any, Any, None]]]:
        """What the consumer hands each fetch to: each consumed topic's handling of a batch of parsed messages."""
        return self._routes

    async def migrate(self) -> None:
        """Bring the shared tables and the service's own to the newest migration (the app does it as it starts)."""
        await migrate(self.engine, SHARED_MIGRATIONS, self.schema, version_table=SHARED_VERSION_TABLE)
        await migrate(self.engine, self.migrations, self.schema)

    async def migrate_and_close(self) -> None:
        """:meth:`migrate`, then close the database pool: the whole of a migration job."""
        try:
            await self.migrate()
        finally:
            await self.engine.dispose()

    # --- the internal API ---------------------------------------------------------------------------

    def internal_router(self, **kwargs: Any) -> APIRouter:
        """An ``/internal`` router whose every route requires a service credential (see
        :mod:`assent.service_auth`): without a valid one, 401 with ``WWW-Authenticate: Bearer``."""
        verifier = self.verifier

        async def require_service(request: Request) -> str:
            try:
                return verifier.verify_header(request.headers.get("authorization"))
            except InvalidServiceToken as exc:
                error = "" if request.headers.get("authorization") is None else ', error="invalid_token"'
                raise HTTPException(
                    status_code=401,
                    detail=str(exc),
                    headers={"WWW-Authenticate": f'Bearer realm="assent-internal"{error}'},
                ) from None

        dependencies = [*kwargs.pop("dependencies", []), Depends(require_service)]
        return APIRouter(prefix="/internal", dependencies=dependencies, **kwargs)

    # --- units of work and consumers ----------------------------------------------------------------

    @asynccontextmanager
    async def unit_of_work(self) -> AsyncIterator[SqlUnitOfWork]:
        """One transaction; what it emits is published, and its ``on_commit`` callbacks run, once it commits."""
        async with self.outbox.transaction(self.engine) as conn:
            uow = SqlUnitOfWork(
                conn, self.outbox, self.tables, self.service, self.stores, catch_up=self._directory_catch_up
            )
            yield uow
        for callback in uow.committed:
            await callback()

    def consume(
        self,
        topic: Topic,
        handler: UowHandler,
        *,
        label: str | None = None,
        after_commit: Callable[[Any], Awaitable[None]] | None = None,
        when: Callable[[Any], bool] | None = None,
    ) -> None:
        """Consume ``topic`` in this service's consumer group (one consumer for all the topics a service reads):
        what a fetch returns of the topic, in one unit of work.

        For a batch the runtime, in one transaction and one statement (:meth:`SqlUnitOfWork.claim`): takes
        the session lock of every session its messages name (in a fixed order, so batches of different
        consumers cannot deadlock; a handler's own ``uow.lock_session`` for its message's session is then
        free), then claims the envelope ids in the inbox (keyed by service and topic), so a redelivered
        message changes nothing. It then hands each new message to ``handler`` in order, inside the message's
        own trace, and commits
        once. ``after_commit`` then runs for each message of the batch, redeliveries too (it must be
        idempotent): follow-ups such as live notifications; the handlers' ``uow.on_commit`` callbacks run after
        those. A message ``when`` rejects is passed over
        (without ``after_commit``). A failing batch is handled again message by message, under
        :class:`~assent.runtime.consumer.FailurePolicy`.
        """

        async def each(fresh: Sequence[Received], uow: UnitOfWork) -> None:
            for item in fresh:
                with item.span():
                    await handler(item.message, uow)

        self.consume_batch(topic, each, label=label, after_commit=after_commit, when=when)

    def consume_batch(
        self,
        topic: Topic,
        handler: BatchUowHandler,
        *,
        label: str | None = None,
        after_commit: Callable[[Any], Awaitable[None]] | None = None,
        when: Callable[[Any], bool] | None = None,
    ) -> None:
        """:meth:`consume`, with ``handler`` taking the whole batch at once: the new messages of the fetch (claimed,
        each once, in order) and the unit of work. For a handler whose statements can each serve many messages,
        one round trip to the database for the batch rather than one per message; it makes its messages' spans
        itself (:meth:`Received.span`) where it wants their traces to go on. A batch that fails is handed to it
        again one message at a time.
        """
        consumer = f"{self.service}:{topic.name}"
        label = label or topic.name

        async def handle(batch: Sequence[Received]) -> None:
            chosen = [item for item in batch if when is None or when(item.message)]
            if not chosen:
                return
            async with self.outbox.transaction(self.engine) as conn:
                uow = SqlUnitOfWork(conn, self.outbox, self.tables, self.service, self.stores)
                claimed = await uow.claim(
                    consumer,
                    [item.message.id for item in chosen],
                    (session_id for item in chosen if (session_id := getattr(item.message, "session_id", None))),
                )
                fresh = []
                for item in chosen:
                    if item.message.id in claimed:
                        claimed.discard(item.message.id)  # the same message twice in one fetch: handled once
                        fresh.append(item)
                if fresh:
                    await handler(fresh, uow)
            crash_point(f"{self.service}.{label}.after_commit")
            if after_commit is not None:
                for item in chosen:
                    await after_commit(item.message)
            for callback in uow.committed:  # after the messages' own notices: what handling them caused
                await callback()

        if topic in self._routes:
            raise ValueError(f"{topic.name} is consumed once per service")
        self._routes[topic] = handle
        self._names[topic] = label

    def consume_in_one_statement(
        self,
        topic: Topic,
        statement_of: StatementOf,
        *,
        label: str | None = None,
        after_commit: Callable[[Any], Awaitable[None]] | None = None,
        when: Callable[[Any], bool] | None = None,
    ) -> None:
        """:meth:`consume_batch`, for a handler whose whole effect is one statement that writes what its messages
        say, reads nothing it acts on, and emits nothing.

        ``statement_of(batch, n)`` gives that statement, its parameters numbered from ``$n``, and their arguments.
        It runs as part of the batch's claim: each row it writes must come from a message delivered for the first
        time, ``WHERE message_id IN (SELECT message_id FROM claimed)``. The session locks, the inbox claim and the
        statement go to PostgreSQL as one statement that commits on its own: one round trip for the batch, where
        a unit of work takes four (BEGIN, the claim, the statement, COMMIT). (The statement's snapshot is taken
        before the locks, which is why it may not read what it acts on: the writes themselves wait for the locks.)
        """
        consumer = f"{self.service}:{topic.name}"
        label = label or topic.name
        claim = inbox.claim_statement(self.tables.inbox)

        async def handle(batch: Sequence[Received]) -> None:
            chosen = [item for item in batch if when is None or when(item.message)]
            if not chosen:
                return
            # The same message twice in one fetch: written once (both copies are claimed together).
            unique = list({item.message.id: item for item in chosen}.values())
            written, arguments = statement_of(unique, 4)
            sessions = {session_id for item in unique if (session_id := getattr(item.message, "session_id", None))}
            async with self.engine.connect() as conn:
                pg = await driver_connection(conn)
                with batch_span(unique):
                    await pg.execute(
                        f"WITH claimed AS ({claim}), written AS ({written}) SELECT 1",
                        consumer,
                        [item.message.id for item in unique],
                        [session_key(self.service, session_id) for session_id in sorted(sessions)],
                        *arguments,
                    )
            crash_point(f"{self.service}.{label}.after_commit")
            if after_commit is not None:
                for item in chosen:
                    await after_commit(item.message)

        if topic in self._routes:
            raise ValueError(f"{topic.name} is consumed once per service")
        self._routes[topic] = handle
        self._names[topic] = label

    def serve_kinds(self, kit: OwnerKit) -> None:
        """Serve an owner's kinds: its tool calls, the decisions on them, the sessions, the live-view API."""
        self.kit = kit
        # A session is learnt from the first call of it that reaches this owner (a call carries its session's
        # organisation, guild and operator), so an owner keeps no copy of the sessions it takes no part in. Of the
        # session stream it takes the closes only, which end a known session's grants and later calls (a close of a
        # session it never heard of changes nothing); unless it answers for every session (keeps_every_session).
        when = None if kit.keeps_every_session else _is_close
        self.consume(topics.STUDIO_SESSIONS, kit.on_session_event, label="session", when=when)
        self.consume_batch(topics.TOOL_CALLS[self.service], kit.on_tool_calls, label="tool_call")
        # A call that cannot be read is answered with an error wherever its envelope can be, not dead-lettered.
        self._answers[topics.TOOL_CALLS[self.service]] = answer_malformed_call
        # Its own decisions only, on a topic of its own; and what an earlier release's gateway left on the one topic
        # every owner read then, passing over the other owners' decisions unopened.
        self.consume_batch(topics.DECISIONS[self.service], kit.on_decisions, label="decision")
        self.consume_batch(
            topics.PROPOSALS_DECIDED, kit.on_decisions, label="decision", when=lambda d: d.kind in kit.kinds
        )
        router = self.internal_router(tags=["internal"])

        @router.get("/proposals/{proposal_id}/live", response_model=LiveCard)
        async def live(proposal_id: PathId, org: CallerOrg) -> Any:
            """The live side of a card now, by the owner's own rule (including whether it is stale)."""
            async with self.unit_of_work() as uow:
                card = await kit.live_card(proposal_id, uow, org=org)
            if card is None:
                return JSONResponse({"detail": f"no proposal {proposal_id!r} here"}, status_code=404)
            return card

        @router.post("/proposals/{proposal_id}/revert", status_code=201, response_model=Reverted)
        async def revert(proposal_id: PathId, body: RevertRequest, who: Annotated[Caller, Depends(caller)]) -> Any:
            """File the inverse of an applied request for the person who asks, as a new request of the session the
            gateway opened for them (:meth:`OwnerKit.revert`); nothing is written when it is refused."""
            if who.org is None:
                return JSONResponse({"detail": "a revert is asked for a person of an organisation"}, status_code=422)
            try:
                async with self.unit_of_work() as uow:
                    answer = await kit.revert(proposal_id, body, org=who.org, actor=who.actor, uow=uow)
                    if isinstance(answer, Refusal):
                        raise _Refused(answer)
            except _Refused as refused:
                refusal = refused.refusal
                return JSONResponse({"detail": refusal.message, "code": refusal.code}, status_code=refusal.status)
            return answer

        self._routers.append(router)

    def keep_workspace_copy(self) -> None:
        """Keep this service's read copy of the workspace directory from ``workspace.events``.

        The copy reads its writer's writes: the workspace owner answers a write once its event is in Kafka, and a
        lookup here that finds no org, guild or agent waits for the copy to handle what the topic holds (up to
        :data:`COPY_CATCH_UP_SECONDS`) before it looks again, so a guild created one call ago is found in the next.
        """
        if self.service == WORKSPACE_OWNER:
            raise ValueError("the workspace owner writes the directory; it keeps no copy")

        async def apply(event: Any, uow: UnitOfWork) -> None:
            await uow.workspace.apply(event)

        self.consume(topics.WORKSPACE_EVENTS, apply, label="workspace")
        name = topics.WORKSPACE_EVENTS.full_name(self.settings.topic_prefix)
        ends = self._end_offsets = EndOffsets(self.settings.kafka_bootstrap_servers, self.settings.kafka_security())

        async def catch_up() -> bool:
            # Bounded: a broker that does not answer makes a lookup answer "does not exist" late, not never.
            offsets = self._offsets
            return offsets is not None and await offsets.caught_up(name, ends, timeout=COPY_CATCH_UP_SECONDS)

        self._directory_catch_up = catch_up

    # --- the process ---------------------------------------------------------------------------------

    def app(
        self,
        *,
        title: str,
        description: str = "",
        include_health_in_schema: bool = False,
        extra: Callable[[], AbstractAsyncContextManager[None]] | None = None,
        public_docs: bool = False,
    ) -> FastAPI:
        """The process's HTTP app: migrations, topics, consumers and relay start with it and stop with it.

        ``extra`` adds the service's own resources (opened after the database and topics, before consumers).
        Only a public API (``public_docs``: the gateway's) serves its OpenAPI document at ``/openapi.json`` to
        anyone (its ``/docs`` page is the service's own, from bundled files); an internal one serves it at
        ``/internal/openapi.json``, to a caller with the service credential only, and no browsable page (a browser
        cannot present the credential).
        ``/livez`` answers while the process runs (the liveness probe); ``/readyz`` answers 200 only while
        the database and the broker answer (the readiness probe), else 503 with which check failed.
        ``/metrics`` serves the counters in Prometheus' text format. A :class:`~assent.runtime.walls.NotFound`
        raised by a route is answered 404 with its message.
        """

        @asynccontextmanager
        async def lifespan(_: FastAPI) -> AsyncIterator[None]:
            steps = StartSteps()
            if self.settings.migrate_on_start:
                await self.migrate()
                steps.done("migrations")
            await ensure_topics(
                self.settings.kafka_bootstrap_servers,
                self.settings.topic_prefix,
                security=self.settings.kafka_security(),
                policy=self.settings.topic_policy(),
                create=self.settings.create_topics,
            )
            steps.done("topics")
            async with extra() if extra is not None else _nothing():
                steps.done("own resources")
                offsets = None
                if self._routes:
                    offsets = self._offsets = subscribe(
                        self.broker,
                        self._routes,
                        prefix=self.settings.topic_prefix,
                        group_id=f"{self.settings.topic_prefix}{self.service}",
                        policy=self.policy,
                        tracer_provider=self.provider,
                        timeouts=self.group_timeouts,
                        names=self._names,
                        answer_malformed=self._answers,
                    )
                await self.relay.claim()  # before anything writes an outbox row: the rows name this relay
                await start_broker(self.broker)
                steps.done("consumer group")
                self.relay.start()
                pruner = asyncio.create_task(self._prune_inbox(), name="inbox-pruner")
                # What start-up made (modules, models, compiled statements) lives as long as the process: keep
                # it out of the cyclic collector's generations, so collections under load walk only new objects.
                gc.collect()
                gc.freeze()
                gc.set_threshold(*GC_THRESHOLDS)
                log.info("started in %s", steps, extra={"start_seconds": steps.seconds()})
                try:
                    yield
                finally:
                    pruner.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await pruner
                    await self.relay.stop()
                    if offsets is not None:
                        await offsets.flush()
                    if self._end_offsets is not None:
                        await self._end_offsets.close()
                    await self.broker.stop()
            await self.engine.dispose()

        app = FastAPI(
            title=title,
            description=description,
            version="0.1.0",
            lifespan=lifespan,
            openapi_url="/openapi.json" if public_docs else None,
            # FastAPI's own pages load their scripts from a CDN (blank with no internet): the public API serves
            # /docs itself, from bundled files (the gateway's console).
            docs_url=None,
            redoc_url=None,
            # FastAPI's own telemetry is off: the request guard (:class:`assent.http.HttpGuard`) opens the
            # server span in this service's provider (its name, route, status and the request's trace context, no
            # request header, attributes only when recorded; no trace of a probe or scrape), in the same layer as
            # the body timeout and the metrics (``/metrics`` has ours). FastAPI's would add a layer of its own
            # and build the span's attributes for every request, recorded or not.
            telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
        )
        app.state.runtime = self  # for ``python -m <service> migrate`` (:func:`serve`)
        app.state.public = public_docs  # for :func:`serve`: only the public API may sit behind a proxy
        install_guards(
            app,
            body_timeout_seconds=self.settings.http_body_timeout_seconds,
            trail=_http_trail,
            tracer_provider=self.provider,
            untraced=UNTRACED_PATHS,
        )

        @app.exception_handler(NotFound)
        async def not_found(_: Request, exc: NotFound) -> JSONResponse:
            """An entity missing, or behind the caller's wall (:mod:`assent.runtime.walls`): the same 404."""
            return JSONResponse({"detail": str(exc)}, status_code=404)

        for router in self._routers:
            app.include_router(router)
        if not public_docs:
            document = self.internal_router(include_in_schema=False)

            @document.get("/openapi.json")
            async def openapi() -> JSONResponse:
                """The internal API's OpenAPI document, for a caller with the service credential."""
                return JSONResponse(app.openapi())

            app.include_router(document)

        @app.get("/livez", include_in_schema=include_health_in_schema)
        async def livez() -> dict[str, str]:
            return {"service": self.settings.service_name, "status": "live"}

        @app.get("/readyz", include_in_schema=include_health_in_schema)
        async def readyz() -> JSONResponse:
            checks = await self.readiness()
            ready = all(ok for ok in checks.values())
            body = {
                "service": self.settings.service_name,
                "status": "ready" if ready else "unready",
                "checks": {k: "ok" if v else "down" for k, v in checks.items()},
            }
            return JSONResponse(body, status_code=200 if ready else 503)

        @app.get("/metrics", include_in_schema=False)
        async def metrics() -> Response:
            for refresh in self._scrapes:
                try:
                    async with asyncio.timeout(SCRAPE_REFRESH_SECONDS):
                        await refresh()
                except Exception as exc:  # the other metrics are still worth serving
                    log.warning("a metric could not be read for this scrape (%s: %s)", type(exc).__name__, exc)
            return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

        return app

    def on_scrape(self, refresh: Callable[[], Awaitable[None]]) -> None:
        """Run ``refresh`` before each ``/metrics`` answer (up to :data:`SCRAPE_REFRESH_SECONDS`): for a gauge read
        from the database, such as the gateway's pending decisions, rather than kept on the hot path."""
        self._scrapes.append(refresh)

    async def readiness(self, timeout: float = 2.0) -> dict[str, bool]:
        """Whether the database and the broker answer within ``timeout`` seconds each (``assent_ready`` too)."""

        async def database() -> bool:
            try:
                async with asyncio.timeout(timeout):
                    async with self.engine.connect() as conn:
                        await conn.execute(text("SELECT 1"))
                return True
            except Exception:
                return False

        async def broker() -> bool:
            try:
                async with asyncio.timeout(timeout):
                    return await broker_answers(
                        self.broker.config.admin_client, topics.STUDIO_SESSIONS.full_name(self.settings.topic_prefix)
                    )
            except Exception:
                return False

        db_ok, kafka_ok = await asyncio.gather(database(), broker())
        READY.labels("database").set(db_ok)
        READY.labels("kafka").set(kafka_ok)
        return {"database": db_ok, "kafka": kafka_ok}

    async def _prune_inbox(self) -> None:
        retention = timedelta(days=self.settings.inbox_retention_days)
        while True:
            try:
                pruned = await inbox.prune(self.engine, self.tables.inbox, retention)
                if pruned:
                    log.info("forgot %d inbox entries older than %s", pruned, retention)
            except Exception:
                log.warning("could not prune the inbox; trying again later", exc_info=True)
            await asyncio.sleep(3600)


def _is_close(message: Any) -> bool:
    return isinstance(message, SessionClosed)


class StartSteps:
    """How long each step of a service's start took, for the line it logs once started (``started in 6.1 s: ...``).

    The first step, ``imports``, runs from the process's start (read from /proc where there is one) to the app's
    start-up: the interpreter, the imports and the app's construction.
    """

    def __init__(self) -> None:
        now = time.monotonic()
        self._last = now
        self._began = now - _process_age()
        self._steps: dict[str, float] = {"imports": now - self._began}

    def done(self, step: str) -> None:
        now = time.monotonic()
        self._steps[step] = now - self._last
        self._last = now

    def seconds(self) -> dict[str, float]:
        """Each step's seconds, and ``total``."""
        return {**{k: round(v, 3) for k, v in self._steps.items()}, "total": round(self._last - self._began, 3)}

    def __str__(self) -> str:
        parts = ", ".join(f"{step} {seconds:.2f} s" for step, seconds in self._steps.items())
        return f"{self._last - self._began:.2f} s: {parts}"


def _process_age() -> float:
    """Seconds since this process started (0 where /proc cannot tell)."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)


STARTUP_FAILURE = 3
"""The exit code of a service whose app did not start (uvicorn's own for it)."""

SCRAPE_REFRESH_SECONDS = 2.0
"""How long a scrape waits for a metric read at scrape time (:meth:`ServiceRuntime.on_scrape`)."""


def _http_trail(method: str, route: str, status: int, seconds: float) -> None:
    if TRAIL.isEnabledFor(logging.INFO):
        fields = {"method": method, "route": route, "status": status, "seconds": round(seconds, 6)}
        TRAIL.info("%s %s %d", method, route, status, extra=fields)


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


STOP_DEADLINE_SECONDS = 8.0
"""How long a service takes at most to stop once told to (SIGTERM, Ctrl-C): past it, the process exits whatever it
still waits on (a flush to a broker that is gone, a start-up that has not finished)."""


class _Server(uvicorn.Server):
    """uvicorn's server, gone within :data:`STOP_DEADLINE_SECONDS` of the first signal to stop. (uvicorn lets the
    app's start-up finish before it begins to stop, and its stop waits on whatever the app's shutdown waits on.)"""

    _deadline: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._deadline is None:
            self._deadline = threading.Timer(STOP_DEADLINE_SECONDS, _exit_now, args=(sig,))
            self._deadline.daemon = True
            self._deadline.start()
        super().handle_exit(sig, frame)


def _exit_now(sig: int) -> None:
    log.error("not stopped %.0f s after signal %d; exiting now", STOP_DEADLINE_SECONDS, sig)
    os._exit(128 + sig)


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    """Run ``app`` until SIGTERM or Ctrl-C (gone within :data:`STOP_DEADLINE_SECONDS` of it), logging as
    ``settings.log_level``; exits with 3 when the app does not start.

    Every logger, uvicorn's too, writes through the root logger's handler (:func:`~assent.logs.setup_logging`):
    one JSON object per line, or the readable form (``settings.log_format``), collapsing repeated lines
    (:class:`~assent.logs.RepeatFilter`, ``settings.log_repeat_seconds``): while a server is down, the clients'
    failures, many a second, take a line per kind and interval.

    ``python -m <service> migrate`` brings the service's tables to the newest migration and exits without serving
    (the migration job, run with a role that may change the schema; the service then runs with
    ``ASSENT_MIGRATE_ON_START=false`` and a role that may not).
    """
    if sys.argv[1:] == ["migrate"]:
        runtime: ServiceRuntime = app.state.runtime
        asyncio.run(runtime.migrate_and_close())
        return
    setup_logging(
        settings.service_name,
        level=settings.log_level,
        log_format=settings.log_format,
        repeat_seconds=settings.log_repeat_seconds,
        trail=settings.log_trail,
    )
    config = uvicorn.Config(
        app,
        host=settings.http_host,
        port=settings.http_port,
        log_level="warning",
        log_config=None,  # uvicorn's loggers propagate to the root's handler, with its format and filter
        loop="uvloop",
        http="httptools",
        # ``X-Forwarded-For`` and ``-Proto`` from a proxy on the same host (uvicorn's default) matter only to the
        # public API (the MCP face names its own address); an internal API is called by the gateway directly, and
        # its requests need not pass the proxy's layer.
        proxy_headers=bool(getattr(app.state, "public", True)),
    )
    server = _Server(config)
    server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
