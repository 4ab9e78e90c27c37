"""The operator's desk against the real services: Apply all and Decline all over a mixed turn (edits, a widening and
a narrowing access change, a login request, a Task draft, a stale edit), resolving exactly what the seed says; ``Idempotency-Key``
on Apply all and on a single decision (a retry gets the first answer and changes nothing); the organisation's sessions
and the pending items across them, with organisations' walls."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.conftest import OPERATOR, Stack, World, as_admin_of, new_world, wait_for
from tests.test_access import access_of, create_login
from tests.test_memory_edits import memory, open_turn, propose, wait_pending
from tests.test_task_drafts import draft, read_task

pytestmark = pytest.mark.integration

S = "/api/studio/sessions"


async def test_apply_all_and_decline_all_over_a_mixed_turn_with_idempotency_keys(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        login = await create_login(http, "org")
        for agent in (world.agent_id, world.other_agent_id):
            await access_of(http, agent)
        ada, bo = await memory(http, world.agent_id), await memory(http, world.other_agent_id)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        calls = [
            await propose(turn, world.agent_id, "Ada's new memory.\n", ada["version"]),
            await turn.call(
                "studio_edit_note",
                {"action": "create", "level": "guild", "key": "desk.md", "content": "# Desk\n", "reason": "r"},
            ),
            await turn.call(
                "studio_edit_access",
                {"agent_id": world.agent_id, "native_tools": {"web_search": "off"}, "reason": "narrower"},
            ),
            await turn.call(
                "studio_edit_access",
                {"agent_id": world.other_agent_id, "native_tools": {"send_email": "on"}, "reason": "wider"},
            ),
            await turn.call("studio_request_connection_access", {"connection_id": login, "reason": "orders"}),
            await draft(turn, world.agent_id, "Answer refunds.\n", (await read_task(turn, world.agent_id))["hash"]),
            await propose(turn, world.other_agent_id, "Bo's new memory.\n", bo["version"]),
            await turn.call("studio_edit_guild", {"about": "We answer within a day.", "reason": "clearer"}),
        ]
        assert [c.error for c in calls] == [None] * 8
        assert [c.widget.widens for c in calls if c.widget is not None] == [False, False, False, True] + [False] * 4
        await turn.end_step()
        seqs = [turn.calls[c.tool_call_id].seq for c in calls]
        mem_a, note, narrow, wide, login_seq, task, stale, guild = seqs
        tray = await wait_pending(http, sid, 8)
        moved = await http.put(f"/api/workspace/agents/{world.other_agent_id}/memory", json={"content": "Moved.\n"})
        assert moved.status_code == 200, moved.text

        # The tray: each section counted (zero included), each agent, the labels and words of each kind.
        assert tray["summary"] == "Waiting on 8 decisions"
        assert {k: v for k, v in tray["sections"].items() if v} == {
            "Agents": 3,
            "State": 1,
            "Tools": 2,
            "Guild": 1,
            "Logins": 1,
        }
        assert tray["sections"]["Source"] == 0
        assert tray["agents"] == {world.agent_id: 3, world.other_agent_id: 2}
        by_seq = {item["seq"]: item for item in tray["items"]}
        assert (by_seq[login_seq]["apply_label"], by_seq[login_seq]["decisions"]) == (
            "Grant read access",
            {"apply": "grant", "decline": "decline"},
        )
        assert by_seq[login_seq]["decision_path"] == f"{S}/{sid}/logins/{login_seq}"
        assert by_seq[mem_a]["decision_path"] == f"{S}/{sid}/edits/{mem_a}"
        assert (by_seq[task]["decision_path"], by_seq[task]["decisions"]) == (
            f"{S}/{sid}/drafts/{task}",
            {"apply": "publish", "decline": "discard"},
        )
        assert (by_seq[task]["apply_label"], by_seq[task]["decline_label"]) == ("Publish", "Discard")
        assert [s for s, item in by_seq.items() if item["decided_alone"]] == [wide, login_seq]
        assert [s for s, item in by_seq.items() if item["agent_tab"]] == [mem_a, task, stale]

        # Apply all: the three edits and the draft before the stale edit applied (the draft published), the widening
        # change and the login left, the stale edit stops the rest (the guild text is not tried).
        key = {"Idempotency-Key": f"apply-{uuid.uuid4().hex}"}
        first = await http.post(f"{S}/{sid}/apply-all", headers=key)
        assert first.status_code == 200, first.text
        done = first.json()
        assert [(r["seq"], r["outcome"]) for r in done["resolved"]] == [
            (mem_a, "applied"),
            (note, "applied"),
            (narrow, "applied"),
            (task, "published"),
        ]
        assert [(s["seq"], s["kind"]) for s in done["skipped"]] == [(wide, "access"), (login_seq, "login")]
        assert (done["stopped"]["seq"], done["stopped"]["status"]) == (stale, 409)
        assert done["left"] == 4 and "stopped at seq" in done["message"]
        # The same key again: the first answer, nothing done again (Ada's memory moved exactly once).
        again = await http.post(f"{S}/{sid}/apply-all", headers=key)
        assert (again.status_code, again.json(), again.headers["idempotent-replayed"]) == (200, done, "true")
        assert (await memory(http, world.agent_id))["version"] == ada["version"] + 1
        assert (await http.get(f"/api/workspace/agents/{world.agent_id}")).json()["task"] == "Answer refunds.\n"
        other = await http.post(f"{S}/{sid}/decline-all", headers=key)
        assert other.status_code == 422 and "different request" in other.json()["detail"]
        assert [(i["seq"], i["stale"]) for i in (await wait_pending(http, sid, 4))["items"]] == [
            (wide, False),
            (login_seq, False),
            (stale, True),
            (guild, False),
        ]

        # A single decision with a key: a retry gets the first answer, not "already declined".
        one = {"Idempotency-Key": f"one-{uuid.uuid4().hex}"}
        declined = await http.post(f"{S}/{sid}/edits/{stale}", json={"decision": "decline"}, headers=one)
        assert declined.status_code == 200 and declined.json()["outcome"] == "declined", declined.text
        retried = await http.post(f"{S}/{sid}/edits/{stale}", json={"decision": "decline"}, headers=one)
        assert (retried.status_code, retried.json()) == (200, declined.json())
        mixed = await http.post(f"{S}/{sid}/edits/{stale}", json={"decision": "apply"}, headers=one)
        assert mixed.status_code == 422

        second = (await http.post(f"{S}/{sid}/apply-all")).json()
        assert [(r["seq"], r["outcome"]) for r in second["resolved"]] == [(guild, "applied")]
        assert (len(second["skipped"]), second["stopped"], second["left"]) == (2, None, 2)

        # Decline all: the widening change and the login request declined; the turn continues once.
        last = await http.post(f"{S}/{sid}/decline-all")
        assert last.status_code == 200, last.text
        assert [(r["seq"], r["outcome"]) for r in last.json()["resolved"]] == [
            (wide, "declined"),
            (login_seq, "declined"),
        ]
        assert (last.json()["left"], last.json()["skipped"], last.json()["stopped"]) == (0, [], None)
        continuation = await turn.continuation()
        assert [(d.seq, d.outcome) for d in continuation.decisions] == [
            (mem_a, "applied"),
            (note, "applied"),
            (narrow, "applied"),
            (wide, "declined"),
            (login_seq, "declined"),
            (task, "published"),
            (stale, "declined"),
            (guild, "applied"),
        ]
        assert {d.resolved_by for d in continuation.decisions} == {OPERATOR}
        assert (await wait_pending(http, sid, 0))["summary"] == "Waiting on 0 decisions"
        assert (await memory(http, world.other_agent_id))["content"] == "Moved.\n"
        access = await access_of(http, world.other_agent_id)
        assert [b["id"] for b in access["bindings"]] == []


async def a_session_waiting_on(stack: Stack, http: httpx.AsyncClient, world: World, n: int) -> str:
    """A session of ``world`` whose turn waits on ``n`` Memory edits of its agent; its id."""
    async with stack.coach() as coach:
        turn = await open_turn(coach, world)
        version = (await memory(http, world.agent_id))["version"]
        for i in range(n):
            assert (await propose(turn, world.agent_id, f"Version {i}.\n", version)).ok
        await turn.end_step()
        await wait_pending(http, turn.session.session_id, n)
        if n == 0:
            await turn.session.close()
        return turn.session.session_id


async def test_sessions_and_pending_across_them_are_the_organisations_own_and_paged(stack: Stack) -> None:
    async with stack.http() as http, stack.http() as theirs:
        other = await new_world(theirs)
        theirs_sid = await a_session_waiting_on(stack, theirs, other, 1)
        world = await new_world(http)
        closed = await a_session_waiting_on(stack, http, world, 0)
        older = await a_session_waiting_on(stack, http, world, 2)
        newer = await a_session_waiting_on(stack, http, world, 1)

        async def listed(query: str = "") -> dict[str, Any]:
            response = await http.get(f"{S}{query}")
            assert response.status_code == 200, response.text
            return dict(response.json())

        async def closed_shows() -> dict[str, Any] | None:
            page = await listed("?state=closed")
            return page if page["total"] == 1 else None

        assert [s["session_id"] for s in (await wait_for(closed_shows))["items"]] == [closed]
        every = await listed()
        assert every["total"] == 3 and (every["page"], every["page_size"]) == (1, 50)
        assert [(s["session_id"], s["state"], s["waiting_on"]) for s in every["items"]] == [
            (newer, "open", 1),
            (older, "open", 2),
            (closed, "closed", 0),
        ]
        assert {(s["operator_id"], s["source_guild_id"]) for s in every["items"]} == {(OPERATOR, world.guild_id)}
        second = await listed("?state=open&page=2&page_size=1")
        assert [s["session_id"] for s in second["items"]] == [older] and second["total"] == 2
        assert (await listed("?page=9"))["items"] == [] and (await listed("?page=9"))["total"] == 3

        pending = (await http.get("/api/studio/pending?section=Agents")).json()
        assert pending["total"] == 3
        assert [(i["session_id"], i["kind"]) for i in pending["items"]] == [
            (newer, "memory"),
            (older, "memory"),
            (older, "memory"),
        ]
        assert all(i["decision_path"] == f"{S}/{i['session_id']}/edits/{i['seq']}" for i in pending["items"])
        paged = (await http.get(f"/api/studio/pending?agent_id={world.agent_id}&page=2&page_size=2")).json()
        assert (len(paged["items"]), paged["total"]) == (1, 3)
        assert (await http.get("/api/studio/pending?section=Guild")).json()["total"] == 0
        assert (await http.get(f"/api/studio/pending?agent_id={other.agent_id}")).json()["total"] == 0
        bad = await http.get("/api/studio/pending?section=Nowhere")
        assert bad.status_code == 422 and "section" in bad.text
        assert (await http.get(f"{S}?page_size=0")).status_code == 422

        # Walls: the other organisation sees its own session only, and none of these sessions' requests.
        mine = await theirs.get(S)
        assert [s["session_id"] for s in mine.json()["items"]] == [theirs_sid]
        assert [i["session_id"] for i in (await theirs.get("/api/studio/pending")).json()["items"]] == [theirs_sid]
        as_admin_of(http, world.org_id, roles=("reviewer",))
        refused = await http.post(f"{S}/{older}/apply-all")
        assert refused.status_code == 403 and refused.json()["detail"].startswith("Apply all needs the admin"), (
            refused.text
        )
        as_admin_of(http, world.org_id)
        for path in (f"{S}/{older}/pending", f"{S}/{older}/apply-all", f"{S}/{older}/decline-all"):
            call = theirs.get if path.endswith("pending") else theirs.post
            assert (await call(path)).status_code == 404, path
        assert (await listed())["items"][1]["waiting_on"] == 2

        # The document says which routes take an Idempotency-Key: every decision route, Apply all, Decline all, and
        # the revert of an applied request (which files a new one).
        paths = (await http.get("/openapi.json")).json()["paths"]
        keyed = {
            (method, path)
            for path, item in paths.items()
            for method, operation in item.items()
            if any(p["name"] == "Idempotency-Key" for p in operation.get("parameters", []))
        }
        assert {path.removeprefix(f"{S}/{{session_id}}") for method, path in keyed if method == "post"} == {
            "/edits/{seq}",
            "/edits/{seq}/revert",
            "/logins/{seq}",
            "/apply-all",
            "/decline-all",
            "/api/agents/{agent_id}/proposals/{proposal_id}",
        } | ({"/drafts/{seq}"} if f"{S}/{{session_id}}/drafts/{{seq}}" in paths else set())
        assert {method for method, _ in keyed} == {"post"}
