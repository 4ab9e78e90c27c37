"""A guild-text request end to end, against real Kafka, PostgreSQL and Redis, services as processes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import OPERATOR, Stack, World, new_world
from tests.test_memory_edits import open_turn, pending, wait_pending

pytestmark = pytest.mark.integration

ABOUT = "We answer tickets."
DESCRIPTION = "Line one.\nLine two.\n"


async def set_guild_text(stack: Stack, guild_id: str, actor: str = "someone@example.com", **fields: str) -> None:
    """The operator's own change of the guild text, on the edits service's internal API."""
    async with httpx.AsyncClient(base_url=stack.system.edits.url, headers=stack.service_headers(), timeout=30) as edits:
        response = await edits.patch(f"/internal/guilds/{guild_id}", json=fields, headers={"X-Assent-User": actor})
    assert response.status_code == 200, response.text


async def guild(http: httpx.AsyncClient, guild_id: str) -> dict[str, Any]:
    response = await http.get(f"/api/workspace/guilds/{guild_id}")
    assert response.status_code == 200, response.text
    return response.json()


async def guild_world(stack: Stack, http: httpx.AsyncClient) -> World:
    world = await new_world(http)
    await set_guild_text(stack, world.guild_id, about=ABOUT, description=DESCRIPTION)
    return world


async def test_apply_changes_each_field_logs_who_and_the_next_turn_reads_it(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await guild_world(stack, http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        read = await turn.call("studio_read_guild", {})
        assert read.ok and read.output is not None, read.error
        assert (read.output["about"], read.output["description"]) == (ABOUT, DESCRIPTION)

        new_about, new_description = "We answer tickets within a day.", "Line one.\nLine three.\n"
        result = await turn.call(
            "studio_edit_guild", {"about": new_about, "description": new_description, "reason": "clearer"}
        )
        assert result.ok and result.widget is not None, result.error
        assert result.widget.kind == "guild" and result.widget.target.guild_id == world.guild_id
        assert (await guild(http, world.guild_id))["about"] == ABOUT, "proposing wrote"
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq

        board = await wait_pending(http, sid, 1)
        assert {s: n for s, n in board["sections"].items() if n} == {"Guild": 1}
        assert board["items"][0]["seq"] == seq and board["items"][0]["apply_label"] == "Apply edit"

        url = f"/api/studio/sessions/{sid}/edits/{seq}"
        card = (await http.get(url)).json()
        assert card["apply_label"] == "Apply edit" and card["stale"] is False and card["status"] == "pending"
        fields = {f["name"]: f for f in card["fields"]}
        assert list(fields) == ["about", "description"]
        assert (fields["about"]["live"], fields["about"]["proposal"]) == (ABOUT, new_about)
        assert f"+{new_about}" in fields["about"]["diff"] and f"-{ABOUT}" in fields["about"]["diff"]
        assert "+Line three." in fields["description"]["diff"] and "-Line two." in fields["description"]["diff"]

        decided = await http.post(url, json={"decision": "apply"})
        assert decided.status_code == 200, decided.text
        assert decided.json()["outcome"] == "applied" and decided.json()["resolved_by"] == OPERATOR

        live = await guild(http, world.guild_id)
        assert (live["about"], live["description"]) == (new_about, new_description)
        changes = (await http.get(f"/api/workspace/guilds/{world.guild_id}/changes")).json()
        by_request = [c for c in changes if c["tool_call_id"] == result.tool_call_id]
        assert [c["field"] for c in by_request] == ["about", "description"]
        assert all(
            (c["changed_by"], c["studio_session_id"], c["studio_seq"]) == (OPERATOR, sid, seq) for c in by_request
        )
        assert "content" not in by_request[0] and new_about not in str(changes)

        continuation = await turn.continuation()
        assert [(d.seq, d.outcome) for d in continuation.decisions] == [(seq, "applied")]
        assert (await pending(http, sid))["waiting_on"] == 0

        next_turn = turn.session.begin_turn()
        reread = await next_turn.call("studio_read_guild", {})
        assert reread.ok and reread.output is not None, reread.error
        assert (reread.output["about"], reread.output["description"]) == (new_about, new_description)


async def test_a_guild_changed_behind_the_request_makes_it_stale_and_apply_409(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await guild_world(stack, http)
        turn = await open_turn(coach, world)
        result = await turn.call("studio_edit_guild", {"about": "Coach's version.", "reason": "why"})
        assert result.ok, result.error
        await turn.end_step()
        sid = turn.session.session_id
        url = f"/api/studio/sessions/{sid}/edits/{turn.calls[result.tool_call_id].seq}"
        await wait_pending(http, sid, 1)

        await set_guild_text(stack, world.guild_id, description="Someone else's.\n")
        card = (await http.get(url)).json()
        assert card["stale"] is True and [f["name"] for f in card["fields"]] == ["about"]

        refused = await http.post(url, json={"decision": "apply"})
        assert refused.status_code == 409, refused.text
        assert refused.json()["outcome"] == "stale"
        live = await guild(http, world.guild_id)
        assert (live["about"], live["description"]) == (ABOUT, "Someone else's.\n")
        board = await pending(http, sid)
        assert board["waiting_on"] == 1 and board["items"][0]["stale"] is True

        declined = await http.post(url, json={"decision": "decline"})
        assert declined.status_code == 200 and declined.json()["outcome"] == "declined", declined.text
        continuation = await turn.continuation()
        assert [d.outcome for d in continuation.decisions] == ["declined"]


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"about": "x" * 281, "reason": "r"}, "field_too_long"),
        ({"description": "x" * 8001, "reason": "r"}, "field_too_long"),
        ({"about": ABOUT, "reason": "r"}, "no_change"),
        ({"about": ABOUT, "description": DESCRIPTION, "reason": "r"}, "no_change"),
        ({"reason": "r"}, "no_fields"),
    ],
)
async def test_refused_guild_edits_say_why_and_leave_no_pending_item(
    stack: Stack, arguments: dict[str, Any], code: str
) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await guild_world(stack, http)
        turn = await open_turn(coach, world)
        refused = await turn.call("studio_edit_guild", arguments)
        assert not refused.ok and refused.widget is None and refused.error is not None
        assert (refused.error.status, refused.error.code) == (422, code), refused.error
        if code == "field_too_long":
            assert next(iter(arguments)) in refused.error.message

        accepted = await turn.call("studio_edit_guild", {"about": "Accepted.", "reason": "r"})
        assert accepted.ok, accepted.error
        board = await wait_pending(http, turn.session.session_id, 1)
        assert [item["seq"] for item in board["items"]] == [turn.calls[accepted.tool_call_id].seq]
        live = await guild(http, world.guild_id)
        assert (live["about"], live["description"]) == (ABOUT, DESCRIPTION)


async def test_the_direct_write_keeps_the_field_limits(stack: Stack) -> None:
    async with stack.http() as http:
        world = await new_world(http)
        async with httpx.AsyncClient(
            base_url=stack.system.edits.url,
            headers={**stack.service_headers(), "X-Assent-User": OPERATOR},
            timeout=30,
        ) as edits:
            url = f"/internal/guilds/{world.guild_id}"
            too_long = await edits.patch(url, json={"about": "x" * 281})
            assert too_long.status_code == 422 and too_long.json()["detail"][0]["loc"] == ["body", "about"]
            empty = await edits.patch(url, json={})
            assert empty.status_code == 422 and "give about, description, or both" in empty.json()["detail"][0]["msg"]
            missing = await edits.patch("/internal/guilds/nope", json={"about": "x"})
            assert missing.status_code == 404
            written = await edits.patch(url, json={"about": "Short."})
            assert written.status_code == 200 and written.json()["changed"] == ["about"], written.text
        changes = (await http.get(f"/api/workspace/guilds/{world.guild_id}/changes")).json()
        assert [(c["field"], c["changed_by"], c["tool_call_id"]) for c in changes] == [("about", OPERATOR, None)]


async def test_the_operator_changes_guild_text_directly_through_the_gateway(stack: Stack) -> None:
    async with stack.http() as http:
        world = await new_world(http)
        changed = await http.patch(f"/api/workspace/guilds/{world.guild_id}", json={"about": "Direct."})
        assert changed.status_code == 200, changed.text
        assert changed.json()["about"] == "Direct." and changed.json()["changed"] == ["about"]
        log = (await http.get(f"/api/workspace/guilds/{world.guild_id}/changes")).json()
        assert [(row["field"], row["changed_by"], row["studio_seq"]) for row in log] == [("about", OPERATOR, None)]
        too_long = await http.patch(f"/api/workspace/guilds/{world.guild_id}", json={"about": "x" * 281})
        assert too_long.status_code == 422, too_long.text
        missing = await http.patch("/api/workspace/guilds/nope", json={"about": "x"})
        assert missing.status_code == 404
