"""The services' logs are JSON lines; a round's trail lines share the round's one trace id, in every service the
round crossed.

The round: a coach's tool call under a trace of its own (a memory edit), the request the gateway projects from
it, the operator's decision (which continues the proposal's trace), every owner's consumer of the decisions, and
the outcome back at the gateway. The stack runs with the trail on (``ASSENT_LOG_TRAIL``, tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from assent.topics import DECISIONS, PROPOSALS_OUTCOMES, PROPOSALS_PROPOSED, TOOL_CALLS, TOOL_RESULTS
from tests.conftest import Stack, wait_for
from tests.test_memory_edits import memory, new_world, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration

OWNERS = ("edits", "deployer", "connections", "routines", "access")
FIELDS = {"time", "level", "logger", "message", "service"}


def lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a service's log, each parsed as one JSON object (a line that is not one fails the test)."""
    parsed = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"{path.name}:{number} is not a JSON line: {line[:300]!r}") from None
        assert isinstance(entry, dict), line
        parsed.append(entry)
    return parsed


async def test_a_round_has_one_trace_id_in_every_service_it_crossed(stack: Stack) -> None:
    logs = {name: process.log_path for name, process in stack.system.processes.items()}
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        version = (await memory(http, world.agent_id))["version"]
        with trace.get_tracer("test").start_as_current_span("coach turn") as root:
            result = await propose(turn, world.agent_id, "Traced in the logs.\n", version)
        assert result.ok, result.error
        trace_id = format(root.get_span_context().trace_id, "032x")
        sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)
        decided = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert decided.status_code == 200, decided.text

    # uvicorn's own lines are JSON lines too: a request it cannot parse is one of its warnings.
    host, port = stack.gateway_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"NOT HTTP\r\n\r\n")
    await writer.drain()
    assert (await reader.read(100)).startswith(b"HTTP/1.1 400")
    writer.close()
    await writer.wait_closed()

    def traced() -> dict[str, list[dict[str, Any]]] | None:
        found = {
            name: [entry for entry in lines(path) if entry.get("trace_id") == trace_id] for name, path in logs.items()
        }
        handled = {
            (name, entry.get("topic"))
            for name, entries in found.items()
            for entry in entries
            if entry["logger"] == "assent.trail"
        }
        return found if ("gateway", PROPOSALS_OUTCOMES.name) in handled and found["edits"] else None

    found = await wait_for(traced, timeout=30, interval=0.5)

    # The call and its decision reached the edits service, on its own topics; the request, the call's result and
    # the outcome the gateway. (No other owner reads the decision: tests/test_metrics.py counts that exactly.)
    assert set(found) == {*OWNERS, "gateway"}
    topics = {
        name: {entry["topic"] for entry in entries if entry["logger"] == "assent.trail"}
        for name, entries in found.items()
    }
    assert topics["edits"] == {TOOL_CALLS["edits"].name, DECISIONS["edits"].name}, topics
    assert topics["gateway"] == {PROPOSALS_PROPOSED.name, PROPOSALS_OUTCOMES.name, TOOL_RESULTS.name}, topics
    # Each message of the round once per service that consumed it, by its id.
    decisions = {
        entry["message_id"]
        for entries in found.values()
        for entry in entries
        if entry["logger"] == "assent.trail" and entry["topic"] == DECISIONS["edits"].name
    }
    assert len(decisions) == 1, decisions
    for name, entries in found.items():
        trail = [(entry["topic"], entry["message_id"]) for entry in entries if entry["logger"] == "assent.trail"]
        assert len(trail) == len(set(trail)), (name, trail)
        for entry in entries:
            assert FIELDS <= entry.keys() and entry["service"] == name, entry

    # Every line of every log is JSON with the common fields; uvicorn's warning is among the gateway's.
    for name, path in logs.items():
        for entry in lines(path):
            assert FIELDS <= entry.keys() and entry["service"] == name, entry
    assert [
        entry
        for entry in lines(logs["gateway"])
        if entry["logger"].startswith("uvicorn") and entry["level"] == "WARNING"
    ]
