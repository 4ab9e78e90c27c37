"""A decided proposal stays readable, against the real services: ``GET …/{endpoint}/{seq}`` answers 200 with its card
as it was proposed (the live side when proposed, not now) and its resolution (the outcome and its reason, every
decision taken on it, a stale attempt too, and what the coach was told); a login request at ``…/logins/{seq}`` and a
Task draft at its owner's ``…/drafts/{seq}`` alike; another organisation's caller gets 404 at each; the CLI's
``show`` prints it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.conftest import OPERATOR, Stack, as_admin_of, new_world
from tests.test_cli import REFUSED, assent, token_of
from tests.test_connections import create_login, ids, open_session
from tests.test_memory_edits import memory, open_turn, propose, wait_pending
from tests.test_task_drafts import draft, read_task

pytestmark = pytest.mark.integration

APPLIED = "Prefer short answers.\nQuote the order.\n"


async def read(http: httpx.AsyncClient, path: str) -> dict[str, Any]:
    response = await http.get(path)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def decisions(card: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    """Each decision of a card's resolution: its word, who, where, its outcome."""
    return [(d["decision"], d["actor"], d["via"], d["outcome"]) for d in card["resolution"]["decisions"]]


async def test_an_applied_and_a_declined_edit_show_as_proposed_with_their_decisions_and_what_the_coach_was_told(
    stack: Stack,
) -> None:
    async with stack.http() as http, stack.coach() as coach, stack.http() as stranger:
        world = await new_world(http, memory="Prefer short answers.\n")
        ada, bo = await memory(http, world.agent_id), await memory(http, world.other_agent_id)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        applied = await propose(turn, world.agent_id, APPLIED, ada["version"], "orders get mixed up")
        declined = await propose(turn, world.other_agent_id, "Greet by first name.\n", bo["version"], "warmer")
        assert applied.ok and declined.ok, (applied.error, declined.error)
        await turn.end_step()
        first, second = turn.calls[applied.tool_call_id].seq, turn.calls[declined.tool_call_id].seq
        await wait_pending(http, sid, 2)
        edit = f"/api/studio/sessions/{sid}/edits/{first}"

        answer = await http.post(edit, json={"decision": "apply"})
        assert answer.status_code == 200, answer.text
        # Written since: the card still shows the Memory as it was when proposed.
        moved = await http.put(f"/api/workspace/agents/{world.agent_id}/memory", json={"content": "Now.\n"})
        assert moved.status_code == 200, moved.text
        card = await read(http, edit)
        assert (card["status"], card["stale"]) == ("applied", False)
        assert card["live"] == {"text": ada["content"], "version": ada["version"], "hash": card["base"]["hash"]}
        assert card["proposal"]["text"] == APPLIED and "+Quote the order." in card["diff"]
        assert [(f["live"], f["proposal"]) for f in card["fields"]] == [(ada["content"], APPLIED)]
        resolution = card["resolution"]
        assert (resolution["status"], resolution["resolved_by"]) == ("applied", OPERATOR)
        assert resolution["detail"] == answer.json()["detail"] and resolution["detail"]
        assert decisions(card) == [("apply", OPERATOR, "card", "applied")]
        assert resolution["decisions"][0]["detail"] == answer.json()["detail"]
        assert resolution["told"] is None  # the turn waits on the other proposal still

        declining = await http.post(f"/api/studio/sessions/{sid}/edits/{second}", json={"decision": "decline"})
        assert declining.status_code == 200, declining.text
        continuation = await turn.continuation()
        card = await read(http, edit)
        told = card["resolution"]["told"]
        line = next(d for d in continuation.decisions if d.seq == first)
        assert told["line"] == line.model_dump(mode="json") and told["line"]["outcome"] == "applied"
        assert (
            told["text"] == continuation.text and f"seq {first}: Memory of Ada: applied by {OPERATOR}" in told["text"]
        )
        assert datetime.fromisoformat(told["continued_at"]) >= datetime.fromisoformat(resolution["resolved_at"])
        other = await read(http, f"/api/studio/sessions/{sid}/edits/{second}")
        assert (other["status"], other["live"]["text"], other["proposal"]["text"]) == (
            "declined",
            bo["content"],
            "Greet by first name.\n",
        )
        assert decisions(other) == [("decline", OPERATOR, "card", "declined")]
        assert other["resolution"]["detail"] == declining.json()["detail"]
        assert other["resolution"]["told"]["line"]["outcome"] == "declined"
        assert other["resolution"]["told"]["text"] == continuation.text

        # Another organisation's admin: no such session; and a proposal is read at its own endpoint only.
        as_admin_of(stranger, f"org_other_{world.org_id}")
        assert (await stranger.get(edit)).status_code == 404
        assert (await http.get(f"/api/studio/sessions/{sid}/logins/{first}")).status_code == 404

        # The CLI's show: the decision, the outcome and its reason, what the coach was told (still exit 6: it is not
        # open, as the line on stderr says).
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http)}
        shown = await assent("show", sid, str(first), env=env)
        assert shown.code == REFUSED and "is no longer open: it was applied by" in shown.err, shown.err
        assert f"apply by {OPERATOR} (card): applied — {answer.json()['detail']}" in shown.out, shown.out
        assert f"outcome: applied by {OPERATOR}" in shown.out and answer.json()["detail"] in shown.out
        assert "the coach was told" in shown.out and f"seq {first}: Memory of Ada: applied by {OPERATOR}" in shown.out
        assert "+Quote the order." in shown.out


async def test_a_stale_attempt_shows_before_the_apply_that_resolved_it(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        base = await memory(http, world.agent_id)
        turn = await open_turn(coach, world)
        result = await propose(turn, world.agent_id, "Coach's version.\n", base["version"])
        assert result.ok, result.error
        await turn.end_step()
        url = f"/api/studio/sessions/{turn.session.session_id}/edits/{turn.calls[result.tool_call_id].seq}"
        await wait_pending(http, turn.session.session_id, 1)

        # Written out of band: the apply is stale (409). Written back as the coach read it: the next apply goes.
        write = f"/api/workspace/agents/{world.agent_id}/memory"
        assert (await http.put(write, json={"content": "Someone else's.\n"})).status_code == 200
        stale = await http.post(url, json={"decision": "apply"})
        assert stale.status_code == 409 and stale.json()["outcome"] == "stale", stale.text
        assert (await http.put(write, json={"content": base["content"]})).status_code == 200
        applied = await http.post(url, json={"decision": "apply", "via": "tray"})
        assert applied.status_code == 200, applied.text
        await turn.continuation()

        card = await read(http, url)
        assert (card["status"], card["stale"], card["live"]["text"]) == ("applied", False, base["content"])
        assert decisions(card) == [("apply", OPERATOR, "card", "stale"), ("apply", OPERATOR, "tray", "applied")]
        first, last = card["resolution"]["decisions"]
        assert first["detail"] == stale.json()["detail"] and last["detail"] == applied.json()["detail"]
        assert first["decided_at"] <= last["decided_at"]
        assert card["resolution"]["detail"] == applied.json()["detail"]
        assert card["resolution"]["told"]["line"]["outcome"] == "applied"


async def test_a_granted_login_request_and_a_published_draft_are_read_at_their_endpoints(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach, stack.http() as stranger:
        world = await new_world(http)
        # A login nothing reads through here (no server answers at its URL): its request is decided all the same.
        login = await create_login(http, "http://127.0.0.1:9/mcp", ids("desk"), "guild", world.guild_id)
        turn = (await open_session(coach, http, world)).begin_turn()
        sid = turn.session.session_id
        task = await read_task(turn, world.agent_id)
        calls = [
            await turn.call("studio_request_connection_access", {"connection_id": login["login_id"], "reason": "r"}),
            await draft(turn, world.agent_id, "Answer refunds.\n", task["hash"]),
        ]
        assert all(c.ok for c in calls), [c.error for c in calls]
        await turn.end_step()
        asked, drafted = (turn.calls[c.tool_call_id].seq for c in calls)
        await wait_pending(http, sid, 2)
        logins = f"/api/studio/sessions/{sid}/logins/{asked}"
        drafts = f"/api/studio/sessions/{sid}/drafts/{drafted}"

        pending = await read(http, logins)  # read while pending: the owner's live side, as an edit's
        assert (pending["status"], pending["kind"], pending["resolution"]) == ("pending", "login", None)
        assert (await read(http, drafts))["resolution"] is None  # the owner's read of a pending draft
        granted = await http.post(logins, json={"decision": "grant"})
        assert granted.status_code == 200 and granted.json()["outcome"] == "granted", granted.text
        published = await http.post(drafts, json={"decision": "publish"})
        assert published.status_code == 200, published.text
        continuation = await turn.continuation()

        card = await read(http, logins)
        assert (card["status"], card["stale"], card["apply_label"]) == ("granted", False, pending["apply_label"])
        assert (card["fields"], card["live"]["text"]) == (pending["fields"], pending["live"]["text"])
        assert decisions(card) == [("grant", OPERATOR, "card", "granted")]
        assert card["resolution"]["detail"] == granted.json()["detail"]
        assert card["resolution"]["told"]["text"] == continuation.text
        assert card["resolution"]["told"]["line"]["outcome"] == "granted"
        assert (await http.get(f"/api/studio/sessions/{sid}/edits/{asked}")).status_code == 404  # not an edit
        assert (await http.get(f"/api/studio/sessions/{sid}/logins/{drafted}")).status_code == 404  # not a login

        # The draft's owner reads it, decided: published, by whom, which version.
        shown = await read(http, drafts)
        assert (shown["status"], shown["published_by_user_id"], shown["published_version"]) == (
            "published",
            OPERATOR,
            1,
        )
        # ... and how it was decided, as the gateway's cards show it: the decision, the outcome, what the coach was told.
        assert decisions(shown) == [("publish", OPERATOR, "card", "published")]
        assert shown["resolution"]["detail"] == published.json()["detail"]
        assert shown["resolution"]["told"]["text"] == continuation.text
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http), "COLUMNS": "200"}
        printed = await assent("show", sid, str(drafted), env=env)
        assert printed.code == REFUSED and f"publish by {OPERATOR} (card): published" in printed.out, printed.out
        assert "the coach was told" in printed.out

        as_admin_of(stranger, f"org_other_{world.org_id}")
        for path in (logins, drafts):
            assert (await stranger.get(path)).status_code == 404, path
