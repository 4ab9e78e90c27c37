"""Reverting an applied request end to end, against real Kafka, PostgreSQL and Redis, services as processes: the inverse
is a new request, bound to the target's current version, decided as any other."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import OPERATOR, Stack, new_world, wait_for
from tests.test_access import access_of
from tests.test_collections import at, column, make, read
from tests.test_collections import propose as propose_table
from tests.test_memory_edits import memory, open_turn, propose, wait_pending
from tests.test_routines import create as create_routine
from tests.test_routines import known

pytestmark = pytest.mark.integration


async def applied_memory_edit(http: httpx.AsyncClient, stack: Stack, before: str, after: str) -> tuple[Any, str, int]:
    """A world whose agent's Memory went from ``before`` to ``after`` through an applied request: the world, and the
    request's session and seq."""
    async with stack.coach() as coach:
        world = await new_world(http, memory=before)
        turn = await open_turn(coach, world)
        result = await propose(turn, world.agent_id, after, (await memory(http, world.agent_id))["version"])
        assert result.ok, result.error
        await turn.end_step()
        session_id, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
        await wait_pending(http, session_id, 1)
        applied = await http.post(f"/api/studio/sessions/{session_id}/edits/{seq}", json={"decision": "apply"})
        assert applied.status_code == 200 and applied.json()["outcome"] == "applied", applied.text
    return world, session_id, seq


async def test_a_reverted_memory_edit_is_a_new_request_that_restores_the_memory_once_applied(stack: Stack) -> None:
    async with stack.http() as http:
        world, session_id, seq = await applied_memory_edit(http, stack, "Be brief.\n", "Be brief.\nCite orders.\n")
        version = (await memory(http, world.agent_id))["version"]

        reverted = await http.post(f"/api/studio/sessions/{session_id}/edits/{seq}/revert")
        assert reverted.status_code == 201, reverted.text
        filed = reverted.json()
        assert filed["session_id"] != session_id and filed["kind"] == "memory"
        assert filed["reverts"] == {
            "session_id": session_id,
            "seq": seq,
            "proposal_id": filed["reverts"]["proposal_id"],
        }
        assert filed["path"] == f"/api/studio/sessions/{filed['session_id']}/edits/{filed['seq']}"
        assert (await memory(http, world.agent_id))["content"] == "Be brief.\nCite orders.\n", "proposing wrote"

        card = (await http.get(filed["path"])).json()
        assert card["status"] == "pending" and card["stale"] is False
        assert card["proposal"]["text"] == "Be brief.\n" and card["live"]["text"] == "Be brief.\nCite orders.\n"
        assert "-Cite orders." in card["diff"]
        board = await wait_pending(http, filed["session_id"], 1)
        assert board["items"][0]["reason"] == f"Revert of request #{seq} of session {session_id}"

        # Its session goes by "Revert" and is closed already: no coach calls a tool in it, and it is not left open.
        # Both are kept before the answer, in one transaction: the list never shows it without its name.
        found = (await http.get("/api/studio/sessions", params={"state": "closed"})).json()["items"]
        row = next(s for s in found if s["session_id"] == filed["session_id"])
        assert (row["coach"]["name"], row["waiting_on"]) == ("Revert", 1)

        applied = await http.post(filed["path"], json={"decision": "apply"})
        assert applied.status_code == 200 and applied.json()["outcome"] == "applied", applied.text
        live = await memory(http, world.agent_id)
        assert live["content"] == "Be brief.\n" and live["version"] == version + 1
        last = (await http.get(f"/api/workspace/agents/{world.agent_id}/memory/history")).json()[-1]
        assert last["author_user_id"] == OPERATOR and last["studio_session_id"] == filed["session_id"]

        async def in_history() -> list[dict[str, Any]] | None:
            found = (await http.get("/api/history", params={"session": filed["session_id"]})).json()["entries"]
            return found if {e["type"] for e in found} >= {"proposed", "outcome"} else None

        entries = await wait_for(in_history)
        assert f"Revert of request #{seq} of session {session_id}" in json.dumps(entries)

        # The Memory reads as before already: a second revert of the same request has nothing to do.
        again = await http.post(f"/api/studio/sessions/{session_id}/edits/{seq}/revert")
        assert again.status_code == 409 and "already reads" in again.json()["detail"], again.text


async def test_a_revert_is_bound_to_the_version_it_was_proposed_over_and_a_declined_request_is_not_reverted(
    stack: Stack,
) -> None:
    async with stack.http() as http:
        world, session_id, seq = await applied_memory_edit(http, stack, "One.\n", "One.\nTwo.\n")
        filed = (await http.post(f"/api/studio/sessions/{session_id}/edits/{seq}/revert")).json()
        # Changed since the revert was proposed: applying it would overwrite that change, so it is stale (409).
        moved = await http.put(f"/api/workspace/agents/{world.agent_id}/memory", json={"content": "One.\nThree.\n"})
        assert moved.status_code == 200, moved.text
        stale = await http.post(filed["path"], json={"decision": "apply"})
        assert stale.status_code == 409 and stale.json()["outcome"] == "stale", stale.text
        assert (await memory(http, world.agent_id))["content"] == "One.\nThree.\n"

        # The revert proposed now is against the Memory as it is now: its diff shows exactly what it would change.
        now = (await http.post(f"/api/studio/sessions/{session_id}/edits/{seq}/revert")).json()
        card = (await http.get(now["path"])).json()
        assert card["live"]["text"] == "One.\nThree.\n" and card["proposal"]["text"] == "One.\n"

        declined = await http.post(filed["path"], json={"decision": "decline"})
        assert declined.status_code == 200, declined.text
        refused = await http.post(f"{filed['path']}/revert")
        assert refused.status_code == 409 and "this one is declined" in refused.json()["detail"], refused.text


async def revert_and_apply(http: httpx.AsyncClient, session_id: str, seq: int) -> dict[str, Any]:
    """Revert request ``seq`` of ``session_id`` and apply the new request; its card before the decision."""
    filed = await http.post(f"/api/studio/sessions/{session_id}/edits/{seq}/revert")
    assert filed.status_code == 201, filed.text
    path = filed.json()["path"]
    card = (await http.get(path)).json()
    applied = await http.post(path, json={"decision": "apply"})
    assert applied.status_code == 200 and applied.json()["outcome"] == "applied", applied.text
    return dict(card)


async def test_a_note_edit_create_and_delete_each_revert_to_what_lived_there_before(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        path = f"guild/{world.guild_id}/refunds.md"
        turn = await open_turn(coach, world)
        sid = turn.session.session_id

        async def applied(arguments: dict[str, Any]) -> int:
            result = await turn.call("studio_edit_note", {**arguments, "reason": "r"})
            assert result.ok, result.error
            seq = turn.calls[result.tool_call_id].seq
            await wait_pending(http, sid, 1)
            decided = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
            assert decided.status_code == 200 and decided.json()["outcome"] == "applied", decided.text
            return seq

        async def note() -> dict[str, Any] | None:
            response = await http.get(f"/api/workspace/orgs/{world.org_id}/note", params={"path": path})
            return response.json() if response.status_code == 200 else None  # type: ignore[no-any-return]

        created = await applied({"action": "create", "level": "guild", "key": "refunds.md", "content": "One.\n"})
        edited = await applied({"action": "edit", "display_path": path, "content": "Two.\n", "base_version": 1})

        card = await revert_and_apply(http, sid, edited)  # the edit: its text back
        assert (card["action"], card["proposal"]["text"], card["live"]["text"]) == ("edit", "One.\n", "Two.\n")
        assert (await note()) is not None and (await note())["content"] == "One.\n"  # type: ignore[index]

        card = await revert_and_apply(http, sid, created)  # the create: the note is deleted
        assert card["action"] == "delete" and await note() is None

        written = (
            await http.put(
                f"/api/workspace/orgs/{world.org_id}/note", params={"path": path}, json={"content": "Three.\n"}
            )
        ).json()
        deleted = await applied({"action": "delete", "display_path": path, "base_version": written["version"]})
        card = await revert_and_apply(http, sid, deleted)  # the delete: created again, with its text
        assert card["action"] == "create" and (await note())["content"] == "Three.\n"  # type: ignore[index]


async def test_an_access_change_reverts_to_the_agents_own_bindings_before_it(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        await access_of(http, world.agent_id)
        turn = await open_turn(coach, world)
        result = await turn.call(
            "studio_edit_access", {"agent_id": world.agent_id, "native_tools": {"fetch_url": "off"}, "reason": "No."}
        )
        assert result.ok, result.error
        sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)
        decided = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert decided.status_code == 200 and decided.json()["outcome"] == "applied", decided.text

        def fetch_url(access: dict[str, Any]) -> dict[str, Any]:
            return next(line for line in access["lines"] if line["id"] == "fetch_url")

        assert fetch_url(await access_of(http, world.agent_id))["bindings"]["agent"] == "off"
        card = await revert_and_apply(http, sid, seq)
        assert card["kind"] == "access" and card["reason"] == f"Revert of request #{seq} of session {sid}"
        assert fetch_url(await access_of(http, world.agent_id))["bindings"].get("agent") is None


async def test_a_guild_text_change_reverts_to_the_text_it_replaced(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        guild = f"/api/workspace/guilds/{world.guild_id}"
        about = (await http.get(guild)).json()["about"]
        turn = await open_turn(coach, world)
        result = await turn.call("studio_edit_guild", {"about": "We help, fast.", "reason": "r"})
        assert result.ok, result.error
        sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)
        decided = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert decided.status_code == 200 and decided.json()["outcome"] == "applied", decided.text
        card = await revert_and_apply(http, sid, seq)
        assert [(f["name"], f["proposal"]) for f in card["fields"]] == [("about", about)]
        assert (await http.get(guild)).json()["about"] == about


async def test_a_routine_edit_reverts_to_the_routine_it_replaced(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        await known(http, world.agent_id)
        routine = await create_routine(http, world.agent_id, cron="0 9 * * 1-5", paused=True)
        turn = await open_turn(coach, world)
        result = await turn.call(
            "studio_edit_routine",
            {"action": "edit", "schedule_id": routine["schedule_id"], "description": "Noon sweep", "reason": "r"},
        )
        assert result.ok, result.error
        sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)
        decided = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert decided.status_code == 200 and decided.json()["outcome"] == "applied", decided.text
        await revert_and_apply(http, sid, seq)
        path = f"/api/workspace/agents/{world.agent_id}/routines/{routine['schedule_id']}"
        back = (await http.get(path)).json()
        assert (back["description"], back["cron"], back["paused"]) == ("Sweep", "0 9 * * 1-5", True)


async def test_a_table_edit_reverts_with_its_values_and_a_deleted_table_comes_back_empty(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        columns = [column("order_id", required=True, unique=True), column("amount", "number")]
        table = await make(http, world, "refunds", columns, [{"order_id": "A1", "amount": 12}])
        cid = table["collection_id"]
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        renamed = [column("order_id", required=True, unique=True), column("total", "number", rename_from="amount")]
        edit = {
            "action": "edit",
            "collection": cid,
            "base_updated_at": table["updated_at"],
            "purpose": "Track refunds owed",
            "columns": renamed,
        }
        _, seq = await propose_table(turn, edit)
        await wait_pending(http, sid, 1)
        decided = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert decided.status_code == 200 and decided.json()["outcome"] == "applied", decided.text

        await revert_and_apply(http, sid, seq)
        back = await read(http, world, cid)
        assert (back["purpose"], [c["name"] for c in back["columns"]]) == ("Track refunds", ["order_id", "amount"])
        assert [r["values"] for r in back["page"]] == [{"order_id": "A1", "amount": 12}]
        again = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}/revert")
        assert again.status_code == 409 and "already reads" in again.json()["detail"], again.text

        _, gone = await propose_table(turn, {"action": "delete", "collection": cid})
        await wait_pending(http, sid, 1)
        decided = await http.post(f"/api/studio/sessions/{sid}/edits/{gone}", json={"decision": "apply"})
        assert decided.status_code == 200 and decided.json()["outcome"] == "applied", decided.text
        await revert_and_apply(http, sid, gone)
        (made,) = [c for c in (await http.get(at(world))).json() if c["name"] == "refunds"]
        assert made["collection_id"] != cid and made["purpose"] == "Track refunds"
        assert [(c["name"], c["type"], c["required"]) for c in made["columns"]] == [
            ("order_id", "text", True),
            ("amount", "number", False),
        ]
        assert (await read(http, world, made["collection_id"]))["page"] == []
