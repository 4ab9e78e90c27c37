"""The shared runtime under faults and bad input, against the real servers: a re-sent call, a handler that
keeps failing, two replicas sharing the partitions and one of them killed mid-traffic, and the workspace copy
other services keep."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.partitioner import DefaultPartitioner
from sqlalchemy.engine import make_url

from assent.contracts import ToolCall
from assent.topics import REGISTRY
from edits_contract.topics import TOOL_CALLS as EDITS_TOOL_CALLS
from tests.conftest import OPERATOR, Stack, new_world, running_stack, wait_for
from tests.test_memory_edits import memory, open_turn, pending, propose, wait_pending

pytestmark = pytest.mark.integration


def _body(record: Any) -> dict[str, Any]:
    try:
        parsed = json.loads(record.value)
    except (ValueError, RecursionError):  # other tests' poison messages share some topics (one nests deep)
        return {}
    return parsed if isinstance(parsed, dict) else {}


async def _records_of_call(stack: Stack, topic: str, tool_call_id: str, n: int) -> list[Any] | None:
    found = await stack.records(stack.topic(topic), lambda r: _body(r).get("tool_call_id") == tool_call_id)
    return found if len(found) == n else None


async def _refusals(stack: Stack, session_id: str, tool_call_id: str) -> list[dict[str, Any]] | None:
    found = await stack.records(
        stack.topic("studio.tool-results"), lambda r: _body(r).get("tool_call_id") == tool_call_id
    )
    refused = [body for r in found if (body := _body(r)).get("session_id") == session_id and not body.get("ok")]
    return refused or None


async def test_a_re_sent_call_gets_its_first_result_again_and_never_settles_the_turn(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        result = await propose(turn, world.agent_id, "Sent twice.\n", (await memory(http, world.agent_id))["version"])
        assert result.ok, result.error
        call = turn.calls[result.tool_call_id]

        # The same call under a new envelope, as a coach that retried its publish would send it.
        await coach.publish(EDITS_TOOL_CALLS, call.session_id, call.model_copy(update={"id": uuid.uuid4()}))
        results = await wait_for(lambda: _records_of_call(stack, "studio.tool-results", call.tool_call_id, 2))
        assert {_body(r)["id"] for r in results} == {str(result.id)}, "the replay is the first result itself"
        assert all(_body(r)["ok"] for r in results)

        await turn.end_step()
        sid, seq = call.session_id, call.seq
        board = await wait_pending(http, sid, 1)
        assert [item["seq"] for item in board["items"]] == [seq]
        answer = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert answer.status_code == 200, answer.text
        continuation = await turn.continuation()
        assert [(d.seq, d.outcome) for d in continuation.decisions] == [(seq, "applied")]
        assert "refused" not in continuation.text
        history = (await http.get(f"/api/workspace/agents/{world.agent_id}/memory/history")).json()
        assert [rev["tool_call_id"] for rev in history].count(call.tool_call_id) == 1
        proposed = await stack.records(
            stack.topic("proposals.proposed"), lambda r: _body(r).get("tool_call_id") == call.tool_call_id
        )
        assert len(proposed) == 1


async def test_a_call_at_a_taken_seq_or_with_another_sessions_call_id_is_refused_by_what_the_database_holds(
    stack: Stack,
) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        result = await propose(turn, world.agent_id, "First.\n", (await memory(http, world.agent_id))["version"])
        assert result.ok, result.error
        call = turn.calls[result.tool_call_id]
        other = (await open_turn(coach, world)).session.session_id

        # The session already holds a request at this seq; and this call id is the first session's.
        at_taken_seq = call.model_copy(update={"id": uuid.uuid4(), "tool_call_id": f"tc_{uuid.uuid4().hex}"})
        borrowed_id = call.model_copy(update={"id": uuid.uuid4(), "session_id": other, "seq": 1})
        for sent, code in ((at_taken_seq, "seq_taken"), (borrowed_id, "duplicate_tool_call")):
            await coach.publish(EDITS_TOOL_CALLS, sent.session_id, sent)
            answers = await wait_for(lambda sent=sent: _refusals(stack, sent.session_id, sent.tool_call_id))
            assert [answer["error"]["code"] for answer in answers] == [code], answers
        board = await pending(http, call.session_id)
        assert [item["seq"] for item in board["items"]] == [call.seq], "neither refused call made a request"


async def test_a_handler_that_keeps_failing_is_dead_lettered_after_its_retries_and_the_next_call_is_answered(
    endpoints: Any, tmp_path: Any
) -> None:
    env = {"ASSENT_FAIL_AT": "edits.tool_call.studio_poison_pill", "ASSENT_HANDLER_MAX_ATTEMPTS": "3"}
    async with running_stack(endpoints, tmp_path, extra_env=env) as stack:
        async with stack.http() as http, stack.coach() as coach:
            world = await new_world(http)
            turn = await open_turn(coach, world)
            poison = await turn.send("studio_read_memory", {"agent_id": world.agent_id})
            # Re-publish it as a call of the tool whose handler fails, ahead of a good call on the same partition.
            pill = poison.model_copy(
                update={"id": uuid.uuid4(), "tool": "studio_poison_pill", "tool_call_id": f"pill_{uuid.uuid4().hex}"}
            )
            await coach.publish(EDITS_TOOL_CALLS, pill.session_id, pill)
            after = await turn.call("studio_read_memory", {"agent_id": world.agent_id}, timeout=60)
            assert after.ok and after.output is not None and after.output["agent_id"] == world.agent_id

            letters = await wait_for(lambda: _records_of_call(stack, "edits.tool-calls.dlq", pill.tool_call_id, 1))
            headers = {k: v.decode() for k, v in letters[0].headers}
            assert headers["x-dlq-reason"] == "handler_failed" and headers["x-dlq-attempts"] == "3"
            assert "failure injected" in headers["x-dlq-error"]
            assert ToolCall.model_validate_json(letters[0].value).tool_call_id == pill.tool_call_id

            metrics = (await http.get(f"{stack.system.edits.url}/metrics")).text
            line = next(
                line
                for line in metrics.splitlines()
                if line.startswith("assent_messages_dead_lettered_total{")
                and 'reason="handler_failed"' in line
                and 'topic="edits.tool-calls"' in line
            )
            assert line.endswith(" 1.0"), line


async def consumer_group(stack: Stack, service: str) -> dict[str, set[TopicPartition]] | None:
    """The members of ``service``'s consumer group and the partitions each holds, while the group is stable."""
    admin = AIOKafkaAdminClient(bootstrap_servers=stack.endpoints.kafka)
    await admin.start()
    try:
        (response,) = await admin.describe_consumer_groups([f"{stack.prefix}{service}"])
        (group,) = response.to_object()["groups"]
        if group["state"] != "Stable":
            return None
        return {
            member["member_id"]: set(ConsumerProtocolMemberAssignment.decode(member["member_assignment"]).partitions())
            for member in group["members"]
        }
    finally:
        await admin.close()


async def edits_group_once(
    stack: Stack, wanted: Callable[[dict[str, set[TopicPartition]]], bool]
) -> dict[str, set[TopicPartition]] | None:
    """Edits' consumer group (:func:`consumer_group`) once it is stable as ``wanted``."""
    members = await consumer_group(stack, "edits")
    return members if members is not None and wanted(members) else None


def session_on_partition(partition: int, partitions: int) -> str:
    """A new session id whose messages go to ``partition`` of each session-keyed topic (Kafka's default
    partitioner: murmur2 of the key)."""
    while True:
        session_id = f"ses_{uuid.uuid4().hex}"
        if DefaultPartitioner()(session_id.encode(), list(range(partitions)), []) == partition:
            return session_id


async def test_calls_of_every_session_are_answered_when_one_of_two_replicas_is_killed(
    endpoints: Any, tmp_path: Any
) -> None:
    """Two replicas of edits each hold partitions of every topic edits reads, and the sessions spread over both;
    one dies with SIGKILL. Once its session in the group expires the survivor holds every partition, and every
    call, of sessions opened before and after the kill, those of the dead replica's partitions among them, is
    answered by it; none is refused. (How soon the group notices, the settings say: see
    shared/tests/test_messaging.py.)"""
    from assent_devstack.system import ServiceProcess, free_port

    async with running_stack(endpoints, tmp_path) as stack:
        second = ServiceProcess("edits", free_port(), stack.system.env, tmp_path / "edits-2.log")
        await asyncio.to_thread(second.start)
        try:
            reads = {
                topic.full_name(stack.prefix): topic.partitions for topic in REGISTRY if "edits" in topic.consumers
            }
            every = {TopicPartition(name, p) for name, n in reads.items() for p in range(n)}
            two = await wait_for(
                lambda: edits_group_once(
                    stack, lambda members: len(members) == 2 and set().union(*members.values()) == every
                ),
                timeout=60,
            )
            assert all({tp.topic for tp in held} == set(reads) for held in two.values()), two

            tool_calls = EDITS_TOOL_CALLS.full_name(stack.prefix)
            holder = {tp.partition: member for member, held in two.items() for tp in held if tp.topic == tool_calls}
            async with stack.http() as http, stack.coach() as coach:
                world = await new_world(http)

                async def open_on(partition: int) -> Any:
                    session = await coach.open_session(
                        org_id=world.org_id,
                        source_guild_id=world.guild_id,
                        operator_user_id=OPERATOR,
                        session_id=session_on_partition(partition, reads[tool_calls]),
                    )
                    return partition, session.begin_turn()

                before = [await open_on(p) for p in range(reads[tool_calls]) for _ in range(2)]
                assert {holder[p] for p, _ in before} == set(two)  # the sessions spread over both replicas
                warm = await asyncio.gather(
                    *(t.call("studio_read_memory", {"agent_id": world.agent_id}, timeout=60) for _, t in before)
                )
                assert all(r.ok for r in warm), [r.error for r in warm if not r.ok]

                await asyncio.to_thread(stack.system.edits.kill)
                after = [await open_on(p) for p in range(reads[tool_calls])]
                calls = [
                    asyncio.ensure_future(t.call("studio_read_memory", {"agent_id": world.agent_id}, timeout=90))
                    for _, t in before + after
                ]
                one = await wait_for(lambda: edits_group_once(stack, lambda members: len(members) == 1), timeout=60)
                ((survivor, held),) = one.items()
                assert held == every and survivor in two
                orphaned = [t for p, t in before + after if holder[p] != survivor]
                assert orphaned  # sessions whose partition the dead replica held

                results = await asyncio.gather(*calls)
                refused = [(r.session_id, r.error) for r in results if not r.ok]
                assert refused == []
                assert {r.session_id for r in results} == {t.session.session_id for _, t in before + after}
        finally:
            await asyncio.to_thread(second.stop)


async def test_other_services_keep_a_copy_of_the_workspace_from_its_events(stack: Stack) -> None:
    async with stack.http() as http:
        world = await new_world(http)
        url = make_url(stack.database_url)
        conn = await asyncpg.connect(
            host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
        )
        try:

            async def copy() -> Any:
                return await conn.fetchrow(
                    "SELECT name, guild_id, live, revision FROM gateway.agents WHERE agent_id = $1", world.agent_id
                )

            first = await wait_for(copy)
            assert (first["name"], first["guild_id"], first["live"], first["revision"]) == (
                "Ada",
                world.guild_id,
                True,
                1,
            )
            retired = await http.patch(f"/api/workspace/agents/{world.agent_id}", json={"live": False})
            assert retired.status_code == 200, retired.text

            async def retired_copy() -> Any:
                row = await copy()
                return row if row["revision"] == 2 else None

            second = await wait_for(retired_copy)
            assert second["live"] is False
            guild = await conn.fetchrow("SELECT org_id, name FROM gateway.guilds WHERE guild_id = $1", world.guild_id)
            assert guild is not None and (guild["org_id"], guild["name"]) == (world.org_id, "Support")
        finally:
            await conn.close()


async def test_a_lone_surrogate_is_refused_and_deep_nesting_is_dead_lettered_and_later_calls_are_answered(
    stack: Stack,
) -> None:
    from aiokafka import AIOKafkaProducer

    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        version = (await memory(http, world.agent_id))["version"]
        surrogate_call = f"call_{uuid.uuid4().hex}"
        deep_marker = uuid.uuid4().hex
        template = ToolCall(
            session_id=turn.session.session_id,
            seq=90,
            turn_id=turn.turn_id,
            step=0,
            tool_call_id=surrogate_call,
            tool="studio_edit_memory",
            arguments={"agent_id": world.agent_id, "content": "CONTENT", "base_version": version, "reason": "r"},
            session=turn.session.context,
        )
        # What a client that does not check its text puts on the wire: a JSON escape of a lone surrogate.
        surrogate = template.model_dump_json().replace('"CONTENT"', '"x\\ud800"').encode()
        deep = (
            '{"type": "ToolCall", "marker": "' + deep_marker + '", "arguments": ' + "[" * 100_000 + "]" * 100_000 + "}"
        ).encode()
        answer = coach.expect_result(surrogate_call)
        producer = AIOKafkaProducer(bootstrap_servers=stack.endpoints.kafka, max_request_size=2_000_000)
        await producer.start()
        try:
            key = turn.session.session_id.encode()
            await producer.send_and_wait(stack.topic("edits.tool-calls"), deep, key=key)
            await producer.send_and_wait(stack.topic("edits.tool-calls"), surrogate, key=key)
        finally:
            await producer.stop()

        refused = await asyncio.wait_for(answer, 30)
        assert not refused.ok and refused.error is not None
        assert (refused.error.status, refused.error.code) == (422, "invalid_arguments")
        assert "surrogate" in refused.error.message
        after = await turn.call("studio_read_memory", {"agent_id": world.agent_id})
        assert after.ok and after.output is not None and after.output["content"] == "Prefer short answers.\n"

        async def dead_letter() -> list[Any] | None:
            found = await stack.records(
                stack.topic("edits.tool-calls.dlq"), lambda r: deep_marker.encode() in (r.value or b"")[:200]
            )
            return found if len(found) == 1 else None

        (letter,) = await wait_for(dead_letter)
        headers = {k: v.decode() for k, v in letter.headers}
        assert headers["x-dlq-reason"] == "malformed" and "deep" in headers["x-dlq-error"].lower()
