"""Delivery guarantees: crash recovery, dead letters and one trace across the services."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from dataclasses import replace
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from redis.asyncio import Redis

from assent.contracts import DecisionMade, ToolCall
from assent.runtime.kit import proposal_id_for
from assent.telemetry import trace_id_of
from assent.topics import DECISIONS, PROPOSALS_DECIDED
from edits_contract.topics import DECISIONS as EDITS_DECISIONS
from tests.conftest import OPERATOR, Stack, new_world, running_stack, wait_for
from tests.test_history import WORLD, entries_of, history_holds_once
from tests.test_memory_edits import memory, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("crash_at", ["edits.decision.before_commit", "edits.decision.after_commit"])
async def test_kill_9_while_applying_loses_nothing_and_writes_once(
    endpoints: Any, tmp_path: Any, crash_at: str
) -> None:
    async with running_stack(endpoints, tmp_path, extra_env={"ASSENT_DECISION_TIMEOUT_SECONDS": "60"}) as stack:
        async with stack.http() as http, stack.coach() as coach:
            world = await new_world(http)
            turn = await open_turn(coach, world)
            base = await memory(http, world.agent_id)
            result = await propose(turn, world.agent_id, "Survives a crash.\n", base["version"])
            assert result.ok, result.error
            await turn.end_step()
            sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
            await wait_pending(http, sid, 1)

            # Restart edits with the crash point armed: it dies with SIGKILL on its first decision.
            edits = stack.system.edits
            await asyncio.to_thread(edits.stop)
            await asyncio.to_thread(edits.start, {"ASSENT_CRASH_AT": crash_at})
            decision = asyncio.create_task(
                http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
            )
            assert await asyncio.to_thread(edits.wait_exit, 60) == -9
            await asyncio.to_thread(edits.start)

            answer = await decision
            assert answer.status_code == 200, answer.text
            assert answer.json()["outcome"] == "applied"
            live = await memory(http, world.agent_id)
            assert live["content"] == "Survives a crash.\n" and live["version"] == base["version"] + 1
            history = (await http.get(f"/api/workspace/agents/{world.agent_id}/memory/history")).json()
            assert [rev["tool_call_id"] for rev in history].count(result.tool_call_id) == 1

            decision_id = answer.json()["decision_id"]
            await turn.continuation(timeout=60)
            outcomes = await stack.records(
                stack.topic("proposals.outcomes"), lambda r: json.loads(r.value)["decision_id"] == decision_id
            )
            assert len({json.loads(r.value)["id"] for r in outcomes}) == 1
            await history_holds_once(http, sid, {seq: "applied"})


async def test_kill_9_after_the_gateway_recorded_requests_in_one_statement_records_them_once(
    endpoints: Any, tmp_path: Any
) -> None:
    """The gateway records a batch of requests in one statement with its claim, and dies right after it, before
    the offsets are committed: once back, the batch comes again and the claim drops it; the request is there
    once, and its decision and the turn's continuation go through."""
    async with running_stack(endpoints, tmp_path, extra_env={"ASSENT_DECISION_TIMEOUT_SECONDS": "60"}) as stack:
        async with stack.http() as http, stack.coach() as coach:
            world = await new_world(http)
            turn = await open_turn(coach, world)
            sid = turn.session.session_id
            await wait_pending(http, sid, 0)
            base = await memory(http, world.agent_id)

            gateway = stack.system.gateway
            await asyncio.to_thread(gateway.stop)
            await asyncio.to_thread(gateway.start, {"ASSENT_CRASH_AT": "gateway.proposals.proposed.after_commit"})
            result = await propose(turn, world.agent_id, "Recorded once.\n", base["version"])
            assert result.ok, result.error
            assert await asyncio.to_thread(gateway.wait_exit, 60) == -9
            await asyncio.to_thread(gateway.start)

            await turn.end_step()
            pending = await wait_pending(http, sid, 1)
            seq = turn.calls[result.tool_call_id].seq
            assert [item["seq"] for item in pending["items"]] == [seq]
            answer = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
            assert answer.status_code == 200, answer.text
            assert answer.json()["outcome"] == "applied"
            continuation = await turn.continuation(timeout=60)
            assert [(d.seq, d.outcome) for d in continuation.decisions] == [(seq, "applied")]
            await history_holds_once(http, sid, {seq: "applied"})


@pytest.mark.parametrize("crash_at", ["gateway.history.before_commit", "gateway.history.after_commit"])
async def test_kill_9_while_linking_the_history_leaves_no_gap_and_no_duplicate(
    endpoints: Any, tmp_path: Any, crash_at: str
) -> None:
    """The gateway dies as its history linker commits a batch (before, or right after): once back, the batch is
    linked once, and the chain verifies."""
    async with running_stack(endpoints, tmp_path, extra_env={"ASSENT_DECISION_TIMEOUT_SECONDS": "60"}) as stack:
        async with stack.http() as http, stack.coach() as coach:
            world = await new_world(http)
            await entries_of(http, WORLD, type="written")  # the world's direct writes linked: the proposal's is next
            turn = await open_turn(coach, world)
            sid = turn.session.session_id
            await wait_pending(http, sid, 0)
            base = await memory(http, world.agent_id)

            gateway = stack.system.gateway
            await asyncio.to_thread(gateway.stop)
            await asyncio.to_thread(gateway.start, {"ASSENT_CRASH_AT": crash_at})
            result = await propose(turn, world.agent_id, "Linked once.\n", base["version"])
            assert result.ok, result.error
            assert await asyncio.to_thread(gateway.wait_exit, 60) == -9
            await asyncio.to_thread(gateway.start)

            await turn.end_step()
            seq = turn.calls[result.tool_call_id].seq
            await wait_pending(http, sid, 1)
            answer = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
            assert answer.status_code == 200, answer.text
            await turn.continuation(timeout=60)
            await history_holds_once(http, sid, {seq: "applied"})


async def test_malformed_tool_call_goes_to_the_dead_letter_topic_and_the_next_is_handled(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        topic = stack.topic("edits.tool-calls")
        marker = uuid.uuid4().hex
        producer = AIOKafkaProducer(bootstrap_servers=stack.endpoints.kafka)
        await producer.start()
        try:
            poison = [
                f"not json {marker}".encode(),
                json.dumps({"type": "ToolCall", "v": 1, "marker": marker}).encode(),  # missing fields
                json.dumps({"type": "ToolCall", "v": 99, "marker": marker}).encode(),  # unknown version
                json.dumps({"type": "Nonsense", "marker": marker}).encode(),
            ]
            for body in poison:
                await producer.send_and_wait(topic, body, key=turn.session.session_id.encode())
        finally:
            await producer.stop()

        result = await turn.call("studio_read_memory", {"agent_id": world.agent_id})
        assert result.ok and result.output is not None and result.output["agent_id"] == world.agent_id

        async def dead_letters() -> list[Any] | None:
            found = await stack.records(f"{topic}.dlq", lambda r: marker.encode() in (r.value or b""))
            return found if len(found) == len(poison) else None

        letters = await wait_for(dead_letters)
        for letter in letters:
            headers = dict(letter.headers)
            assert headers["x-dlq-topic"].decode() == topic
            assert headers["x-dlq-error"]
        assert sorted(letter.value for letter in letters) == sorted(poison)


async def test_one_trace_spans_tool_call_proposal_decision_and_outcome(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        result = await propose(turn, world.agent_id, "Traced.\n", (await memory(http, world.agent_id))["version"])
        await turn.end_step()
        sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)
        answer = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert answer.status_code == 200, answer.text
        await turn.continuation()

        def trace_ids(records: list[Any]) -> set[str | None]:
            return {trace_id_of(dict(r.headers).get("traceparent", b"").decode()) for r in records}

        def body(record: Any) -> dict[str, Any]:
            try:
                parsed = json.loads(record.value)
            except (ValueError, RecursionError):  # other tests' poison messages share the topic
                return {}
            return parsed if isinstance(parsed, dict) else {}

        def of_session(record: Any) -> bool:
            return body(record).get("session_id") == sid

        call = await stack.records(
            stack.topic("edits.tool-calls"), lambda r: body(r).get("tool_call_id") == result.tool_call_id
        )
        assert len(call) == 1
        (trace_id,) = trace_ids(call)
        assert trace_id and trace_id != "0" * 32
        for topic in ("proposals.proposed", "studio.tool-results", "edits.decisions", "proposals.outcomes"):
            records = await stack.records(stack.topic(topic), of_session)
            assert records, topic
            assert trace_ids(records) == {trace_id}, topic
        # The decision went to its owner's topic only (published before the outcome that came back).
        for topic in ("proposals.decided", *(t.name for t in DECISIONS.values() if t.name != "edits.decisions")):
            assert await stack.records(stack.topic(topic), of_session) == [], topic
        assert ToolCall.model_validate_json(call[0].value).tool == "studio_edit_memory"


async def test_a_decision_an_earlier_release_left_on_the_shared_topic_is_carried_out_after_the_upgrade(
    stack: Stack,
) -> None:
    """Before each owner had a decisions topic of its own, the gateway published every decision on
    ``proposals.decided``; the owners still read it, so what was left there when the gateway was upgraded is
    carried out once, by the owner of its kind, and the turn goes on."""
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        base = await memory(http, world.agent_id)
        result = await propose(turn, world.agent_id, "Decided before the upgrade.\n", base["version"])
        assert result.ok, result.error
        await turn.end_step()
        sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)

        left = DecisionMade(
            decision_id=f"dec_{uuid.uuid4().hex}",
            proposal_id=proposal_id_for(sid, result.tool_call_id),
            session_id=sid,
            seq=seq,
            kind="memory",
            decision="apply",
            actor=OPERATOR,
        )
        await coach.publish(PROPOSALS_DECIDED, sid, left)

        continuation = await turn.continuation(timeout=60)
        assert len(continuation.decisions) == 1 and continuation.decisions[0].outcome == "applied", continuation
        live = await memory(http, world.agent_id)
        assert live["content"] == "Decided before the upgrade.\n" and live["version"] == base["version"] + 1
        outcomes = await stack.records(
            stack.topic("proposals.outcomes"), lambda r: json.loads(r.value).get("decision_id") == left.decision_id
        )
        assert [json.loads(r.value)["outcome"] for r in outcomes] == ["applied"]


async def outcome_consumers_settled_at(stack: Stack, members: int) -> bool:
    """Whether the gateways' consumer group (one for every topic they read) is stable with ``members`` members."""
    admin = AIOKafkaAdminClient(bootstrap_servers=stack.endpoints.kafka)
    await admin.start()
    try:
        (group_id,) = [
            group_id for group_id, _ in await admin.list_consumer_groups() if group_id == f"{stack.prefix}gateway"
        ]
        (response,) = await admin.describe_consumer_groups([group_id])
        (group,) = response.to_object()["groups"]
        return bool(group["state"] == "Stable" and len(group["members"]) == members)
    finally:
        await admin.close()


async def both_agents_pending(http: httpx.AsyncClient, coach: Any, text: str) -> tuple[Any, list[str], list[int]]:
    """A new world (``http`` then acts as its admin) whose turn proposes ``"<text> <agent>."`` for both its agents in
    one step and ends it: the turn, the two agents, and their requests' seqs, once both are pending."""
    world = await new_world(http)
    turn = await open_turn(coach, world)
    agents = [world.agent_id, world.other_agent_id]
    results = []
    for agent in agents:
        version = (await memory(http, agent))["version"]
        results.append(await propose(turn, agent, f"{text} {agent}.\n", version))
    await turn.end_step()
    await wait_pending(http, turn.session.session_id, 2)
    return turn, agents, [turn.calls[result.tool_call_id].seq for result in results]


async def test_decisions_work_through_any_gateway_replica(stack: Stack, tmp_path: Any) -> None:
    """Two gateway replicas share one consumer group: whichever consumes an outcome, the replica that holds
    the HTTP request answers it. The outcome travels as a ``proposal.decided`` event on the gateways' Redis
    channel; the test listens there too and sees the event of every decision it got an answer to."""
    from assent_devstack.system import ServiceProcess, free_port

    second = ServiceProcess("gateway", free_port(), stack.system.env, tmp_path / "gateway-2.log")
    assert second.url != stack.gateway_url
    await asyncio.to_thread(second.start)
    try:
        # Once both replicas share the outcomes' partitions, the two outcomes of one session (one partition) are
        # consumed by one replica, and the other replica, which answers one of the two decisions, hears it by Redis.
        await wait_for(lambda: outcome_consumers_settled_at(stack, 2), timeout=60)
    except BaseException:
        await asyncio.to_thread(second.stop)  # the test's own replica does not outlive it
        raise
    redis = Redis.from_url(stack.endpoints.redis_url)
    pubsub = redis.pubsub()
    decided: list[dict[str, Any]] = []
    subscribed = asyncio.Event()

    async def listen() -> None:
        async for message in pubsub.listen():
            if message["type"] == "subscribe":
                subscribed.set()
            elif message["type"] == "message":
                for event in json.loads(message["data"])["events"]:  # what one replica announced at once
                    if event.get("event") == "proposal.decided":
                        decided.append(event)

    listener: asyncio.Task[None] | None = None
    try:
        await pubsub.subscribe(f"{stack.prefix}assent:events")  # before listen(), which stops when unsubscribed
        listener = asyncio.create_task(listen())
        await asyncio.wait_for(subscribed.wait(), 15)
        async with stack.http() as first_http, stack.coach() as coach:
            second_http = httpx.AsyncClient(base_url=second.url, headers=dict(first_http.headers), timeout=60.0)
            async with second_http:
                turn, agents, seqs = await both_agents_pending(first_http, coach, "Replica")
                second_http.headers["Authorization"] = first_http.headers["Authorization"]  # the world's admin
                sid = turn.session.session_id
                # The first decision is answered by the first replica, the second by the second replica.
                for http, seq in zip((first_http, second_http), seqs, strict=True):
                    answer = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["outcome"] == "applied" and answer.json()["seq"] == seq
                    decision_id = answer.json()["decision_id"]

                    def on_redis(decision_id: str = decision_id) -> list[dict[str, Any]]:
                        return [e for e in decided if e["outcome"]["decision_id"] == decision_id]

                    for event in await wait_for(on_redis):
                        assert (event["session_id"], event["seq"]) == (sid, seq)
                        assert event["outcome"]["outcome"] == "applied"
                continuation = await turn.continuation()
                assert [d.outcome for d in continuation.decisions] == ["applied", "applied"]
                for agent in agents:
                    assert (await memory(second_http, agent))["content"] == f"Replica {agent}.\n"
    finally:
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
        await pubsub.aclose()
        await redis.aclose()
        await asyncio.to_thread(second.stop)


async def test_decisions_are_answered_from_the_projection_while_the_gateways_have_lost_redis(
    endpoints: Any, tmp_path: Any
) -> None:
    """Two gateway replicas lose their Redis: each decision is still answered 200, including the one whose outcome
    the other replica consumes, which no event can carry now: the replica holding the request reads the outcome
    from the projection."""
    from assent_devstack import start_redis
    from assent_devstack.system import ServiceProcess, free_port

    redis = await asyncio.to_thread(start_redis, tmp_path / "redis")
    try:
        async with running_stack(
            replace(endpoints, redis_url=redis.endpoint), tmp_path, extra_env={"ASSENT_DECISION_TIMEOUT_SECONDS": "10"}
        ) as stack:
            second = ServiceProcess("gateway", free_port(), stack.system.env, tmp_path / "gateway-2.log")
            await asyncio.to_thread(second.start)
            try:
                # Both outcomes of the session's two decisions (one partition) go to one replica; the other replica
                # answers one of the two decisions.
                await wait_for(lambda: outcome_consumers_settled_at(stack, 2), timeout=60)
                async with stack.http() as first_http, stack.coach() as coach:
                    second_http = httpx.AsyncClient(base_url=second.url, timeout=60.0)
                    async with second_http:
                        turn, agents, seqs = await both_agents_pending(first_http, coach, "Without Redis")
                        second_http.headers["Authorization"] = first_http.headers["Authorization"]
                        sid = turn.session.session_id

                        await asyncio.to_thread(redis.stop)
                        for http, seq in zip((first_http, second_http), seqs, strict=True):
                            answer = await http.post(
                                f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"}
                            )
                            assert answer.status_code == 200, answer.text
                            assert (answer.json()["outcome"], answer.json()["seq"]) == ("applied", seq)
                        continuation = await turn.continuation()
                        assert [d.outcome for d in continuation.decisions] == ["applied", "applied"]
                        for agent in agents:
                            assert (await memory(second_http, agent))["content"] == f"Without Redis {agent}.\n"
            finally:
                await asyncio.to_thread(second.stop)
    finally:
        await asyncio.to_thread(redis.stop)


async def test_a_decision_outlives_an_owner_that_is_down(endpoints: Any, tmp_path: Any) -> None:
    """With the edits service down, a decision answers 504 but stands: it applies once edits is back."""
    async with running_stack(endpoints, tmp_path, extra_env={"ASSENT_DECISION_TIMEOUT_SECONDS": "2"}) as stack:
        async with stack.http() as http, stack.coach() as coach:
            world = await new_world(http)
            turn = await open_turn(coach, world)
            base = await memory(http, world.agent_id)
            result = await propose(turn, world.agent_id, "Decided while edits was away.\n", base["version"])
            await turn.end_step()
            sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
            await wait_pending(http, sid, 1)

            await asyncio.to_thread(stack.system.edits.stop)
            late = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
            assert late.status_code == 504, late.text
            assert late.json()["decision_id"].startswith("dec_")
            card = await http.get(f"/api/studio/sessions/{sid}/edits/{seq}")
            assert card.status_code == 503  # the live text is the edits service's to tell

            await asyncio.to_thread(stack.system.edits.start)

            async def applied() -> bool:
                response = await http.get(f"/api/studio/sessions/{sid}/edits/{seq}")
                return response.status_code == 200 and response.json()["status"] == "applied"

            await wait_for(applied, timeout=60)
            assert (await memory(http, world.agent_id))["content"] == "Decided while edits was away.\n"
            continuation = await turn.continuation(timeout=60)
            assert [d.outcome for d in continuation.decisions] == ["applied"]


@pytest.mark.parametrize("crash_at", ["gateway.rules.before_commit", "gateway.rules.after_commit"])
async def test_kill_9_while_a_rule_decides_decides_once(endpoints: Any, tmp_path: Any, crash_at: str) -> None:
    """The gateway dies as its rule worker commits a rule's decision (before, or right after): once back, the
    proposal is decided by the rule once, applied once, and its turn continues once."""
    async with running_stack(endpoints, tmp_path, extra_env={"ASSENT_DECISION_TIMEOUT_SECONDS": "60"}) as stack:
        async with stack.http() as http, stack.coach() as coach:
            world = await new_world(http)
            turn = await open_turn(coach, world)
            sid = turn.session.session_id
            await wait_pending(http, sid, 0)
            base = await memory(http, world.agent_id)
            rule = {"name": "any memory edit", "match": {"kind": ["memory"]}, "decide": "apply"}
            assert (await http.put("/api/policy", json={"policy": {"rules": [rule]}, "expected_version": 0})).is_success

            gateway = stack.system.gateway
            await asyncio.to_thread(gateway.stop)
            await asyncio.to_thread(gateway.start, {"ASSENT_CRASH_AT": crash_at})
            result = await propose(turn, world.agent_id, "Decided by the rule once.\n", base["version"])
            assert result.ok, result.error
            await turn.end_step()
            assert await asyncio.to_thread(gateway.wait_exit, 60) == -9
            await asyncio.to_thread(gateway.start)

            continuation = await turn.continuation(timeout=60)
            seq = turn.calls[result.tool_call_id].seq
            assert [(d.seq, d.outcome) for d in continuation.decisions] == [(seq, "applied")]
            live = await memory(http, world.agent_id)
            assert (live["content"], live["version"]) == ("Decided by the rule once.\n", base["version"] + 1)
            assert result.widget is not None
            proposal_id = result.widget.proposal_id
            decided = await stack.records(
                stack.topic(EDITS_DECISIONS.name), lambda r: json.loads(r.value).get("proposal_id") == proposal_id
            )
            assert len({json.loads(r.value)["decision_id"] for r in decided}) == 1
            await history_holds_once(http, sid, {seq: "applied"})
