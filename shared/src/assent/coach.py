"""The coach's side of Assent: open a session, publish tool calls and ``StepEnded``, await results and
the turn's continuation. Tests, the demo and users' coaches all use this module.

Usage::

    async with CoachClient("127.0.0.1:9092", security=KafkaSecurity.from_env()) as coach:
        session = await coach.open_session(org_id="o1", source_guild_id="g1", operator_user_id="u1")
        turn = session.begin_turn()
        result = await turn.call("studio_edit_memory", {"agent_id": "a1", "content": "...",
                                                          "base_version": 3, "reason": "..."})
        await turn.end_step()                   # the turn waits on every call that awaits the operator
        continuation = await turn.continuation()

Security: ``security`` (a :class:`~assent.kafka_security.KafkaSecurity`, by keyword arguments or from the
``KAFKA_SECURITY_PROTOCOL``/``KAFKA_SASL_*``/``KAFKA_SSL_*`` variables the services read too) sets TLS and
SASL. Refused credentials make :meth:`CoachClient.start` raise
:class:`~assent.kafka_security.KafkaAuthenticationError`, whose message never holds the password.

Delivery: a call is published once and its result awaited with a timeout; a result or continuation that
arrives twice (at-least-once delivery) is seen once. The client reads results from the end of the topics
as they were when it started, so start it before publishing.

Topics: :meth:`CoachClient.start` creates the topics the coach writes and reads, as declared, before anything
names them (a broker that creates topics on first mention would make them with its own partition count), the
same way the services do (:func:`~assent.messaging.ensure_topics`); where the coach may not create topics they
must exist.

Owners' events: a process beside the coach (an agent's runtime) reads a topic an owner publishes for the coach with
:meth:`CoachClient.events`; an owner's contract package may wrap it (the routines' wake-ups:
``routines_contract.wakeups``).

Routing: a tool call goes to the topic of the kind that names the tool (:func:`assent.topics.route`), so the owners'
contract packages must be installed where the coach runs (:mod:`assent.owners`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Self

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from opentelemetry import trace

from . import topics
from .contracts import (
    Channel,
    CoachInfo,
    MalformedMessage,
    Requester,
    SessionClosed,
    SessionContext,
    SessionOpened,
    StepEnded,
    ToolCall,
    ToolResult,
    TurnContinuation,
    parse_message,
)
from .contracts.envelope import Message
from .kafka_security import KafkaSecurity, explain_auth_failure, kafka_kwargs
from .messaging import ensure_topics
from .telemetry import current_carrier
from .topics import STUDIO_CONTINUATIONS, STUDIO_TURNS, Topic, route

tracer = trace.get_tracer("assent.coach")


def coach_topics() -> tuple[Topic, ...]:
    """The topics a coach writes or reads."""
    return tuple(topic for topic in topics.REGISTRY if "coach" in topic.producers or "coach" in topic.consumers)


class CoachClient:
    """A connection to Assent's topics for one coach process; many sessions may share it."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        topic_prefix: str = "",
        idempotent: bool = True,
        client_id: str = "assent-coach",
        security: KafkaSecurity | None = None,
    ) -> None:
        self.prefix = topic_prefix
        self.bootstrap_servers = bootstrap_servers
        self.security = security
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers,
            client_id=client_id,
            enable_idempotence=idempotent,
            acks="all" if idempotent else 1,
            linger_ms=0,
            **kafka_kwargs(security),
        )
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            client_id=client_id,
            group_id=None,
            enable_auto_commit=False,
            **kafka_kwargs(security),
        )
        self._results: dict[str, asyncio.Future[ToolResult]] = {}
        self._continuations: dict[tuple[str, str, int], asyncio.Future[TurnContinuation]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object | TracebackType) -> None:
        await self.stop()

    async def start(self) -> None:
        """Create the coach's topics where they are missing, and connect.

        Raises :class:`~assent.kafka_security.KafkaAuthenticationError` on refused credentials, and what
        :func:`~assent.messaging.ensure_topics` raises when a topic is not as declared.
        """
        try:
            await ensure_topics(
                self.bootstrap_servers, self.prefix, coach_topics(), security=self.security, dead_letters=False
            )
            async with explain_auth_failure(self.security, self.bootstrap_servers):
                await self._producer.start()
                await self._consumer.start()
        except BaseException:
            await self._consumer.stop()
            await self._producer.stop()
            raise
        partitions = []
        for topic in (topics.TOOL_RESULTS, STUDIO_CONTINUATIONS):
            name = topic.full_name(self.prefix)
            found = await self._producer.partitions_for(name)
            partitions += [TopicPartition(name, p) for p in sorted(found)]
        self._consumer.assign(partitions)
        await self._consumer.seek_to_end(*partitions)
        for tp in partitions:
            await self._consumer.position(tp)  # fixes the start before anything is published
        self._reader = asyncio.create_task(self._read(), name="coach-reader")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._consumer.stop()
        await self._producer.stop()

    async def open_session(
        self,
        *,
        org_id: str,
        source_guild_id: str,
        operator_user_id: str,
        session_id: str | None = None,
        channel: Channel = "studio",
        requester: Requester | None = None,
        model: str | None = None,
        coach: CoachInfo | None = None,
    ) -> CoachSession:
        """Open a session. ``channel`` says where it runs (an agent's ``web`` or ``api`` chat, the ``builder``
        chat, ...), ``requester`` who the chat runs for, ``model`` which model runs it; every call carries them.
        ``coach`` names the coach for the people deciding (its channel and model, where it leaves them out, are
        ``channel`` and ``model``)."""
        if coach is not None:
            coach = coach.model_copy(update={"channel": coach.channel or channel, "model": coach.model or model})
        session_id = session_id or f"ses_{uuid.uuid4().hex}"
        await self.publish(
            topics.STUDIO_SESSIONS,
            session_id,
            SessionOpened(
                session_id=session_id,
                org_id=org_id,
                source_guild_id=source_guild_id,
                operator_user_id=operator_user_id,
                coach=coach,
            ),
        )
        context = SessionContext(
            org_id=org_id,
            source_guild_id=source_guild_id,
            operator_user_id=operator_user_id,
            channel=channel,
            requester=requester,
            model=model,
        )
        return CoachSession(self, session_id, context=context)

    async def publish(self, topic: Topic, key: str, message: Message) -> None:
        headers = [(k, v.encode()) for k, v in current_carrier().items()]
        headers.append(("message-type", message.type.encode()))
        await self._producer.send_and_wait(
            topic.full_name(self.prefix), message.to_bytes(), key=key.encode(), headers=headers
        )

    async def events(self, topic: Topic, *, group_id: str, client_id: str | None = None) -> AsyncIterator[Message]:
        """The messages of ``topic``, an owner's topic that the coach reads, for a process beside the coach to act on.

        ``group_id`` is the process's consumer group: its replicas share the messages, and a process that starts
        again resumes after the last one it took (a group's first start reads from the earliest retained). A
        message is committed once the loop asks for the next one, so one the process was handling when it died
        comes again; one that arrives twice (at-least-once delivery) is yielded once per process (its envelope id).
        One that cannot be read, or that does not belong on ``topic``, is passed over.
        """
        consumer = AIOKafkaConsumer(
            topic.full_name(self.prefix),
            bootstrap_servers=self.bootstrap_servers,
            client_id=client_id or f"{group_id}-{topic.name}",
            group_id=f"{self.prefix}{group_id}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **kafka_kwargs(self.security),
        )
        async with explain_auth_failure(self.security, self.bootstrap_servers):
            await consumer.start()
        seen: dict[uuid.UUID, None] = {}
        try:
            async for record in consumer:
                try:
                    message = parse_message(record.value or b"", topic.messages)
                except MalformedMessage:
                    continue
                if message.id in seen:
                    continue
                seen[message.id] = None
                if len(seen) > 10_000:  # only recent copies come again
                    del seen[next(iter(seen))]
                yield message
                await consumer.commit()
        finally:
            await consumer.stop()

    def expect_result(self, tool_call_id: str) -> asyncio.Future[ToolResult]:
        """The future of a call's result; register it before publishing the call."""
        return self._results.setdefault(tool_call_id, asyncio.get_running_loop().create_future())

    def forget_result(self, tool_call_id: str) -> None:
        self._results.pop(tool_call_id, None)

    def expect_continuation(self, session_id: str, turn_id: str, step: int) -> asyncio.Future[TurnContinuation]:
        key = (session_id, turn_id, step)
        return self._continuations.setdefault(key, asyncio.get_running_loop().create_future())

    def forget_continuation(self, session_id: str, turn_id: str, step: int) -> None:
        self._continuations.pop((session_id, turn_id, step), None)

    async def _read(self) -> None:
        async for record in self._consumer:
            try:
                message = parse_message(record.value or b"")
            except MalformedMessage:
                continue
            # Only what this client awaits: the topics also carry other coaches' sessions. A copy that
            # arrives after its original (at-least-once delivery) finds the future done, or gone.
            if isinstance(message, ToolResult):
                future: asyncio.Future[Any] | None = self._results.get(message.tool_call_id)
            elif isinstance(message, TurnContinuation):
                future = self._continuations.get((message.session_id, message.turn_id, message.step))
            else:
                continue
            if future is not None and not future.done():
                future.set_result(message)


class CoachSession:
    """One studio session. ``seq`` numbers the session's tool messages; this object hands them out.

    Every call carries the session's ``context``, so the replica that answers it needs nothing else.
    """

    def __init__(
        self, client: CoachClient, session_id: str, *, first_seq: int = 1, context: SessionContext | None = None
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.context = context
        self._seq = itertools.count(first_seq)

    def next_seq(self) -> int:
        return next(self._seq)

    def begin_turn(self, turn_id: str | None = None) -> CoachTurn:
        return CoachTurn(self, turn_id or f"turn_{uuid.uuid4().hex[:12]}")

    async def close(self) -> None:
        """End the session: its login grants end, and later tool calls are refused."""
        await self.client.publish(topics.STUDIO_SESSIONS, self.session_id, SessionClosed(session_id=self.session_id))


class CoachTurn:
    """One coach turn: its steps' tool calls, the step's end, and the continuation that resumes it."""

    def __init__(self, session: CoachSession, turn_id: str) -> None:
        self.session = session
        self.turn_id = turn_id
        self.step = 0
        self.results: dict[str, ToolResult] = {}
        self.calls: dict[str, ToolCall] = {}
        self.paused_step: int | None = None
        self.continuations: dict[int, TurnContinuation] = {}

    async def send(self, tool: str, arguments: Mapping[str, Any], *, tool_call_id: str | None = None) -> ToolCall:
        """Publish one tool call without waiting for its result."""
        client = self.session.client
        call = ToolCall(
            session_id=self.session.session_id,
            seq=self.session.next_seq(),
            turn_id=self.turn_id,
            step=self.step,
            tool_call_id=tool_call_id or f"call_{uuid.uuid4().hex}",
            tool=tool,
            arguments=dict(arguments),
            session=self.session.context,
        )
        client.expect_result(call.tool_call_id)
        with tracer.start_as_current_span(f"coach {tool}", kind=trace.SpanKind.PRODUCER):
            await client.publish(route(tool), call.session_id, call)
        self.calls[call.tool_call_id] = call
        return call

    async def result(self, call: ToolCall, *, timeout: float = 15.0) -> ToolResult:
        result = await asyncio.wait_for(asyncio.shield(self.session.client.expect_result(call.tool_call_id)), timeout)
        self.results[call.tool_call_id] = result
        return result

    async def call(self, tool: str, arguments: Mapping[str, Any], *, timeout: float = 15.0) -> ToolResult:
        """Publish one tool call and wait for its result."""
        return await self.result(await self.send(tool, arguments), timeout=timeout)

    def awaiting_operator(self) -> tuple[str, ...]:
        """The step's calls whose result is a request that waits for the operator."""
        return tuple(
            call_id
            for call_id, result in self.results.items()
            if result.ok
            and result.widget is not None
            and result.widget.await_operator
            and self.calls[call_id].step == self.step
        )

    async def end_step(self, tool_call_ids: tuple[str, ...] | None = None) -> StepEnded:
        """End the step. The turn then waits on ``tool_call_ids`` (default: the requests of this step)."""
        ended = StepEnded(
            session_id=self.session.session_id,
            turn_id=self.turn_id,
            step=self.step,
            tool_call_ids=self.awaiting_operator() if tool_call_ids is None else tool_call_ids,
        )
        self.session.client.expect_continuation(self.session.session_id, self.turn_id, ended.step)
        await self.session.client.publish(STUDIO_TURNS, self.session.session_id, ended)
        self.paused_step = ended.step
        self.step += 1
        return ended

    async def continuation(self, *, step: int | None = None, timeout: float = 30.0) -> TurnContinuation:
        """The message that resumes the turn after the pause at ``step`` (default: the last ended step)."""
        step = self.paused_step if step is None else step
        if step is None:
            raise RuntimeError("no step of this turn has ended")
        if step in self.continuations:
            return self.continuations[step]
        client = self.session.client
        future = client.expect_continuation(self.session.session_id, self.turn_id, step)
        continuation = await asyncio.wait_for(asyncio.shield(future), timeout)
        self.continuations[step] = continuation
        client.forget_continuation(self.session.session_id, self.turn_id, step)
        return continuation
