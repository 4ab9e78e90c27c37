"""The TypeScript coach (``examples/coach-ts``, KafkaJS) through a whole turn against the real services: it opens a
session, reads Memory and proposes an edit; the request is decided over HTTP; the coach prints the continuation. Its
messages are read back off Kafka and parsed by the services' own contracts. ``make test-coach-ts`` runs it after a
clean ``npm ci``; in the suite, the packages are installed from the lockfile when they are missing."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from assent.contracts import SessionOpened, StepEnded, ToolCall, parse_message
from tests.conftest import OPERATOR, Stack, new_world, wait_for

pytestmark = pytest.mark.integration

COACH = Path(__file__).resolve().parents[1] / "examples" / "coach-ts"


def npm(*args: str) -> None:
    done = subprocess.run(["npm", *args], cwd=COACH, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"npm {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="module")
def built() -> Path:
    """The coach compiled (``npm run build``), its packages installed from package-lock.json if missing."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed: the TypeScript coach needs Node.js 20 or later")
    if not (COACH / "node_modules" / ".package-lock.json").exists():
        npm("ci", "--no-audit", "--no-fund")
    npm("run", "--silent", "build")
    return COACH / "dist" / "coach.js"


def test_the_generated_types_are_current(built: Path) -> None:
    """The committed types are what the generator writes from contracts/schemas now (``npm run generate``)."""
    done = subprocess.run(
        ["node", "scripts/generate-types.mjs", "--check", "src/contracts"],
        cwd=COACH,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


async def test_the_typescript_coach_completes_a_turn_decided_over_http(stack: Stack, built: Path) -> None:
    async with stack.http() as http:
        world = await new_world(http, memory="Prefer short answers.\n")
        coach = await asyncio.create_subprocess_exec(
            "node",
            str(built),
            "--bootstrap-servers",
            stack.endpoints.kafka,
            "--topic-prefix",
            stack.prefix,
            "--org",
            world.org_id,
            "--guild",
            world.guild_id,
            "--operator",
            OPERATOR,
            "--agent",
            world.agent_id,
            "--line",
            "Quote the order number.",
            "--timeout-seconds",
            "60",
            cwd=COACH,
            env={**os.environ, "KAFKA_SECURITY_PROTOCOL": "PLAINTEXT"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert coach.stdout is not None
        events: dict[str, dict[str, Any]] = {}

        async def next_event() -> dict[str, Any]:
            assert coach.stdout is not None
            line = await asyncio.wait_for(coach.stdout.readline(), 60)
            if not line:
                assert coach.stderr is not None
                raise AssertionError(f"the coach stopped: {(await coach.stderr.read()).decode()}")
            event: dict[str, Any] = json.loads(line)
            events[event["event"]] = event
            return event

        try:
            assert (await next_event())["event"] == "session"
            memory = await next_event()
            assert memory == {"event": "memory", "version": memory["version"], "content": "Prefer short answers.\n"}
            proposed = await next_event()
            assert proposed["event"] == "proposed" and proposed["pending"] is True, proposed
            waiting = await next_event()
            assert waiting["event"] == "waiting" and waiting["tool_call_ids"] == [proposed["tool_call_id"]]
            session_id = events["session"]["session_id"]

            async def turn_waits() -> bool:
                response = await http.get(f"/api/studio/sessions/{session_id}/pending")
                return response.status_code == 200 and response.json()["waiting_on"] == 1

            await wait_for(turn_waits)
            decision = await http.post(
                f"/api/studio/sessions/{session_id}/edits/{proposed['seq']}", json={"decision": "apply"}
            )
            assert decision.status_code == 200, decision.text

            continuation = await next_event()
            assert continuation["event"] == "continuation"
            assert [(d["seq"], d["outcome"]) for d in continuation["decisions"]] == [(proposed["seq"], "applied")]
            assert continuation["text"], continuation
            assert await asyncio.wait_for(coach.wait(), 30) == 0
        finally:
            if coach.returncode is None:
                coach.kill()
                await coach.wait()

        live = await http.get(f"/api/workspace/agents/{world.agent_id}/memory")
        assert live.json()["content"] == "Prefer short answers.\nQuote the order number.\n"

    # What KafkaJS put on the wire is what the services read: the envelope, the key and the message-type header.
    def mine(record: Any) -> bool:
        return record.key == session_id.encode()

    opened = await stack.records(stack.topic("studio.sessions"), mine)
    calls = await stack.records(stack.topic("edits.tool-calls"), mine)
    ended = await stack.records(stack.topic("studio.turns"), mine)
    assert [type(parse_message(r.value)) for r in opened] == [SessionOpened]
    assert [parse_message(r.value).tool for r in calls] == ["studio_read_memory", "studio_edit_memory"]  # type: ignore[attr-defined]
    assert all(isinstance(parse_message(r.value), ToolCall) for r in calls)
    assert [type(parse_message(r.value)) for r in ended] == [StepEnded]
    for record in opened + calls + ended:
        headers = dict(record.headers)
        assert headers["message-type"] == json.loads(record.value)["type"].encode()
