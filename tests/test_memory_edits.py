"""A memory-edit proposal end to end, against real Kafka, PostgreSQL and Redis, services as processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from assent.coach import CoachClient, CoachSession, CoachTurn
from assent.contracts import ToolCall, ToolResult
from assent.hashing import content_hash
from tests.conftest import OPERATOR, Stack, World, new_world, wait_for

pytestmark = pytest.mark.integration


async def open_turn(coach: CoachClient, world: World) -> CoachTurn:
    session = await coach.open_session(org_id=world.org_id, source_guild_id=world.guild_id, operator_user_id=OPERATOR)
    return session.begin_turn()


async def propose(turn: CoachTurn, agent_id: str, content: str, base_version: int, reason: str = "why") -> ToolResult:
    return await turn.call(
        "studio_edit_memory",
        {"agent_id": agent_id, "content": content, "base_version": base_version, "reason": reason},
    )


async def pending(http: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    response = await http.get(f"/api/studio/sessions/{session_id}/pending")
    assert response.status_code == 200, response.text
    return response.json()


async def wait_pending(http: httpx.AsyncClient, session_id: str, n: int) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        response = await http.get(f"/api/studio/sessions/{session_id}/pending")
        if response.status_code == 404:  # the gateway has not heard of the session yet
            return None
        assert response.status_code == 200, response.text
        body = response.json()
        return body if body["waiting_on"] == n else None

    return await wait_for(probe)


async def memory(http: httpx.AsyncClient, agent_id: str) -> dict[str, Any]:
    response = await http.get(f"/api/workspace/agents/{agent_id}/memory")
    assert response.status_code == 200, response.text
    return response.json()


async def test_apply_writes_as_the_operator_and_resumes_the_turn(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http, memory="Prefer short answers.\n")
        turn = await open_turn(coach, world)
        read = await turn.call("studio_read_memory", {"agent_id": world.agent_id})
        assert read.ok and read.output is not None
        assert read.output["content"] == "Prefer short answers.\n"
        base_version = read.output["version"]

        new_text = "Prefer short answers.\nAlways cite the order number.\n"
        result = await propose(turn, world.agent_id, new_text, base_version, "refund mixups")
        assert result.ok, result.error
        widget = result.widget
        assert widget is not None and widget.type == "studio_edit_request" and widget.await_operator
        assert widget.target.agent_id == world.agent_id and widget.target.kind == "memory"
        assert widget.base.version == base_version
        assert widget.base.hash == content_hash("Prefer short answers.\n")
        assert widget.proposed_hash == content_hash(new_text)
        assert (widget.lines.added, widget.lines.removed) == (1, 0)
        assert (await memory(http, world.agent_id))["content"] == "Prefer short answers.\n", "proposing wrote"

        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        board = await wait_pending(http, turn.session.session_id, 1)
        assert board["summary"] == "Waiting on 1 decision"
        assert {s: n for s, n in board["sections"].items() if n} == {"Agents": 1} and board["agents"] == {
            world.agent_id: 1
        }
        assert board["items"][0]["seq"] == seq and board["items"][0]["apply_label"] == "Apply edit"

        card = (await http.get(f"/api/studio/sessions/{turn.session.session_id}/edits/{seq}")).json()
        assert card["live"]["text"] == "Prefer short answers.\n" and card["proposal"]["text"] == new_text
        assert card["stale"] is False and card["status"] == "pending"
        assert "+Always cite the order number." in card["diff"]

        decided = await http.post(
            f"/api/studio/sessions/{turn.session.session_id}/edits/{seq}", json={"decision": "apply"}
        )
        assert decided.status_code == 200, decided.text
        assert decided.json()["outcome"] == "applied" and decided.json()["resolved_by"] == OPERATOR

        live = await memory(http, world.agent_id)
        assert live["content"] == new_text and live["version"] == base_version + 1
        history = (await http.get(f"/api/workspace/agents/{world.agent_id}/memory/history")).json()
        last = history[-1]
        assert last["version"] == base_version + 1 and last["author_user_id"] == OPERATOR
        assert last["tool_call_id"] == result.tool_call_id and last["tool_name"] == "studio_edit_memory"
        assert last["studio_session_id"] == turn.session.session_id and last["studio_seq"] == seq

        continuation = await turn.continuation()
        assert [(d.seq, d.outcome, d.resolved_by) for d in continuation.decisions] == [(seq, "applied", OPERATOR)]
        assert (await pending(http, turn.session.session_id))["waiting_on"] == 0


async def test_out_of_band_change_makes_apply_409_and_decline_still_works(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        base = await memory(http, world.agent_id)
        result = await propose(turn, world.agent_id, "Coach's version.\n", base["version"])
        assert result.ok
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        url = f"/api/studio/sessions/{turn.session.session_id}/edits/{seq}"
        await wait_pending(http, turn.session.session_id, 1)

        moved = await http.put(f"/api/workspace/agents/{world.agent_id}/memory", json={"content": "Someone else's.\n"})
        assert moved.status_code == 200, moved.text
        card = (await http.get(url)).json()
        assert card["stale"] is True and card["live"]["text"] == "Someone else's.\n"

        refused = await http.post(url, json={"decision": "apply"})
        assert refused.status_code == 409, refused.text
        assert refused.json()["outcome"] == "stale"
        assert (await memory(http, world.agent_id))["content"] == "Someone else's.\n"
        board = await pending(http, turn.session.session_id)
        assert board["waiting_on"] == 1 and board["items"][0]["stale"] is True

        declined = await http.post(url, json={"decision": "decline"})
        assert declined.status_code == 200, declined.text
        assert declined.json()["outcome"] == "declined"
        assert (await memory(http, world.agent_id))["content"] == "Someone else's.\n"
        continuation = await turn.continuation()
        assert [d.outcome for d in continuation.decisions] == ["declined"]


async def test_a_request_resolves_once(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        base = await memory(http, world.agent_id)
        result = await propose(turn, world.agent_id, "Once.\n", base["version"])
        await turn.end_step()
        url = f"/api/studio/sessions/{turn.session.session_id}/edits/{turn.calls[result.tool_call_id].seq}"
        await wait_pending(http, turn.session.session_id, 1)

        first = await http.post(url, json={"decision": "apply"})
        assert first.status_code == 200, first.text
        for decision in ("apply", "decline"):
            again = await http.post(url, json={"decision": decision})
            assert again.status_code == 422, again.text
            assert "already applied" in again.json()["detail"]
        history = (await http.get(f"/api/workspace/agents/{world.agent_id}/memory/history")).json()
        assert sum(1 for rev in history if rev["tool_call_id"] == result.tool_call_id) == 1


async def test_concurrent_decisions_resolve_once(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        base = await memory(http, world.agent_id)
        result = await propose(turn, world.agent_id, "Raced.\n", base["version"])
        url = f"/api/studio/sessions/{turn.session.session_id}/edits/{turn.calls[result.tool_call_id].seq}"
        await wait_pending(http, turn.session.session_id, 1)

        decisions = ("apply", "decline", "apply")
        answers = await asyncio.gather(*(http.post(url, json={"decision": d}) for d in decisions))
        assert sorted(a.status_code for a in answers) == [200, 422, 422], [a.text for a in answers]
        ((decision, won),) = [(d, a) for d, a in zip(decisions, answers, strict=True) if a.status_code == 200]
        applied = decision == "apply"
        assert won.json()["outcome"] == ("applied" if applied else "declined"), won.text
        history = (await http.get(f"/api/workspace/agents/{world.agent_id}/memory/history")).json()
        assert sum(1 for rev in history if rev["tool_call_id"] == result.tool_call_id) == (1 if applied else 0)
        live = await memory(http, world.agent_id)
        if applied:
            assert (live["content"], live["version"]) == ("Raced.\n", base["version"] + 1)
        else:
            assert (live["content"], live["version"]) == (base["content"], base["version"])


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("wrong_base_version", 409, "stale_base_version"),
        ("outside_source_guild", 422, "agent_out_of_reach"),
        ("retired_agent", 422, "agent_out_of_reach"),
        ("over_byte_cap", 422, "content_too_large"),
        ("unknown_agent", 404, "unknown_agent"),
        ("missing_reason", 422, "invalid_arguments"),
        ("no_change", 422, "no_change"),
        ("nul_in_content", 422, "invalid_arguments"),
    ],
)
async def test_refused_proposals_say_why_and_leave_no_pending_item(
    stack: Stack, case: str, status: int, code: str
) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http, memory="Live.\n")
        turn = await open_turn(coach, world)
        version = (await memory(http, world.agent_id))["version"]
        args: dict[str, Any] = {"agent_id": world.agent_id, "content": "New.\n", "base_version": version, "reason": "r"}
        if case == "wrong_base_version":
            args["base_version"] = version - 1
        elif case == "outside_source_guild":
            args["agent_id"] = world.outsider_id
            args["base_version"] = (await memory(http, world.outsider_id))["version"]
        elif case == "retired_agent":
            retired = await http.patch(f"/api/workspace/agents/{world.agent_id}", json={"live": False})
            assert retired.status_code == 200, retired.text
        elif case == "over_byte_cap":
            args["content"] = "x" * (32 * 1024 + 1)
        elif case == "unknown_agent":
            args["agent_id"] = "agent_that_does_not_exist"
        elif case == "missing_reason":
            del args["reason"]
        elif case == "no_change":
            args["content"] = "Live.\n"
        elif case == "nul_in_content":
            args["content"] = "New.\x00\n"

        refused = await turn.call("studio_edit_memory", args)
        assert not refused.ok and refused.widget is None and refused.error is not None
        assert (refused.error.status, refused.error.code) == (status, code), refused.error
        assert refused.error.message

        # A later valid request of the same session shows up alone: the refused one left nothing behind.
        target = world.other_agent_id
        accepted = await propose(turn, target, "Greet by first name.\n", (await memory(http, target))["version"])
        assert accepted.ok, accepted.error
        board = await wait_pending(http, turn.session.session_id, 1)
        assert [item["seq"] for item in board["items"]] == [turn.calls[accepted.tool_call_id].seq]
        missing = await http.get(
            f"/api/studio/sessions/{turn.session.session_id}/edits/{turn.calls[refused.tool_call_id].seq}"
        )
        assert missing.status_code == 404
        assert (await memory(http, world.agent_id))["content"] == "Live.\n"


async def test_two_request_turn_continues_exactly_once(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        session = await coach.open_session(
            org_id=world.org_id, source_guild_id=world.guild_id, operator_user_id=OPERATOR
        )
        # Marker turns of the same session, paused before the turn under test (so Continue still means that
        # turn), each waiting on a call not made yet. Making the call later continues the marker at once.
        markers = [await armed_marker(session) for _ in range(4)]
        turn = session.begin_turn()
        first = await propose(turn, world.agent_id, "One.\n", (await memory(http, world.agent_id))["version"])
        second = await propose(
            turn, world.other_agent_id, "Two.\n", (await memory(http, world.other_agent_id))["version"]
        )
        refused = await propose(turn, world.outsider_id, "Three.\n", 1)
        assert first.ok and second.ok and not refused.ok
        ended = await turn.end_step()
        assert set(ended.tool_call_ids) == {first.tool_call_id, second.tool_call_id}
        sid = turn.session.session_id
        board = await wait_pending(http, sid, 2)
        assert board["summary"] == "Waiting on 2 decisions" and board["agents"] == {
            world.agent_id: 1,
            world.other_agent_id: 1,
        }

        def continuations_of_turn(record: Any) -> bool:
            body = json.loads(record.value)
            return body["session_id"] == sid and body["turn_id"] == turn.turn_id

        seq1, seq2 = turn.calls[first.tool_call_id].seq, turn.calls[second.tool_call_id].seq
        assert (
            await http.post(f"/api/studio/sessions/{sid}/edits/{seq1}", json={"decision": "apply"})
        ).status_code == 200
        early = await http.post(f"/api/studio/sessions/{sid}/continue")
        assert early.status_code == 409 and "waiting on 1 decision" in early.json()["detail"]
        await continue_markers(markers[0], markers[1], world)
        assert await stack.records(stack.topic("studio.continuations"), continuations_of_turn) == []

        assert (
            await http.post(f"/api/studio/sessions/{sid}/edits/{seq2}", json={"decision": "decline"})
        ).status_code == 200
        continuation = await turn.continuation()
        assert [(d.seq, d.outcome) for d in continuation.decisions] == [(seq1, "applied"), (seq2, "declined")]
        assert "applied" in continuation.text and "declined" in continuation.text
        await continue_markers(markers[2], markers[3], world)
        sent = await stack.records(stack.topic("studio.continuations"), continuations_of_turn)
        assert len(sent) == 1

        again = await http.post(f"/api/studio/sessions/{sid}/continue")
        assert again.status_code == 200, again.text
        assert again.json()["id"] == str(continuation.id) and again.json()["sends"] == 2
        resent = await wait_for(
            lambda: _records_if(stack.records(stack.topic("studio.continuations"), continuations_of_turn), 2)
        )
        assert {json.loads(r.value)["id"] for r in resent} == {str(continuation.id)}


async def armed_marker(session: CoachSession) -> tuple[CoachTurn, str]:
    """A turn that pauses now, waiting on a call id the gateway has not heard of (so it stays open)."""
    marker = session.begin_turn()
    call_id = f"call_marker_{uuid.uuid4().hex}"
    await marker.end_step((call_id,))
    return marker, call_id


async def continue_markers(earlier: tuple[CoachTurn, str], later: tuple[CoachTurn, str], world: World) -> None:
    """Continue two marker turns one after the other; return once the later one's continuation is read.

    Making a marker's call (refused: the agent is out of reach) settles the session under its lock, and that
    settling looks at every open turn of the session, so whatever the projection says of the turn under test
    is acted on by the earlier marker's transaction at the latest. The later marker commits after it, and
    the gateway's outbox publishes in commit order on the session's partition: once the later continuation
    is read, any continuation of the turn under test is already on the topic.
    """
    for marker, call_id in (earlier, later):
        await marker.send(
            "studio_edit_memory",
            {"agent_id": world.outsider_id, "content": "Marker.\n", "base_version": 1, "reason": "marker"},
            tool_call_id=call_id,
        )
        continued = await marker.continuation()
        assert [(d.tool_call_id, d.outcome) for d in continued.decisions] == [(call_id, "refused")]


async def _records_if(records: Any, n: int) -> Any:
    found = await records
    return found if len(found) == n else None


async def test_http_refuses_client_mistakes_with_4xx(stack: Stack) -> None:
    async with stack.http() as http:
        assert (
            await httpx.AsyncClient(base_url=stack.gateway_url).get("/api/studio/sessions/x/pending")
        ).status_code == 401
        bad_token = {"Authorization": "Bearer nope"}
        assert (await http.get("/api/studio/sessions/x/pending", headers=bad_token)).status_code == 401
        assert (await http.get("/api/studio/sessions/nope/pending")).status_code == 404
        assert (await http.get("/api/studio/sessions/nope/edits/1")).status_code == 404
        assert (await http.get("/api/studio/sessions/nope/edits/one")).status_code == 422
        assert (await http.post("/api/studio/sessions/nope/edits/1", json={"decision": "grant"})).status_code == 422
        assert (await http.post("/api/studio/sessions/nope/edits/1", content=b"{not json")).status_code == 422
        assert (await http.post("/api/studio/sessions/nope/edits/1", json={"decision": "apply"})).status_code == 404
        assert (await http.post("/api/studio/sessions/nope/continue")).status_code == 404
        assert (await http.get("/api/workspace/agents/nope/memory")).status_code == 404
        assert (
            await http.post("/api/workspace/guilds", json={"guild_id": "g", "org_id": "nope", "name": "n"})
        ).status_code == 404
        assert (await http.get("/api/studio/sessions/x/edits/2147483648")).status_code == 422
        assert (await http.post("/api/studio/sessions/x/edits/-1", json={"decision": "apply"})).status_code == 422
        assert (await http.get("/api/studio/sessions/a%00b/pending")).status_code == 422
        assert (await http.get("/api/workspace/agents/a%00b/memory")).status_code == 422
        assert (await http.post("/api/workspace/orgs", json={"org_id": "a\x00", "name": "n"})).status_code == 422
        assert (await http.post("/api/workspace/orgs", json={"org_id": "a" * 201, "name": "n"})).status_code == 422
        assert (await http.put("/api/workspace/agents/nope/memory", json={"content": "x\x00"})).status_code == 422
        assert (await http.put("/api/workspace/agents/nope/memory", json={"content": "x"})).status_code == 404
        openapi = (await http.get("/openapi.json")).json()
        assert "/api/studio/sessions/{session_id}/edits/{seq}" in openapi["paths"]


async def test_the_live_stream_announces_each_change_of_the_session(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        await wait_pending(http, sid, 0)  # the stream is the organisation's once the gateway knows the session
        seen: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()

        async def open_streams() -> float:
            metrics = (await http.get("/metrics")).text
            return next(
                float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("assent_live_streams ")
            )

        before = await open_streams()

        async def read() -> None:
            async with http.stream("GET", f"/api/studio/sessions/{sid}/events") as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                name = ""
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        name = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        await seen.put((name, json.loads(line.removeprefix("data: "))))

        reader = asyncio.create_task(read())
        try:
            assert (await asyncio.wait_for(seen.get(), 15))[0] == "ready"
            assert await open_streams() == before + 1
            result = await propose(turn, world.agent_id, "Streamed.\n", (await memory(http, world.agent_id))["version"])
            seq = turn.calls[result.tool_call_id].seq
            await turn.end_step()
            names = []
            while "turn.step_ended" not in names or "proposal.proposed" not in names:
                name, event = await asyncio.wait_for(seen.get(), 15)
                assert event["session_id"] == sid
                names.append(name)
            answer = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "decline"})
            assert answer.status_code == 200, answer.text
            name, event = await asyncio.wait_for(seen.get(), 15)
            assert name == "proposal.decided" and event["seq"] == seq and event["outcome"]["outcome"] == "declined"
            name, event = await asyncio.wait_for(seen.get(), 15)
            assert name == "turn.continued" and event["turn_id"] == turn.turn_id
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

        # The client went: the gateway ends the stream without waiting for an event or a keep-alive.
        async def closed() -> bool:
            return await open_streams() == before

        await wait_for(closed, timeout=5)


async def test_tools_the_service_does_not_handle_yet_are_refused(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        # No kind names this tool, so the coach cannot route it: publish it straight to the edits topic.
        call = ToolCall(
            session_id=turn.session.session_id,
            seq=turn.session.next_seq(),
            turn_id=turn.turn_id,
            step=turn.step,
            tool_call_id=f"call_{uuid.uuid4().hex}",
            tool="studio_edit_made_up_thing",
            arguments={"content": "y"},
            session=turn.session.context,
        )
        answer = coach.expect_result(call.tool_call_id)
        producer = AIOKafkaProducer(bootstrap_servers=stack.endpoints.kafka)
        await producer.start()
        try:
            await producer.send_and_wait(
                stack.topic("edits.tool-calls"),
                call.to_bytes(),
                key=call.session_id.encode(),
                headers=[("message-type", call.type.encode())],
            )
        finally:
            await producer.stop()
        refused = await asyncio.wait_for(answer, 15)
        assert not refused.ok and refused.error is not None
        assert (refused.error.status, refused.error.code) == (422, "unsupported_tool")


async def test_a_closed_session_takes_no_more_requests(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        assert (await turn.call("studio_read_memory", {"agent_id": world.agent_id})).ok
        await turn.session.close()

        async def refused() -> ToolResult | None:
            result = await propose(turn, world.agent_id, "Too late.\n", (await memory(http, world.agent_id))["version"])
            return result if not result.ok else None

        result = await wait_for(refused)  # the close travels on another topic than the calls
        assert result.error is not None and (result.error.status, result.error.code) == (409, "session_closed")


async def test_the_byte_cap_holds_on_direct_writes_and_creation(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http, memory="Live.\n")
        huge = "x" * (10 * 1024 * 1024)
        refused = await http.put(f"/api/workspace/agents/{world.agent_id}/memory", json={"content": huge})
        assert refused.status_code == 422, refused.text[:200]
        assert "cap is 32768 bytes" in refused.json()["detail"]
        at_cap = await http.put(f"/api/workspace/agents/{world.agent_id}/memory", json={"content": "y" * 32768})
        assert at_cap.status_code == 200, at_cap.text[:200]
        created = await http.post(
            "/api/workspace/agents",
            json={
                "agent_id": f"big_{world.agent_id}",
                "org_id": world.org_id,
                "guild_id": world.guild_id,
                "name": "Big",
                "memory": "z" * 32769,
            },
        )
        assert created.status_code == 422, created.text[:200]
        assert (await http.get(f"/api/workspace/agents/big_{world.agent_id}")).status_code == 404
        # The capped Memory still reads back as a result the broker accepts.
        turn = await open_turn(coach, world)
        read = await turn.call("studio_read_memory", {"agent_id": world.agent_id})
        assert read.ok and read.output is not None and read.output["content"] == "y" * 32768
