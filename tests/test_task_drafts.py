"""Task drafts end to end (draft, edit, publish, discard, replace in the turn), against real Kafka, PostgreSQL and
Redis, the services as processes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from assent.coach import CoachTurn
from assent.contracts import ToolResult
from assent.hashing import content_hash
from edits_contract.draft_widget import DraftWidget
from tests.conftest import OPERATOR, Stack, World, as_admin_of, new_world
from tests.test_memory_edits import open_turn, wait_pending

pytestmark = pytest.mark.integration

TASK = "Answer refund questions.\n"


def draft_url(sid: str, seq: int) -> str:
    return f"/api/studio/sessions/{sid}/drafts/{seq}"


async def agent(http: httpx.AsyncClient, agent_id: str) -> dict[str, Any]:
    response = await http.get(f"/api/workspace/agents/{agent_id}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def set_task(http: httpx.AsyncClient, agent_id: str, task: str) -> None:
    response = await http.patch(f"/api/workspace/agents/{agent_id}", json={"task": task})
    assert response.status_code == 200, response.text


async def read_task(turn: CoachTurn, agent_id: str) -> dict[str, Any]:
    read = await turn.call("studio_read_task", {"agent_id": agent_id})
    assert read.ok and read.output is not None, read.error
    return read.output


async def draft(turn: CoachTurn, agent_id: str, content: str, base_hash: str, why: str = "clearer") -> ToolResult:
    return await turn.call(
        "studio_create_task_draft",
        {"agent_id": agent_id, "content": content, "base_hash": base_hash, "rationale": why},
    )


async def card(http: httpx.AsyncClient, sid: str, seq: int) -> dict[str, Any]:
    response = await http.get(draft_url(sid, seq))
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def drafting_world(http: httpx.AsyncClient) -> World:
    world = await new_world(http)
    await set_task(http, world.agent_id, TASK)
    return world


async def test_a_draft_is_edited_then_published_as_the_operator_and_the_turn_continues(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach, stack.http() as stranger:
        world = await drafting_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        live = await read_task(turn, world.agent_id)
        assert (live["task"], live["hash"], live["name"]) == (TASK, content_hash(TASK), "Ada")
        drafted = "Answer refund questions.\nAsk for the order number first.\n"
        result = await draft(turn, world.agent_id, drafted, live["hash"], "orders get mixed up")
        assert result.ok, result.error
        widget = result.widget.read_as(DraftWidget) if result.widget is not None else None
        assert widget is not None and (widget.type, widget.kind, widget.action) == (
            "studio_task_draft",
            "draft",
            "publish",
        )
        assert widget.await_operator and widget.agent is not None
        assert (widget.agent.id, widget.agent.name, widget.rationale) == (world.agent_id, "Ada", "orders get mixed up")
        assert widget.draft_id is not None and widget.target.ref == widget.draft_id
        assert (widget.base.hash, widget.proposed_hash) == (content_hash(TASK), content_hash(drafted))
        assert (widget.lines.added, widget.lines.removed) == (1, 0)
        assert result.output is not None and result.output["draft"]["content"] == drafted
        assert (await agent(http, world.agent_id))["task"] == TASK, "drafting wrote"

        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        (item,) = (await wait_pending(http, sid, 1))["items"]
        assert (item["kind"], item["section"], item["apply_label"], item["decline_label"]) == (
            "draft",
            "Agents",
            "Publish",
            "Discard",
        )
        first = await card(http, sid, seq)
        assert (first["draft_id"], first["version"], first["status"], first["stale"]) == (
            widget.draft_id,
            1,
            "pending",
            False,
        )
        assert "+Ask for the order number first." in first["diff"] and first["live"]["task"] == TASK

        # Edits: each is a new version of the same draft, at the same message.
        edited = "Answer refund questions.\nAsk for the order number and the date first.\n"
        response = await http.put(draft_url(sid, seq), json={"content": edited, "expected_version": 1})
        assert response.status_code == 200, response.text
        second = response.json()
        assert (second["version"], second["created_message_seq"], second["seq"], second["content"]) == (
            2,
            seq,
            seq,
            edited,
        )
        assert [(v["version"], v["author"]) for v in second["versions"]] == [(1, "coach"), (2, OPERATOR)]
        behind = await http.put(draft_url(sid, seq), json={"content": "Other.\n", "expected_version": 1})
        assert behind.status_code == 409 and "version 2" in behind.json()["detail"]
        same = await http.put(draft_url(sid, seq), json={"content": edited})
        assert same.status_code == 422 and same.json()["code"] == "no_change"
        assert (await http.put(draft_url(sid, seq), json={"content": 3})).status_code == 422
        assert (await http.get(draft_url(sid, seq + 1000))).status_code == 404

        # Another organisation's admin: the session is not there for them, and nothing changes.
        as_admin_of(stranger, f"org_other_{world.org_id}")
        assert (await stranger.get(draft_url(sid, seq))).status_code == 404
        assert (await stranger.put(draft_url(sid, seq), json={"content": "Mine.\n"})).status_code == 404
        assert (await stranger.post(draft_url(sid, seq), json={"decision": "publish"})).status_code == 404
        assert (await card(http, sid, seq))["version"] == 2

        published = await http.post(draft_url(sid, seq), json={"decision": "publish"})
        assert published.status_code == 200, published.text
        assert (published.json()["outcome"], published.json()["resolved_by"]) == ("published", OPERATOR)
        answer = published.json()["answer"]  # the draft after the decision
        assert (answer["status"], answer["published_by_user_id"], answer["version"]) == ("published", OPERATOR, 2)
        assert (await agent(http, world.agent_id))["task"] == edited
        after = await card(http, sid, seq)
        assert (after["status"], after["published_by_user_id"], after["published_version"]) == (
            "published",
            OPERATOR,
            2,
        )
        assert after["discarded_by_user_id"] is None and after["stale"] is False
        late = await http.put(draft_url(sid, seq), json={"content": "Later.\n"})
        assert late.status_code == 409 and "published" in late.json()["detail"]
        continuation = await turn.continuation()
        assert [(d.seq, d.outcome) for d in continuation.decisions] == [(seq, "published")]

        listed = await turn.session.begin_turn().call("studio_list_task_drafts", {"agent_id": world.agent_id})
        assert listed.ok and listed.output is not None
        assert listed.output["task_hash"] == content_hash(edited)
        assert [(d["draft_id"], d["status"], d["version"]) for d in listed.output["drafts"]] == [
            (widget.draft_id, "published", 2)
        ]


async def test_a_discarded_draft_writes_nothing_but_who_discarded_it(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await drafting_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        result = await draft(turn, world.other_agent_id, "Greet.\n", content_hash(""))
        assert result.ok, result.error
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)
        wrong = await http.post(draft_url(sid, seq), json={"decision": "apply"})
        assert wrong.status_code == 422, wrong.text
        discarded = await http.post(draft_url(sid, seq), json={"decision": "discard"})
        assert discarded.status_code == 200, discarded.text
        assert discarded.json()["outcome"] == "discarded"
        assert discarded.json()["answer"]["discarded_by_user_id"] == OPERATOR
        assert (await agent(http, world.other_agent_id))["task"] == ""
        after = await card(http, sid, seq)
        assert (after["status"], after["discarded_by_user_id"], after["published_by_user_id"]) == (
            "discarded",
            OPERATOR,
            None,
        )
        again = await http.post(draft_url(sid, seq), json={"decision": "publish"})
        assert again.status_code == 422 and "already discarded" in again.json()["detail"]
        continuation = await turn.continuation()
        assert [(d.seq, d.outcome) for d in continuation.decisions] == [(seq, "discarded")]


async def test_a_draft_replaced_in_the_same_turn_needs_no_answer(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await drafting_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        base = content_hash(TASK)
        old = await draft(turn, world.agent_id, "One.\n", base)
        new = await draft(turn, world.agent_id, "Two.\n", base)
        other = await draft(turn, world.other_agent_id, "Three.\n", content_hash(""))
        assert old.ok and new.ok and other.ok
        assert old.output is not None and new.output is not None and other.output is not None
        assert old.widget is not None and new.widget is not None
        assert (
            old.output["draft"]["replaces"],
            new.output["draft"]["replaces"],
            other.output["draft"]["replaces"],
        ) == (
            None,
            old.widget.read_as(DraftWidget).draft_id,
            None,
        )
        await turn.end_step()
        old_seq, new_seq = turn.calls[old.tool_call_id].seq, turn.calls[new.tool_call_id].seq
        other_seq = turn.calls[other.tool_call_id].seq
        board = await wait_pending(http, sid, 2)
        assert sorted(item["seq"] for item in board["items"]) == [new_seq, other_seq]
        replaced = await card(http, sid, old_seq)
        assert (replaced["status"], replaced["replaced_by"]) == ("superseded", new.widget.read_as(DraftWidget).draft_id)
        refused = await http.post(draft_url(sid, old_seq), json={"decision": "publish"})
        assert refused.status_code == 422, refused.text

        assert (await http.post(draft_url(sid, new_seq), json={"decision": "publish"})).status_code == 200
        assert (await http.post(draft_url(sid, other_seq), json={"decision": "discard"})).status_code == 200
        continuation = await turn.continuation()
        assert sorted((d.seq, d.outcome) for d in continuation.decisions) == sorted(
            [(old_seq, "superseded"), (new_seq, "published"), (other_seq, "discarded")]
        )
        assert (await agent(http, world.agent_id))["task"] == "Two.\n"
        # The history: the replaced draft was proposed and superseded, with no decision; the others decided.
        from tests.test_history import entries_of

        entries = list(reversed(await entries_of(http, 9, session=sid)))
        assert [(e["type"], e["outcome"]) for e in entries if e["seq"] == old_seq] == [
            ("proposed", None),
            ("outcome", "superseded"),
        ]
        assert [e["outcome"] for e in entries if e["seq"] == new_seq] == [None, None, "published"]

        # A later turn's draft does not replace a waiting one of an earlier turn.
        later = turn.session.begin_turn()
        first = await draft(later, world.agent_id, "Four.\n", content_hash("Two.\n"))
        assert first.ok and first.output is not None and first.output["draft"]["replaces"] is None


async def test_a_draft_embedding_a_note_of_the_same_turn_publishes_only_once_the_note_is_applied(
    stack: Stack,
) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await drafting_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        path = f"guild/{world.guild_id}/refunds.md"
        note = await turn.call(
            "studio_edit_note",
            {"action": "create", "level": "guild", "key": "refunds.md", "content": "Cite it.\n", "reason": "r"},
        )
        embedding = f"{TASK}Follow {{{{note:{path}}}}}.\n"
        result = await draft(turn, world.agent_id, embedding, content_hash(TASK))
        assert note.ok and result.ok and result.output is not None
        assert result.output["draft"]["embeds_missing_notes"] == [path]
        await turn.end_step()
        note_seq, seq = turn.calls[note.tool_call_id].seq, turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 2)
        assert (await card(http, sid, seq))["missing_notes"] == [path]

        early = await http.post(draft_url(sid, seq), json={"decision": "publish"})
        assert early.status_code == 409, early.text
        assert early.json()["outcome"] == "refused" and early.json()["effects"]["code"] == "note_not_created"
        assert path in early.json()["detail"]
        assert (await agent(http, world.agent_id))["task"] == TASK
        assert (await card(http, sid, seq))["status"] == "pending"

        applied = await http.post(f"/api/studio/sessions/{sid}/edits/{note_seq}", json={"decision": "apply"})
        assert applied.status_code == 200, applied.text
        assert (await card(http, sid, seq))["missing_notes"] == []
        published = await http.post(draft_url(sid, seq), json={"decision": "publish"})
        assert published.status_code == 200, published.text
        assert (await agent(http, world.agent_id))["task"] == embedding
        continuation = await turn.continuation()
        assert sorted((d.seq, d.outcome) for d in continuation.decisions) == [(note_seq, "applied"), (seq, "published")]


async def test_refusals_say_why_and_a_moved_task_makes_publishing_stale(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await drafting_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        base = content_hash(TASK)
        cases = [
            (
                {"agent_id": world.agent_id, "content": "New.\n", "base_hash": content_hash("old")},
                409,
                "stale_base_hash",
            ),
            ({"agent_id": world.agent_id, "content": TASK, "base_hash": base}, 422, "no_change"),
            ({"agent_id": world.outsider_id, "content": "New.\n", "base_hash": base}, 422, "agent_out_of_reach"),
            ({"agent_id": "agent_nobody", "content": "New.\n", "base_hash": base}, 404, "unknown_agent"),
            (
                {"agent_id": world.agent_id, "content": "x" * (32 * 1024 + 1), "base_hash": base},
                422,
                "content_too_large",
            ),
            ({"agent_id": world.agent_id, "content": "New.\n", "base_hash": base}, 422, "invalid_arguments"),
        ]
        for n, (arguments, status, code) in enumerate(cases):
            if code != "invalid_arguments":
                arguments = {**arguments, "rationale": "r"}
            refused = await turn.call("studio_create_task_draft", arguments)
            assert not refused.ok and refused.error is not None, n
            assert (refused.error.status, refused.error.code) == (status, code), (n, refused.error)
        unknown = await turn.call("studio_read_task", {"agent_id": world.outsider_id})
        assert unknown.error is not None and unknown.error.code == "agent_out_of_reach"

        result = await draft(turn, world.agent_id, "New.\n", base)
        assert result.ok, result.error
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)
        await set_task(http, world.agent_id, "Changed meanwhile.\n")
        assert (await card(http, sid, seq))["stale"] is True
        stale = await http.post(draft_url(sid, seq), json={"decision": "publish"})
        assert stale.status_code == 409 and stale.json()["outcome"] == "stale", stale.text
        assert (await agent(http, world.agent_id))["task"] == "Changed meanwhile.\n"
        board = await wait_pending(http, sid, 1)
        assert [item["seq"] for item in board["items"]] == [seq]
        assert (await http.post(draft_url(sid, seq), json={"decision": "discard"})).status_code == 200
