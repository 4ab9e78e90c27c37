"""Batches against the real servers: what one fetch returns is handled in one transaction, a failing message
is dead-lettered without losing the rest of its batch, and two outbox relays never publish a row twice."""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from opentelemetry import trace
from sqlalchemy import MetaData, event, func, select, text
from sqlalchemy.engine import make_url

from assent import contracts
from assent.contracts import StepEnded, parse_message
from assent.db import create_engine, driver_connection
from assent.messaging import ensure_topics, make_broker, start_broker
from assent.outbox import Outbox, OutboxRelay, outbox_table
from assent.runtime import ServiceRuntime
from assent.runtime.consumer import FailurePolicy, Received, subscribe
from assent.runtime.uow import StoredProposal
from assent.topics import PROPOSALS_OUTCOMES, PROPOSALS_PROPOSED, STUDIO_TURNS
from edits.adapters import tables as edits_tables
from edits.adapters.repository import EditsRepository
from edits.entrypoint import MIGRATIONS as EDITS_MIGRATIONS
from edits.settings import EditsSettings
from gateway.adapters import tables as gateway_tables
from gateway.domain.events import LiveEvent, TurnContinuedEvent
from gateway.entrypoint import MIGRATIONS
from gateway.handlers import Projection
from gateway.settings import GatewaySettings
from tests.conftest import Endpoints, create_database, fresh_prefix

pytestmark = pytest.mark.integration

CONTRACT_EXAMPLES = Path(contracts.__file__).parent / "examples"
FAST = FailurePolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02)


def step(n: int, session: str = "s") -> StepEnded:
    return StepEnded(session_id=session, turn_id="t", step=n, tool_call_ids=("c",))


async def _connect(database_url: str) -> asyncpg.Connection:
    url = make_url(database_url)
    return await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
    )


async def _topic_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """Every value on ``topic`` once at least ``expected`` have arrived (read from the start)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    values: list[bytes] = []
    try:
        async with asyncio.timeout(20):
            while len(values) < expected:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    values += [record.value for record in records]
        # Anything beyond ``expected`` that is already there arrives with the next fetch.
        for records in (await consumer.getmany(timeout_ms=500)).values():
            values += [record.value for record in records]
    finally:
        await consumer.stop()
    return values


async def test_a_fetch_is_one_batch_and_a_failing_message_leaves_the_rest_committed(endpoints: Endpoints) -> None:
    prefix = fresh_prefix("batch")
    database_url = await create_database(endpoints.database_url, prefix.rstrip("."))
    db = await _connect(database_url)
    await db.execute("CREATE TABLE handled (step int PRIMARY KEY)")
    await ensure_topics(endpoints.kafka, prefix)
    topic = STUDIO_TURNS.full_name(prefix)

    # Twenty messages wait before the consumer starts, so its first fetch returns them together.
    messages = [step(n) for n in range(20)]
    producer = AIOKafkaProducer(bootstrap_servers=endpoints.kafka)
    await producer.start()
    try:
        for message in messages:
            await producer.send_and_wait(topic, message.to_bytes(), key=b"s", partition=0)
    finally:
        await producer.stop()

    batches: list[list[int]] = []
    pool = await asyncpg.create_pool(**_pool_args(database_url))

    async def handler(batch: Sequence[Received]) -> None:
        steps = [item.message.step for item in batch]  # type: ignore[attr-defined]
        batches.append(steps)
        async with pool.acquire() as conn, conn.transaction():
            for n in steps:
                await conn.execute("INSERT INTO handled VALUES ($1)", n)
                if n == 13:
                    raise ValueError("step 13 cannot be handled")

    broker = make_broker(endpoints.kafka, client_id="batch-test", idempotent=False)
    subscribe(broker, {STUDIO_TURNS: handler}, prefix=prefix, group_id=f"{prefix}g", policy=FAST)
    await start_broker(broker)
    try:
        dead = await _topic_values(endpoints.kafka, STUDIO_TURNS.dlq_name(prefix), 1)
        assert dead == [messages[13].to_bytes()]
        handled = sorted(await db.fetchval("SELECT array_agg(step) FROM handled") or [])
        assert handled == [n for n in range(20) if n != 13], "every other message committed, once"
        assert len(batches[0]) > 1, f"the first fetch was not one batch: {batches}"
        assert 13 in batches[0] and [13] in batches and batches.count([13]) == FAST.max_attempts
    finally:
        await broker.stop()
        await pool.close()
        await db.close()


def _pool_args(database_url: str) -> dict[str, Any]:
    url = make_url(database_url)
    return {
        "host": url.host,
        "port": url.port,
        "user": url.username,
        "password": url.password,
        "database": url.database,
    }


class _HeldBroker:
    """A real broker whose publishing waits until the test lets it go on."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.publishing = asyncio.Event()
        self.go_on = asyncio.Event()

    async def publish(self, *args: Any, **kwargs: Any) -> Any:
        self.publishing.set()
        await self.go_on.wait()
        return await self.broker.publish(*args, **kwargs)


@dataclass
class OutboxWorld:
    """An outbox table of its own, its engine, a connected broker, and a topic prefix of their own."""

    prefix: str
    table: Any
    engine: Any
    broker: Any

    async def commit(self, outbox: Outbox, n: int) -> list[StepEnded]:
        """Commit ``n`` messages through ``outbox``; returns them."""
        sent = [step(i, session=self.prefix) for i in range(n)]
        async with outbox.transaction(self.engine) as conn:
            for message in sent:
                await outbox.put(conn, STUDIO_TURNS, "s", message)
        return sent


@asynccontextmanager
async def outbox_world(endpoints: Endpoints) -> AsyncIterator[OutboxWorld]:
    prefix = fresh_prefix("relay")
    database_url = await create_database(endpoints.database_url, prefix.rstrip("."))
    await ensure_topics(endpoints.kafka, prefix)
    metadata = MetaData(schema="public")
    table = outbox_table(metadata)
    engine = create_engine(database_url)
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    broker = make_broker(endpoints.kafka, client_id="relay-test", idempotent=False)
    await broker.connect()
    try:
        yield OutboxWorld(prefix, table, engine, broker)
    finally:
        await broker.stop()
        await engine.dispose()


async def test_two_relays_never_publish_a_row_twice(endpoints: Endpoints) -> None:
    async with outbox_world(endpoints) as world:
        held = _HeldBroker(world.broker)
        outbox = Outbox(world.table, world.prefix)
        mine = OutboxRelay(world.engine, outbox, held, sweep_after=timedelta(0))  # type: ignore[arg-type]
        other = OutboxRelay(world.engine, Outbox(world.table, world.prefix), world.broker, sweep_after=timedelta(0))
        await mine.claim()
        try:
            sent = await world.commit(outbox, 5)
            publishing = asyncio.create_task(mine.publish_committed())
            await asyncio.wait_for(held.publishing.wait(), 10)
            # The other replica sweeps with no grace period at all while this one is still publishing.
            assert await other.sweep() == 0
            held.go_on.set()
            await publishing
            assert await other.sweep() == 0
            async with world.engine.connect() as conn:
                assert (await conn.scalar(select(func.count()).select_from(world.table))) == 0
        finally:
            await mine.stop()
        values = await _topic_values(endpoints.kafka, STUDIO_TURNS.full_name(world.prefix), 5)
        assert sorted(values) == sorted(message.to_bytes() for message in sent)


async def test_rows_wait_for_their_relay_while_it_lives_and_go_to_the_sweep_once_it_is_gone(
    endpoints: Endpoints,
) -> None:
    class Refusing:
        async def publish(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("the broker is unreachable")

    async with outbox_world(endpoints) as world:
        outbox = Outbox(world.table, world.prefix)
        failing = OutboxRelay(world.engine, outbox, Refusing())  # type: ignore[arg-type]
        sweeper = OutboxRelay(world.engine, Outbox(world.table, world.prefix), world.broker, sweep_after=timedelta(0))
        await failing.claim()
        sent = await world.commit(outbox, 3)
        with pytest.raises(ConnectionError):
            await failing.publish_committed()
        assert await sweeper.sweep() == 0  # its relay lives: it tries them again itself
        with pytest.raises(ConnectionError):
            await failing.stop()  # a last attempt, then its lock is gone with its connection
        assert await sweeper.sweep() == 3
        assert await sweeper.sweep() == 0
        values = await _topic_values(endpoints.kafka, STUDIO_TURNS.full_name(world.prefix), 3)
        assert sorted(values) == sorted(message.to_bytes() for message in sent)


async def test_a_relay_tries_refused_rows_again_in_order_before_newer_ones(endpoints: Endpoints) -> None:
    class RefusingOnce:
        def __init__(self, broker: Any) -> None:
            self.broker, self.refused = broker, False

        async def publish(self, *args: Any, **kwargs: Any) -> Any:
            if not self.refused:
                self.refused = True
                raise ConnectionError("the broker is unreachable")
            return await self.broker.publish(*args, **kwargs)

    async with outbox_world(endpoints) as world:
        outbox = Outbox(world.table, world.prefix)
        relay = OutboxRelay(world.engine, outbox, RefusingOnce(world.broker))  # type: ignore[arg-type]
        await relay.claim()
        try:
            first = await world.commit(outbox, 2)
            with pytest.raises(ConnectionError):
                await relay.publish_committed()
            second = await world.commit(outbox, 2)
            await relay.publish_committed()
            async with world.engine.connect() as conn:
                assert (await conn.scalar(select(func.count()).select_from(world.table))) == 0
        finally:
            await relay.stop()
        values = await _topic_values(endpoints.kafka, STUDIO_TURNS.full_name(world.prefix), 4)
        assert values == [message.to_bytes() for message in first + second]


async def test_a_change_of_one_statement_and_its_messages_commit_together_or_not_at_all(endpoints: Endpoints) -> None:
    async with outbox_world(endpoints) as world:
        async with world.engine.begin() as conn:
            await conn.execute(text("CREATE TABLE public.marks (name TEXT PRIMARY KEY)"))
        insert = "INSERT INTO public.marks (name) VALUES ($1)"
        outbox = Outbox(world.table, world.prefix)
        relay = OutboxRelay(world.engine, outbox, world.broker)
        await relay.claim()
        try:
            sent = [step(i, session=world.prefix) for i in range(2)]
            async with world.engine.connect() as conn:
                await outbox.write_with(conn, insert, ("first",), [(STUDIO_TURNS, "s", message) for message in sent])
                assert not conn.in_transaction()
            # Committed on its own: another connection sees the row and both messages.
            async with world.engine.connect() as conn:
                assert (await conn.scalar(text("SELECT count(*) FROM public.marks"))) == 1
                assert (await conn.scalar(select(func.count()).select_from(world.table))) == 2
            # A statement that fails writes no message either.
            async with world.engine.connect() as conn:
                with pytest.raises(asyncpg.UniqueViolationError):
                    await outbox.write_with(conn, insert, ("first",), [(STUDIO_TURNS, "s", step(9))])
            async with world.engine.connect() as conn:
                assert (await conn.scalar(select(func.count()).select_from(world.table))) == 2
            # It commits on its own, so it refuses to join a transaction.
            async with world.engine.begin() as conn:
                with pytest.raises(RuntimeError, match="cannot join a transaction"):
                    await outbox.write_with(conn, insert, ("second",), [(STUDIO_TURNS, "s", step(10))])
            await relay.publish_committed()
        finally:
            await relay.stop()
        values = await _topic_values(endpoints.kafka, STUDIO_TURNS.full_name(world.prefix), 2)
        assert sorted(values) == sorted(message.to_bytes() for message in sent)


async def test_a_transactions_last_write_goes_with_its_messages_in_one_statement(endpoints: Endpoints) -> None:
    """``Outbox.write_last`` holds a transaction's last write to send it with the transaction's outbox rows at commit,
    in one statement: both are written, or (the transaction failing) neither. A write held before runs when the
    next is held, in order; a held write with no rows runs alone at commit."""
    async with outbox_world(endpoints) as world:
        async with world.engine.begin() as conn:
            await conn.execute(text("CREATE TABLE public.marks (name TEXT PRIMARY KEY, n INT NOT NULL DEFAULT 0)"))
        insert = "INSERT INTO public.marks (name) VALUES ($1)"
        bump = "UPDATE public.marks SET n = n + 1 WHERE name = $1"
        outbox = Outbox(world.table, world.prefix)
        logged: list[str] = []

        def log_statements(dbapi_connection: Any, _: Any) -> None:
            dbapi_connection.driver_connection.add_query_logger(lambda query: logged.append(query.query))

        event.listen(world.engine.sync_engine, "connect", log_statements)
        await world.engine.dispose()

        async def counts() -> tuple[int, int, int]:
            async with world.engine.connect() as conn:
                marks = await conn.scalar(text("SELECT count(*) FROM public.marks"))
                bumps = await conn.scalar(text("SELECT coalesce(sum(n), 0) FROM public.marks"))
                rows = await conn.scalar(select(func.count()).select_from(world.table))
            return marks, bumps, rows

        assert await counts() == (0, 0, 0)
        await asyncio.sleep(0)
        logged.clear()
        async with outbox.transaction(world.engine) as conn:
            await outbox.write_last(conn, insert, ["first"])
            await outbox.put(conn, STUDIO_TURNS, "s", step(1, session=world.prefix))
            await outbox.put(conn, STUDIO_TURNS, "s", step(2, session=world.prefix))
        await asyncio.sleep(0)  # asyncpg hands each statement to its loggers in a callback of its own
        assert [query.split(" (")[0] for query in logged if "public." in query] == ["WITH written AS"]
        assert await counts() == (1, 0, 2)

        with pytest.raises(RuntimeError, match="rolled back"):
            async with outbox.transaction(world.engine) as conn:
                await outbox.write_last(conn, insert, ["second"])
                await outbox.put(conn, STUDIO_TURNS, "s", step(3, session=world.prefix))
                raise RuntimeError("rolled back")
        assert await counts() == (1, 0, 2)

        async with outbox.transaction(world.engine) as conn:
            await outbox.write_last(conn, insert, ["third"])
            await outbox.write_last(conn, bump, ["third"])  # the insert runs now, so the update finds the row
        assert await counts() == (2, 1, 2)

        async with world.engine.connect() as conn:
            with pytest.raises(RuntimeError, match="needs a transaction opened by"):
                await outbox.write_last(conn, insert, ["fourth"])


def _example(name: str, **fields: Any) -> Any:
    """The contract's golden example ``name`` (its file's name) with ``fields`` changed and an envelope id of its own."""
    data = {**json.loads((CONTRACT_EXAMPLES / f"{name}.json").read_text()), **fields, "id": str(uuid.uuid4())}
    return parse_message(json.dumps(data).encode())


class _Feed:
    """The gateway's live-event feed, kept in memory: what the projection announced."""

    def __init__(self) -> None:
        self.published: list[LiveEvent] = []

    async def publish(self, events: Sequence[LiveEvent]) -> None:
        self.published += events


async def test_the_gateway_projects_a_batch_of_many_sessions_with_one_statement_per_step(endpoints: Endpoints) -> None:
    """A fetch of several sessions' proposals, step ends and outcomes, handled by the gateway's batch handlers
    against the real database: each turn is continued exactly once, with every decision of its step, also when
    the outcomes that complete it arrive in one batch; of two outcomes resolving one proposal the first counts;
    a stale outcome leaves its proposal pending; a redelivered batch changes nothing."""
    database_url = await create_database(endpoints.database_url, f"projection_{uuid.uuid4().hex[:8]}")
    settings = GatewaySettings(
        database_url=database_url, kafka_bootstrap_servers=endpoints.kafka, service_key=secrets.token_urlsafe(48)
    )
    runtime = ServiceRuntime(
        settings, tables=gateway_tables.shared, migrations=MIGRATIONS, schema=gateway_tables.SCHEMA
    )
    feed = _Feed()
    projection = Projection(feed)  # type: ignore[arg-type]
    runtime.consume_in_one_statement(PROPOSALS_PROPOSED, projection.on_proposed, after_commit=projection.proposed)
    runtime.consume_batch(STUDIO_TURNS, projection.on_step_ended, after_commit=projection.step_ended)
    runtime.consume_batch(PROPOSALS_OUTCOMES, projection.on_outcome, after_commit=projection.outcome)
    tracer = trace.get_tracer("test")

    def fetched(*messages: Any) -> list[Received]:
        return [Received(message, {}, tracer, "topic") for message in messages]

    # Sessions s1 (two requests in one step), s2 (one), s3 (one, which stays pending).
    calls = {"c1": ("s1", 1), "c2": ("s1", 2), "c3": ("s2", 1), "c4": ("s3", 1)}
    proposed = [
        _example("ProposalProposed.v1", proposal_id=f"p{c}", session_id=s, seq=seq, tool_call_id=c, turn_id=f"t{s}")
        for c, (s, seq) in calls.items()
    ]
    outcomes = [
        _example("ProposalOutcome.v1", decision_id="d1", proposal_id="pc1", session_id="s1", seq=1),
        _example("ProposalOutcome.v1", decision_id="d3", proposal_id="pc3", session_id="s2", seq=1),
        # Two decisions on c2 resolved in one batch: the first counts, both are recorded.
        _example("ProposalOutcome.v1", decision_id="d2", proposal_id="pc2", session_id="s1", seq=2, outcome="declined"),
        _example("ProposalOutcome.v1", decision_id="d2b", proposal_id="pc2", session_id="s1", seq=2),
        _example("ProposalOutcome.v1.2", decision_id="d4", proposal_id="pc4", session_id="s3", seq=1),
    ]
    try:
        await runtime.migrate()
        async with runtime.engine.begin() as conn:
            pg = await driver_connection(conn)
            for decision in outcomes:
                await pg.execute(
                    "INSERT INTO gateway.decisions (decision_id, session_id, seq, proposal_id, decision, actor, via,"
                    " message_id) VALUES ($1, $2, $3, $4, 'apply', 'olga', 'card', $5)",
                    decision.decision_id,
                    decision.session_id,
                    decision.seq,
                    decision.proposal_id,
                    uuid.uuid4(),
                )
        logged: list[str] = []

        def log_statements(dbapi_connection: Any, _: Any) -> None:
            dbapi_connection.driver_connection.add_query_logger(lambda query: logged.append(query.query))

        event.listen(runtime.engine.sync_engine, "connect", log_statements)
        await runtime.engine.dispose()  # every connection from now on logs its statements
        async with runtime.engine.connect() as conn:
            await driver_connection(conn)  # a new connection's own set-up, not counted
        await asyncio.sleep(0)
        logged.clear()
        # The requests of a batch (with a message twice in it), and the same batch again: one statement each time.
        await runtime.routes[PROPOSALS_PROPOSED](fetched(*proposed, proposed[1]))
        await runtime.routes[PROPOSALS_PROPOSED](fetched(*proposed))
        await asyncio.sleep(0)  # asyncpg hands each statement to its loggers in a callback of its own
        ours = [
            query for query in logged if "gateway." in query or "BEGIN" in query or "COMMIT" in query
        ]  # not asyncpg's type introspection
        assert len(ours) == 2 and all(query.startswith("WITH claimed AS (") for query in ours), ours
        steps = [
            StepEnded(session_id="s1", turn_id="ts1", step=0, tool_call_ids=("c1", "c2")),
            StepEnded(session_id="s2", turn_id="ts2", step=0, tool_call_ids=("c3",)),
            StepEnded(session_id="s3", turn_id="ts3", step=0, tool_call_ids=("c4",)),
        ]
        await runtime.routes[STUDIO_TURNS](fetched(*steps))
        batch = fetched(*outcomes, outcomes[0])  # the same message twice in one fetch: handled once
        await runtime.routes[PROPOSALS_OUTCOMES](batch)
        await runtime.routes[PROPOSALS_OUTCOMES](batch)  # and the whole batch delivered again

        async with runtime.engine.connect() as conn:
            pg = await driver_connection(conn)
            requests = {
                r["tool_call_id"]: (r["status"], r["stale"], r["resolved_by"])
                for r in await pg.fetch(
                    "SELECT tool_call_id, status, stale, resolved_by FROM gateway.projected_proposals"
                )
            }
            recorded = {
                r["decision_id"]: r["outcome"]["outcome"]
                for r in await pg.fetch("SELECT decision_id, outcome FROM gateway.decisions")
            }
            turns = {
                r["session_id"]: r["continued_at"] is not None
                for r in await pg.fetch("SELECT session_id, continued_at FROM gateway.turns")
            }
            sent = [
                json.loads(r["payload"])
                for r in await pg.fetch(
                    "SELECT payload FROM gateway.outbox WHERE topic = $1 ORDER BY id", "studio.continuations"
                )
            ]
    finally:
        await runtime.engine.dispose()
    assert requests == {
        "c1": ("applied", False, "user_olga"),
        "c2": ("declined", False, "user_olga"),
        "c3": ("applied", False, "user_olga"),
        "c4": ("pending", True, None),
    }
    assert recorded == {"d1": "applied", "d2": "declined", "d2b": "applied", "d3": "applied", "d4": "stale"}
    assert turns == {"s1": True, "s2": True, "s3": False}
    assert sorted((c["session_id"], [(d["seq"], d["outcome"]) for d in c["decisions"]]) for c in sent) == [
        ("s1", [(1, "applied"), (2, "declined")]),
        ("s2", [(1, "applied")]),
    ]
    continued = [(e.session_id, e.turn_id) for e in feed.published if isinstance(e, TurnContinuedEvent)]
    assert sorted(continued) == [("s1", "ts1"), ("s2", "ts2")]


async def test_the_memory_store_reads_a_batch_of_agents_in_one_statement_and_forgets_what_it_writes(
    endpoints: Endpoints,
) -> None:
    """The edits repository against the real database: :meth:`read_agent_memories` reads every agent asked for, with
    its Memory, in one statement; :meth:`agent_memory` then answers from it (an unknown agent as unknown) without
    a statement, until the repository writes that agent's Memory, after which it reads it again."""
    database_url = await create_database(endpoints.database_url, f"memory_{uuid.uuid4().hex[:8]}")
    settings = EditsSettings(
        database_url=database_url, kafka_bootstrap_servers=endpoints.kafka, service_key=secrets.token_urlsafe(48)
    )
    runtime = ServiceRuntime(
        settings, tables=edits_tables.shared, migrations=EDITS_MIGRATIONS, schema=edits_tables.SCHEMA
    )
    try:
        await runtime.migrate()
        async with runtime.engine.begin() as conn:
            pg = await driver_connection(conn)
            await pg.execute("INSERT INTO edits.orgs (org_id, name) VALUES ('o', 'Acme')")
            for agent_id in ("a1", "a2"):
                await pg.execute("INSERT INTO edits.agents (agent_id, org_id, name) VALUES ($1, 'o', $1)", agent_id)
                await EditsRepository(conn).create_memory(agent_id, "olga")
        async with runtime.engine.begin() as conn:
            pg = await driver_connection(conn)
            logged: list[str] = []
            pg.add_query_logger(lambda query: logged.append(query.query))

            async def statements() -> int:
                await asyncio.sleep(0)  # asyncpg hands each statement to its loggers in a callback of its own
                return len(logged)

            repo = EditsRepository(conn)
            await repo.read_agent_memories(["a1", "a2", "ghost"])
            assert await statements() == 1
            agent, live = await repo.agent_memory("a2")
            assert agent is not None and agent.agent_id == "a2" and live is not None and live.version == 0
            assert await repo.agent_memory("ghost") == (None, None)
            await repo.read_agent_memories(["a1"])  # read already
            assert await statements() == 1
            written = await repo.write_memory("o", "a1", "New.\n", expected_version=0, actor="olga")
            assert written == 1
            agent, live = await repo.agent_memory("a1")
            assert await statements() == 3  # the write, then a1 read again
            assert live is not None and (live.version, live.content) == (1, "New.\n")
    finally:
        await runtime.engine.dispose()


def _stored(proposal_id: str, seq: int) -> StoredProposal:
    return StoredProposal(
        proposal_id=proposal_id,
        session_id="s",
        seq=seq,
        turn_id="t",
        step=0,
        tool_call_id=f"c{seq}",
        tool="studio_edit_memory",
        kind="memory",
        action="edit",
        agent_id="a1",
        target={"kind": "memory", "agent_id": "a1", "label": "Memory of Ada"},
        base={"version": 1, "hash": "h"},
        proposed_hash="h2",
        payload={"content": "New.\n", "org_id": "o"},
        result={"ok": True},
    )


async def test_the_proposal_store_writes_many_proposals_and_their_changes_in_one_statement_each(
    endpoints: Endpoints,
) -> None:
    """Against the real database: a batch's new proposals go in one statement; its changes, in order, in one
    statement per set of fields (a proposal's changes taken together, the later over the earlier); held as the
    transaction's last write, they go with its outbox rows."""
    database_url = await create_database(endpoints.database_url, f"proposals_{uuid.uuid4().hex[:8]}")
    settings = EditsSettings(
        database_url=database_url, kafka_bootstrap_servers=endpoints.kafka, service_key=secrets.token_urlsafe(48)
    )
    runtime = ServiceRuntime(
        settings, tables=edits_tables.shared, migrations=EDITS_MIGRATIONS, schema=edits_tables.SCHEMA
    )
    when = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    try:
        await runtime.migrate()
        async with runtime.unit_of_work() as uow:
            await uow.proposals.add_many([_stored("p1", 1), _stored("p2", 2), _stored("p3", 3), _stored("p4", 4)])
        async with runtime.unit_of_work() as uow:
            await uow.proposals.update_many(
                [
                    ("p1", {"stale": True}),
                    ("p4", {"stale": True}),
                    ("p2", {"stale": True}),
                    ("p4", {"stale": False}),
                    ("p1", {"status": "applied", "stale": False, "resolved_by": "olga", "resolved_at": when}),
                    ("p3", {"status": "declined", "stale": False, "resolved_by": "olga", "resolved_at": when}),
                ],
                last=True,
            )
            await uow.emit(STUDIO_TURNS, "s", step(1))
        async with runtime.unit_of_work() as uow:
            stored = await uow.proposals.get_many(["p1", "p2", "p3", "p4"])
        async with runtime.engine.connect() as conn:
            rows = await conn.scalar(select(func.count()).select_from(edits_tables.outbox))
    finally:
        await runtime.engine.dispose()
    assert {p: (s.status, s.stale, s.resolved_by, s.resolved_at) for p, s in stored.items()} == {
        "p1": ("applied", False, "olga", when),
        "p2": ("pending", True, None, None),
        "p3": ("declined", False, "olga", when),
        "p4": ("pending", False, None, None),
    }
    assert stored["p1"].target == {"kind": "memory", "agent_id": "a1", "label": "Memory of Ada"}
    assert rows == 1
