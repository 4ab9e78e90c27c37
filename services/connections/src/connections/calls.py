"""Proxied calls (``studio_call_connection_tool``) answered with no session lock held while the server works.

The kit admits a call under the session's lock, in the transaction that consumes it (the grant, the login, the tool
and the read-only policy: :meth:`connections.kinds.login.LoginKind.admit`), and records it (``connections.calls``).
Once that commits, a :class:`CallRunner` takes it: it reads the login's address and credentials, calls the server
with no transaction open and no lock held (up to the MCP timeout), then, under the session's lock, checks the call
again (a revoke, a close, a disconnect or a change of the tool's policy meanwhile refuses it), answers it on
``tools.results`` and deletes the record, in one transaction. So a slow server holds up neither the session's other
calls nor its decisions, nor the consumer that brings them.

A call is answered once: the record is taken for a lease (``lease_seconds``) and deleted by the transaction that
answers; a call whose runner stopped (the process died) is taken again once its lease is up, by whichever replica
sweeps first, and called again (its tools only read).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from uuid import UUID

from assent.contracts import ToolCall, ToolError, ToolResult
from assent.domain import Refusal
from assent.runtime import Call, Output
from assent.runtime.uow import UnitOfWork
from assent.telemetry import attach_carrier, detach
from assent.topics import TOOL_RESULTS

from .domain.logins import CallTool
from .kinds.login import LoginKind, store

log = logging.getLogger(__name__)

SWEEP_SECONDS = 30.0
"""How often a runner looks for calls no runner holds (left by a process that stopped)."""


def result_of(call: ToolCall, answer: Output | Refusal, max_bytes: int) -> ToolResult:
    """The call's ``ToolResult``: the output, or the refusal; an output over ``max_bytes`` is refused (413)."""
    fields = {
        "session_id": call.session_id,
        "seq": call.seq,
        "tool_call_id": call.tool_call_id,
        "tool": call.tool,
        "causation_id": call.id,
        "correlation_id": call.id,
    }
    if isinstance(answer, Output):
        result = ToolResult(ok=True, output=answer.data, **fields)
        if len(result.to_bytes()) <= max_bytes:
            return result
        answer = Refusal(
            413,
            "result_too_large",
            f"the result of {call.tool} is {len(result.to_bytes())} bytes; results are capped at {max_bytes} bytes",
        )
    return ToolResult(
        ok=False, error=ToolError(status=answer.status, code=answer.code, message=answer.message), **fields
    )


class CallRunner:
    """Takes admitted calls, calls their servers, and answers them (at most ``concurrency`` at a time), each step in a
    unit of work of its own (``unit_of_work``: the runtime's)."""

    def __init__(
        self,
        unit_of_work: Callable[[], AbstractAsyncContextManager[UnitOfWork]],
        kind: LoginKind,
        *,
        lease_seconds: float,
        max_result_bytes: int,
        concurrency: int = 32,
    ) -> None:
        self.unit_of_work = unit_of_work
        self.kind = kind
        self.lease = timedelta(seconds=lease_seconds)
        self.max_result_bytes = max_result_bytes
        self.limit = asyncio.Semaphore(concurrency)
        self.tasks: set[asyncio.Task[None]] = set()

    def start(self, call_id: UUID) -> None:
        """Run the call in the background (its record has committed)."""
        task = asyncio.create_task(self.run(call_id), name=f"proxied-call-{call_id}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run(self, call_id: UUID) -> None:
        """Take the call, call its server, answer it; a failure leaves the record for a later sweep."""
        try:
            async with self.limit:
                await self._run(call_id)
        except Exception:
            log.exception("the proxied call %s could not be answered now; a sweep takes it again", call_id)

    async def _run(self, call_id: UUID) -> None:
        now = datetime.now(UTC)
        async with self.unit_of_work() as uow:
            taken = await store(uow).take_call(call_id, now, now + self.lease)
            if taken is None:
                return  # answered, or held by another runner
            call = ToolCall.model_validate(taken.call)
            args = CallTool.model_validate(call.arguments)  # admitted with these arguments
            prepared = await self.kind.prepare(args, uow)
        token = attach_carrier(taken.trace)  # the call's trace goes on
        try:
            answer = prepared if isinstance(prepared, Refusal) else await self.kind.invoke(prepared)
            async with self.unit_of_work() as uow:
                await uow.lock_session(call.session_id)
                if not await store(uow).finish_call(call_id):
                    return  # another runner answered it (this one's lease ran out)
                if isinstance(answer, Output):
                    answer = await self.still_admitted(call, args, uow) or answer
                await uow.emit(TOOL_RESULTS, call.session_id, result_of(call, answer, self.max_result_bytes))
        finally:
            detach(token)

    async def still_admitted(self, call: ToolCall, args: CallTool, uow: UnitOfWork) -> Refusal | None:
        """Whether the session may still read what the call read (checked under the session's lock, as it is
        answered): open, its grant, the login, the tool."""
        session = await uow.sessions.get(call.session_id)
        if session is None or session.closed:
            return Refusal(409, "session_closed", f"session {call.session_id!r} closed while the call ran")
        admitted = await self.kind.admit(Call(call, session), args, uow)
        return admitted if isinstance(admitted, Refusal) else None

    async def sweep(self) -> None:
        """Start every call no runner holds."""
        async with self.unit_of_work() as uow:
            due = await store(uow).calls_due(datetime.now(UTC), limit=1000)
        for call_id in due:
            self.start(call_id)

    async def sweep_forever(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception:
                log.exception("looking for proxied calls to answer failed; trying again")
            await asyncio.sleep(SWEEP_SECONDS)

    async def wait(self) -> None:
        """Until every call started so far is answered (or left for a sweep)."""
        while self.tasks:
            await asyncio.gather(*self.tasks)

    async def close(self) -> None:
        """Stop the running calls (their records stay: a sweep answers them)."""
        for task in list(self.tasks):
            task.cancel()
        for task in list(self.tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
