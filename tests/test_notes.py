"""Note requests end to end (create, edit, delete), against real Kafka, PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from assent.hashing import content_hash
from tests.conftest import OPERATOR, Stack, World, new_world
from tests.test_memory_edits import open_turn, wait_pending

pytestmark = pytest.mark.integration

CAP = 32 * 1024


async def put_note(
    http: httpx.AsyncClient, world: World, path: str, content: str, expected_version: int | None = None
) -> httpx.Response:
    body: dict[str, Any] = {"content": content}
    if expected_version is not None:
        body["expected_version"] = expected_version
    return await http.put(f"/api/workspace/orgs/{world.org_id}/note", params={"path": path}, json=body)


async def write_note(http: httpx.AsyncClient, world: World, path: str, content: str) -> dict[str, Any]:
    response = await put_note(http, world, path, content)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def read_note(http: httpx.AsyncClient, world: World, path: str) -> httpx.Response:
    return await http.get(f"/api/workspace/orgs/{world.org_id}/note", params={"path": path})


async def history(http: httpx.AsyncClient, world: World, path: str) -> dict[str, Any]:
    response = await http.get(f"/api/workspace/orgs/{world.org_id}/note/history", params={"path": path})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def set_task(http: httpx.AsyncClient, agent_id: str, task: str) -> None:
    response = await http.patch(f"/api/workspace/agents/{agent_id}", json={"task": task})
    assert response.status_code == 200, response.text


def card_url(sid: str, seq: int) -> str:
    return f"/api/studio/sessions/{sid}/edits/{seq}"


def assert_recorded(entry: dict[str, Any], change: str, version: int, call_id: str, sid: str, seq: int) -> None:
    assert (entry["change"], entry["version"]) == (change, version), entry
    assert entry["tool_call_id"] == call_id and entry["tool_name"] == "studio_edit_note"
    assert entry["studio_session_id"] == sid and entry["studio_seq"] == seq


async def test_create_applies_and_records_the_request(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        path = f"guild/{world.guild_id}/refunds.md"
        text = "# Refunds\nAlways cite the order number.\n"
        result = await turn.call(
            "studio_edit_note",
            {"action": "create", "level": "guild", "key": "refunds.md", "content": text, "reason": "mixups"},
        )
        assert result.ok, result.error
        widget = result.widget
        assert widget is not None and widget.kind == "note" and widget.action == "create" and widget.await_operator
        assert widget.target.path == path and widget.target.label == f"Note {path}"
        assert (widget.base.version, widget.base.hash) == (None, None)
        assert widget.proposed_hash == content_hash(text) and (widget.lines.added, widget.lines.removed) == (2, 0)
        assert (await read_note(http, world, path)).status_code == 404, "proposing wrote"

        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        board = await wait_pending(http, sid, 1)
        (item,) = board["items"]
        assert (item["apply_label"], item["section"], item["kind"], item["action"]) == (
            "Create note",
            "State",
            "note",
            "create",
        )
        assert {s: n for s, n in board["sections"].items() if n} == {"State": 1}

        card = (await http.get(card_url(sid, seq))).json()
        assert card["live"] == {"text": None, "version": None, "hash": None}
        assert card["proposal"]["text"] == text and card["stale"] is False and card["apply_label"] == "Create note"
        (field,) = card["fields"]
        assert (field["name"], field["live"], field["proposal"]) == (path, None, text)
        assert "+Always cite the order number." in card["diff"]
        assert card["notes"] == ["Read by the guild's agents: Ada, Bo"]

        decided = await http.post(card_url(sid, seq), json={"decision": "apply"})
        assert decided.status_code == 200, decided.text
        assert decided.json()["outcome"] == "applied" and decided.json()["resolved_by"] == OPERATOR
        note = (await read_note(http, world, path)).json()
        assert (note["content"], note["version"], note["hash"], note["title"]) == (
            text,
            1,
            content_hash(text),
            "refunds",
        )
        log = await history(http, world, path)
        (revision,) = log["revisions"]
        assert_recorded(revision, "create", 1, result.tool_call_id, sid, seq)
        assert revision["author_user_id"] == OPERATOR and revision["hash"] == content_hash(text)
        (change,) = log["file_changes"]
        assert_recorded(change, "create", 1, result.tool_call_id, sid, seq)
        assert change["path"] == path and change["agent_id"] is None and change["actor_user_id"] == OPERATOR
        continuation = await turn.continuation()
        assert [(d.seq, d.outcome) for d in continuation.decisions] == [(seq, "applied")]

        # The read tools now see it.
        listed = await turn.call("studio_list_notes", {})
        assert listed.ok and listed.output is not None
        assert [n["display_path"] for n in listed.output["notes"]] == [path]
        assert listed.output["notes"][0] | {"hash": None} == {
            "display_path": path,
            "level": "guild",
            "title": "refunds",
            "version": 1,
            "hash": None,
        }
        read = await turn.call("studio_read_note", {"display_path": path})
        assert read.ok and read.output is not None
        assert (read.output["content"], read.output["version"], read.output["hash"]) == (text, 1, content_hash(text))


async def test_a_new_note_says_who_reads_it_and_an_agent_note_carries_the_agent(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        agent_note = await turn.call(
            "studio_edit_note",
            {
                "action": "create",
                "level": "agent",
                "agent_id": world.agent_id,
                "key": "style.md",
                "title": "Style",
                "content": "Be brief.\n",
                "reason": "r",
            },
        )
        org_note = await turn.call(
            "studio_edit_note",
            {"action": "create", "level": "org", "key": "policy.md", "content": "Be kind.\n", "reason": "r"},
        )
        assert agent_note.ok and org_note.ok, (agent_note.error, org_note.error)
        assert agent_note.widget is not None and agent_note.widget.target.agent_id == world.agent_id
        assert agent_note.widget.target.path == f"agent/{world.agent_id}/style.md"
        assert org_note.widget is not None and org_note.widget.target.path == "org/policy.md"
        await turn.end_step()
        board = await wait_pending(http, sid, 2)
        assert {s: n for s, n in board["sections"].items() if n} == {"State": 2} and board["agents"] == {
            world.agent_id: 1
        }
        a_seq, o_seq = turn.calls[agent_note.tool_call_id].seq, turn.calls[org_note.tool_call_id].seq
        assert (await http.get(card_url(sid, a_seq))).json()["notes"] == ["Read by Ada"]
        assert (await http.get(card_url(sid, o_seq))).json()["notes"] == ["Read by every agent of the organisation"]

        applied = await http.post(card_url(sid, a_seq), json={"decision": "apply"})
        assert applied.status_code == 200, applied.text
        (change,) = (await history(http, world, f"agent/{world.agent_id}/style.md"))["file_changes"]
        assert change["agent_id"] == world.agent_id and change["studio_seq"] == a_seq
        note = (await read_note(http, world, f"agent/{world.agent_id}/style.md")).json()
        assert note["title"] == "Style" and note["content"] == "Be brief.\n"


async def test_a_note_written_meanwhile_makes_a_create_stale(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        result = await turn.call(
            "studio_edit_note",
            {"action": "create", "level": "org", "key": "faq.md", "content": "Coach's.\n", "reason": "r"},
        )
        assert result.ok, result.error
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)

        await write_note(http, world, "org/faq.md", "Someone else's.\n")
        card = (await http.get(card_url(sid, seq))).json()
        assert card["stale"] is True and card["live"]["text"] == "Someone else's.\n" and card["live"]["version"] == 1

        refused = await http.post(card_url(sid, seq), json={"decision": "apply"})
        assert refused.status_code == 409, refused.text
        assert refused.json()["outcome"] == "stale"
        note = (await read_note(http, world, "org/faq.md")).json()
        assert (note["content"], note["version"]) == ("Someone else's.\n", 1)
        board = await wait_pending(http, sid, 1)
        assert board["items"][0]["stale"] is True


async def test_edit_applies_then_a_direct_write_makes_the_next_edit_409(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        path = f"guild/{world.guild_id}/refunds.md"
        await write_note(http, world, path, "One.\n")
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        first = await turn.call(
            "studio_edit_note",
            {"action": "edit", "display_path": path, "content": "One.\nTwo.\n", "base_version": 1, "reason": "r"},
        )
        assert first.ok, first.error
        assert first.widget is not None and first.widget.action == "edit"
        assert (first.widget.base.version, first.widget.base.hash) == (1, content_hash("One.\n"))
        await turn.end_step()
        seq = turn.calls[first.tool_call_id].seq
        board = await wait_pending(http, sid, 1)
        assert board["items"][0]["apply_label"] == "Apply edit"
        card = (await http.get(card_url(sid, seq))).json()
        assert card["live"]["text"] == "One.\n" and card["proposal"]["text"] == "One.\nTwo.\n" and card["notes"] == []
        applied = await http.post(card_url(sid, seq), json={"decision": "apply"})
        assert applied.status_code == 200, applied.text
        note = (await read_note(http, world, path)).json()
        assert (note["content"], note["version"]) == ("One.\nTwo.\n", 2)
        revisions = (await history(http, world, path))["revisions"]
        assert [r["change"] for r in revisions] == ["create", "update"]
        assert revisions[0]["tool_call_id"] is None  # the direct write
        assert_recorded(revisions[1], "update", 2, first.tool_call_id, sid, seq)
        await turn.continuation()

        turn = turn.session.begin_turn()
        second = await turn.call(
            "studio_edit_note",
            {"action": "edit", "display_path": path, "content": "Three.\n", "base_version": 2, "reason": "r"},
        )
        assert second.ok, second.error
        await turn.end_step()
        seq = turn.calls[second.tool_call_id].seq
        await wait_pending(http, sid, 1)
        moved = await put_note(http, world, path, "Behind its back.\n", expected_version=2)
        assert moved.status_code == 200, moved.text
        assert (await http.get(card_url(sid, seq))).json()["stale"] is True
        refused = await http.post(card_url(sid, seq), json={"decision": "apply"})
        assert refused.status_code == 409 and refused.json()["outcome"] == "stale", refused.text
        assert (await read_note(http, world, path)).json()["content"] == "Behind its back.\n"


async def test_delete_lists_embedding_tasks_and_applies_once_none_embeds(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        path = "org/tone.md"
        await write_note(http, world, path, "Warm.\nShort.\n")
        await set_task(http, world.agent_id, "Answer tickets.\n{{note:org/tone.md}}\n")
        await set_task(http, world.outsider_id, "Sell, in the {{note:org/tone.md}} tone.\n")
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        result = await turn.call(
            "studio_edit_note", {"action": "delete", "display_path": path, "base_version": 1, "reason": "unused"}
        )
        assert result.ok, result.error
        widget = result.widget
        assert widget is not None and widget.action == "delete" and widget.base.hash == content_hash("Warm.\nShort.\n")
        assert (widget.lines.added, widget.lines.removed) == (0, 2)
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        board = await wait_pending(http, sid, 1)
        assert (board["items"][0]["apply_label"], board["items"][0]["section"]) == ("Delete note", "State")

        card = (await http.get(card_url(sid, seq))).json()
        assert card["live"]["text"] == "Warm.\nShort.\n" and card["proposal"]["text"] == ""
        (field,) = card["fields"]
        assert (field["name"], field["live"], field["proposal"]) == (path, "Warm.\nShort.\n", None)
        assert "-Warm." in field["diff"] and field["lines"] == {"added": 0, "removed": 2}
        assert card["notes"] == ["Embedded in the Task of: Ada; Cy; applying fails until none does"]
        assert card["stale"] is False

        refused = await http.post(card_url(sid, seq), json={"decision": "apply"})
        assert refused.status_code == 409, refused.text
        assert refused.json()["outcome"] == "refused" and "note:org/tone.md" in refused.json()["detail"]
        assert (await read_note(http, world, path)).status_code == 200

        await set_task(http, world.agent_id, "Answer tickets.\n")
        assert (await http.get(card_url(sid, seq))).json()["notes"] == [
            "Embedded in the Task of: Cy; applying fails until none does"
        ]
        await set_task(http, world.outsider_id, "Sell.\n")
        assert (await http.get(card_url(sid, seq))).json()["notes"] == []
        applied = await http.post(card_url(sid, seq), json={"decision": "apply"})
        assert applied.status_code == 200, applied.text
        assert (await read_note(http, world, path)).status_code == 404
        log = await history(http, world, path)
        assert [r["change"] for r in log["revisions"]] == ["create", "delete"]
        assert_recorded(log["revisions"][1], "delete", 2, result.tool_call_id, sid, seq)
        assert log["revisions"][1]["hash"] is None
        assert_recorded(log["file_changes"][1], "delete", 2, result.tool_call_id, sid, seq)
        card = (await http.get(card_url(sid, seq))).json()  # decided: as proposed, the note's text when it was read
        assert (card["status"], card["live"]["text"], card["proposal"]["text"]) == ("applied", "Warm.\nShort.\n", "")
        assert [d["outcome"] for d in card["resolution"]["decisions"]] == ["refused", "applied"]


REFUSALS = [
    ("create_where_a_note_lives", 409, "note_exists"),
    ("create_for_an_outsider", 422, "agent_out_of_reach"),
    ("create_for_an_unknown_agent", 404, "unknown_agent"),
    ("create_task_md", 422, "not_a_note"),
    ("create_memory_md", 422, "not_a_note"),
    ("create_in_a_folder", 422, "invalid_key"),
    ("create_not_md", 422, "invalid_key"),
    ("create_over_byte_cap", 422, "content_too_large"),
    ("edit_unknown_note", 404, "unknown_note"),
    ("edit_another_guilds_note", 422, "note_out_of_reach"),
    ("edit_an_outsiders_note", 422, "note_out_of_reach"),
    ("edit_stale_base", 409, "stale_base_version"),
    ("edit_no_change", 422, "no_change"),
    ("edit_over_byte_cap", 422, "content_too_large"),
    ("edit_a_task", 422, "not_a_note"),
    ("edit_a_script", 422, "not_a_note"),
    ("edit_a_record", 422, "not_a_note"),
    ("action_task", 422, "invalid_arguments"),
    ("delete_stale_base", 409, "stale_base_version"),
    ("delete_another_guilds_note", 422, "note_out_of_reach"),
    ("delete_unknown_note", 404, "unknown_note"),
    ("read_another_guilds_note", 422, "note_out_of_reach"),
]


@pytest.mark.parametrize(("case", "status", "code"), REFUSALS)
async def test_refused_note_requests_say_why_and_leave_no_pending_item(
    stack: Stack, case: str, status: int, code: str
) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        ours = f"guild/{world.guild_id}/refunds.md"
        theirs = f"guild/{world.guild_id}_b/deals.md"
        outsiders = f"agent/{world.outsider_id}/pitch.md"
        for path in (ours, theirs, outsiders):
            await write_note(http, world, path, "Live.\n")
        turn = await open_turn(coach, world)
        create = {"action": "create", "level": "guild", "key": "new.md", "content": "New.\n", "reason": "r"}
        edit = {"action": "edit", "display_path": ours, "content": "New.\n", "base_version": 1, "reason": "r"}
        delete = {"action": "delete", "display_path": ours, "base_version": 1, "reason": "r"}
        tool, args = "studio_edit_note", dict(create)
        match case:
            case "create_where_a_note_lives":
                args["key"] = "refunds.md"
            case "create_for_an_outsider":
                args |= {"level": "agent", "agent_id": world.outsider_id}
            case "create_for_an_unknown_agent":
                args |= {"level": "agent", "agent_id": "agent_nobody"}
            case "create_task_md":
                args |= {"level": "agent", "agent_id": world.agent_id, "key": "task.md"}
            case "create_memory_md":
                args |= {"level": "agent", "agent_id": world.agent_id, "key": "memory.md"}
            case "create_in_a_folder":
                args["key"] = "sub/new.md"
            case "create_not_md":
                args["key"] = "new.txt"
            case "create_over_byte_cap":
                args["content"] = "x" * (CAP + 1)
            case "edit_unknown_note":
                args = edit | {"display_path": f"guild/{world.guild_id}/nothing.md"}
            case "edit_another_guilds_note":
                args = edit | {"display_path": theirs}
            case "edit_an_outsiders_note":
                args = edit | {"display_path": outsiders}
            case "edit_stale_base":
                args = edit | {"base_version": 0}
            case "edit_no_change":
                args = edit | {"content": "Live.\n"}
            case "edit_over_byte_cap":
                args = edit | {"content": "x" * (CAP + 1)}
            case "edit_a_task":
                args = edit | {"display_path": f"agent/{world.agent_id}/task.md"}
            case "edit_a_script":
                args = edit | {"display_path": "scripts/report.py"}
            case "edit_a_record":
                args = edit | {"display_path": "records/orders/42"}
            case "action_task":
                args = {"action": "task", "agent_id": world.agent_id, "content": "x", "reason": "r"}
            case "delete_stale_base":
                args = delete | {"base_version": 2}
            case "delete_another_guilds_note":
                args = delete | {"display_path": theirs}
            case "delete_unknown_note":
                args = delete | {"display_path": "org/nothing.md"}
            case "read_another_guilds_note":
                tool, args = "studio_read_note", {"display_path": theirs}

        refused = await turn.call(tool, args)
        assert not refused.ok and refused.widget is None and refused.error is not None
        assert (refused.error.status, refused.error.code) == (status, code), refused.error
        assert refused.error.message
        if case == "create_where_a_note_lives":
            assert '"edit"' in refused.error.message and ours in refused.error.message
            assert "base_version: 1" in refused.error.message

        # A later valid request of the same session shows up alone: the refused one left nothing behind.
        accepted = await turn.call("studio_edit_note", edit)
        assert accepted.ok, accepted.error
        board = await wait_pending(http, turn.session.session_id, 1)
        assert [item["seq"] for item in board["items"]] == [turn.calls[accepted.tool_call_id].seq]
        for path in (ours, theirs, outsiders):
            assert (await read_note(http, world, path)).json()["content"] == "Live.\n"


async def test_direct_note_writes_check_version_cap_path_and_embeds(stack: Stack) -> None:
    async with stack.http() as http:
        world = await new_world(http)
        path = f"agent/{world.agent_id}/howto.md"
        created = await put_note(http, world, path, "v1\n")
        assert created.status_code == 200, created.text
        assert created.json()["version"] == 1 and created.json()["level"] == "agent"
        assert (await put_note(http, world, path, "v2\n", expected_version=7)).status_code == 409
        assert (await put_note(http, world, "org/absent.md", "x\n", expected_version=1)).status_code == 409
        assert (await put_note(http, world, path, "x" * (CAP + 1))).status_code == 422
        assert (await put_note(http, world, f"agent/{world.agent_id}/task.md", "x\n")).status_code == 422
        assert (await put_note(http, world, "scripts/x.py", "x\n")).status_code == 422
        assert (await put_note(http, world, "agent/agent_nobody/x.md", "x\n")).status_code == 404
        assert (await put_note(http, world, "guild/guild_nobody/x.md", "x\n")).status_code == 404
        updated = await put_note(http, world, path, "v2\n", expected_version=1)
        assert updated.status_code == 200 and updated.json()["version"] == 2, updated.text

        listed = (await http.get(f"/api/workspace/orgs/{world.org_id}/notes")).json()
        assert [(n["display_path"], n["version"]) for n in listed] == [(path, 2)]

        await set_task(http, world.other_agent_id, f"{{{{note:{path}}}}}\n")
        params = {"path": path}
        embedded = await http.delete(f"/api/workspace/orgs/{world.org_id}/note", params=params)
        assert embedded.status_code == 409 and "Bo" in embedded.json()["detail"], embedded.text
        await set_task(http, world.other_agent_id, "")
        stale = await http.delete(f"/api/workspace/orgs/{world.org_id}/note", params=params | {"expected_version": 1})
        assert stale.status_code == 409, stale.text
        deleted = await http.delete(f"/api/workspace/orgs/{world.org_id}/note", params=params | {"expected_version": 2})
        assert deleted.status_code == 200, deleted.text
        assert (await read_note(http, world, path)).status_code == 404
        gone = await http.delete(f"/api/workspace/orgs/{world.org_id}/note", params=params)
        assert gone.status_code == 404
        log = await history(http, world, path)
        assert [(c["change"], c["version"], c["agent_id"]) for c in log["file_changes"]] == [
            ("create", 1, world.agent_id),
            ("update", 2, world.agent_id),
            ("delete", 3, world.agent_id),
        ]
        assert all(c["actor_user_id"] == OPERATOR for c in log["file_changes"])


async def test_two_creates_of_one_path_both_wait_and_the_second_goes_stale_once_the_first_applies(
    stack: Stack,
) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        path = f"guild/{world.guild_id}/refunds.md"
        first = await turn.call(
            "studio_edit_note",
            {"action": "create", "level": "guild", "key": "refunds.md", "content": "First.\n", "reason": "r"},
        )
        second = await turn.call(
            "studio_edit_note",
            {"action": "create", "level": "guild", "key": "refunds.md", "content": "Second.\n", "reason": "r"},
        )
        assert first.ok and second.ok, (first.error, second.error)
        assert first.widget is not None and second.widget is not None
        assert first.widget.target.path == second.widget.target.path == path
        assert first.widget.base.hash is None and second.widget.base.hash is None
        await turn.end_step()
        first_seq, second_seq = turn.calls[first.tool_call_id].seq, turn.calls[second.tool_call_id].seq
        board = await wait_pending(http, sid, 2)
        assert sorted(item["seq"] for item in board["items"]) == sorted([first_seq, second_seq])
        assert not any(item["stale"] for item in board["items"])

        applied = await http.post(card_url(sid, first_seq), json={"decision": "apply"})
        assert applied.status_code == 200 and applied.json()["outcome"] == "applied", applied.text
        refused = await http.post(card_url(sid, second_seq), json={"decision": "apply"})
        assert refused.status_code == 409 and refused.json()["outcome"] == "stale", refused.text

        card = (await http.get(card_url(sid, second_seq))).json()
        assert card["status"] == "pending" and card["stale"] is True
        assert (card["live"]["text"], card["live"]["version"]) == ("First.\n", 1)
        board = await wait_pending(http, sid, 1)
        assert [(item["seq"], item["stale"]) for item in board["items"]] == [(second_seq, True)]
        note = (await read_note(http, world, path)).json()
        assert (note["content"], note["version"]) == ("First.\n", 1)
        (revision,) = (await history(http, world, path))["revisions"]
        assert_recorded(revision, "create", 1, first.tool_call_id, sid, first_seq)


async def test_a_note_changed_directly_after_a_delete_was_proposed_is_not_deleted(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        path = "org/tone.md"
        await write_note(http, world, path, "Warm.\n")
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        result = await turn.call(
            "studio_edit_note", {"action": "delete", "display_path": path, "base_version": 1, "reason": "unused"}
        )
        assert result.ok, result.error
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)

        changed = await put_note(http, world, path, "Warm and short.\n", expected_version=1)
        assert changed.status_code == 200 and changed.json()["version"] == 2, changed.text
        assert (await http.get(card_url(sid, seq))).json()["stale"] is True
        refused = await http.post(card_url(sid, seq), json={"decision": "apply"})
        assert refused.status_code == 409 and refused.json()["outcome"] == "stale", refused.text

        note = await read_note(http, world, path)
        assert note.status_code == 200, note.text
        assert (note.json()["content"], note.json()["version"]) == ("Warm and short.\n", 2)
        log = await history(http, world, path)
        assert [(r["change"], r["version"]) for r in log["revisions"]] == [("create", 1), ("update", 2)]
        assert [(c["change"], c["version"]) for c in log["file_changes"]] == [("create", 1), ("update", 2)]
        board = await wait_pending(http, sid, 1)
        assert board["items"][0]["stale"] is True


async def test_two_concurrent_applies_of_creates_for_one_path_write_it_once(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        path = "org/faq.md"
        requests = []
        for content in ("From one.\n", "From two.\n"):  # two sessions, so the session lock does not order them
            turn = await open_turn(coach, world)
            result = await turn.call(
                "studio_edit_note",
                {"action": "create", "level": "org", "key": "faq.md", "content": content, "reason": "r"},
            )
            assert result.ok, result.error
            await turn.end_step()
            sid = turn.session.session_id
            seq = turn.calls[result.tool_call_id].seq
            await wait_pending(http, sid, 1)
            requests.append((sid, seq, result.tool_call_id, content))

        responses = await asyncio.gather(
            *(http.post(card_url(sid, seq), json={"decision": "apply"}) for sid, seq, _, _ in requests)
        )
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200, 409], [r.text for r in responses]
        won, lost = (0, 1) if responses[0].status_code == 200 else (1, 0)
        assert responses[won].json()["outcome"] == "applied" and responses[lost].json()["outcome"] == "stale"

        sid, seq, call_id, content = requests[won]
        note = (await read_note(http, world, path)).json()
        assert (note["content"], note["version"]) == (content, 1)
        log = await history(http, world, path)
        (revision,) = log["revisions"]
        assert_recorded(revision, "create", 1, call_id, sid, seq)
        (change,) = log["file_changes"]
        assert_recorded(change, "create", 1, call_id, sid, seq)

        loser_sid, loser_seq, _, _ = requests[lost]
        card = (await http.get(card_url(loser_sid, loser_seq))).json()
        assert card["status"] == "pending" and card["stale"] is True
