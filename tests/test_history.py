"""The history against the real services: every proposal, decision, outcome and continuation of a turn in order,
each with who, when, where and the hashes, after the direct writes that made its world; filters; a cursor that holds
while entries arrive; the export as JSON Lines and CSV, checked outside the gateway as the docs describe; the chain
verified, and a tampered and a deleted entry found (tampered with as a database superuser can, past the append-only
trigger); another organisation sees none of it; the CLI's ``history`` and ``audit verify``. (Each direct write's
entry: ``tests/test_history_writes.py``.)"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import OPERATOR, Stack, World, as_admin_of, new_world, wait_for
from tests.test_cli import assent, token_of
from tests.test_memory_edits import memory, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration

GENESIS = "0" * 64
BROKEN = 8
WORLD = 6
"""The direct writes that make a world (:func:`tests.conftest.new_world`: the organisation, two guilds, three
agents): the first entries of its history, at positions 0 to 5, before its turn's (:func:`a_decided_turn`)."""
TURN = 7
"""The entries of :func:`a_decided_turn`'s turn: two proposed, two decided, two outcomes, one continuation."""


async def entries_of(http: httpx.AsyncClient, n: int, **filters: Any) -> list[dict[str, Any]]:
    """The history's entries that ``filters`` select, newest first, once there are exactly ``n`` of them."""

    async def probe() -> list[dict[str, Any]] | None:
        response = await http.get("/api/history", params={"limit": 500, **filters})
        assert response.status_code == 200, response.text
        found: list[dict[str, Any]] = response.json()["entries"]
        assert len(found) <= n, [(e["type"], e["position"]) for e in found]
        return found if len(found) == n else None

    return await wait_for(probe)


def rehash(entry: dict[str, Any]) -> str:
    """An entry's hash as the docs tell a verifier outside Assent to compute it: SHA-256 of its fields but ``hash``
    and ``link``, as JSON with sorted keys, no whitespace, UTF-8."""
    fields = {k: v for k, v in entry.items() if k not in ("hash", "link")}
    return hashlib.sha256(
        json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()


async def a_decided_turn(http: httpx.AsyncClient, stack: Stack) -> tuple[World, str, int, int]:
    """A fresh organisation whose turn proposed two memory edits: the first applied after a stale attempt, the
    second declined, the turn continued. Answers the world, the session and both seqs. Its history holds the world's
    direct writes first (each in before the turn starts), then the turn's entries."""
    async with stack.coach() as coach:
        world = await new_world(http, memory="Prefer short answers.\n")
        await entries_of(http, WORLD, type="written")
        ada, bo = await memory(http, world.agent_id), await memory(http, world.other_agent_id)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        applied = await propose(
            turn, world.agent_id, "Prefer short answers.\nQuote the order.\n", ada["version"], "mixups"
        )
        declined = await propose(turn, world.other_agent_id, "Greet by first name.\n", bo["version"], "warmer")
        assert applied.ok and declined.ok, (applied.error, declined.error)
        await turn.end_step()
        first, second = turn.calls[applied.tool_call_id].seq, turn.calls[declined.tool_call_id].seq
        await wait_pending(http, sid, 2)
        for seq, decision in ((first, "apply"), (second, "decline")):
            answer = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": decision})
            assert answer.status_code == 200, answer.text
        await turn.continuation()
    return world, sid, first, second


async def test_a_turn_is_in_the_history_in_order_with_who_when_and_the_hashes(stack: Stack) -> None:
    async with stack.http() as http, stack.http() as stranger:
        world, sid, first, second = await a_decided_turn(http, stack)
        session = list(reversed(await entries_of(http, TURN, session=sid)))
        assert [(e["type"], e["seq"], e["decision"], e["outcome"]) for e in session] == [
            ("proposed", first, None, None),
            ("proposed", second, None, None),
            ("decided", first, "apply", None),
            ("outcome", first, "apply", "applied"),
            ("decided", second, "decline", None),
            ("outcome", second, "decline", "declined"),
            ("continued", None, None, None),
        ]
        proposed, _, decided, applied, _, declined, continued = session
        assert (proposed["actor"], proposed["via"], proposed["kind"], proposed["action"]) == (
            "coach",
            "studio_edit_memory",
            "memory",
            "edit",
        )
        assert (proposed["agent_id"], proposed["guild_id"], proposed["detail"]) == (
            world.agent_id,
            world.guild_id,
            "mixups",
        )
        assert proposed["target"] == "Memory of Ada"
        assert proposed["link"] == f"/api/studio/sessions/{sid}/edits/{first}"
        assert (decided["actor"], decided["via"]) == (OPERATOR, "card")
        # The hashes: what the proposal was bound to, and what it leaves; the applied outcome leaves the Memory so.
        card = (await http.get(proposed["link"])).json()
        assert (proposed["hash_before"], proposed["hash_after"]) == (card["base"]["hash"], card["proposal"]["hash"])
        assert (applied["hash_before"], applied["hash_after"]) == (card["base"]["hash"], card["proposal"]["hash"])
        assert declined["hash_after"] is None and declined["actor"] == OPERATOR and declined["detail"]
        assert f"seq {first}: Memory of Ada: applied by {OPERATOR}" in continued["detail"]
        assert [e["position"] for e in session] == list(range(WORLD, WORLD + TURN))
        assert all(e["org_id"] == world.org_id for e in session)
        # Before the turn: the direct writes that made the world, by the operator.
        made = list(reversed(await entries_of(http, WORLD, type="written")))
        assert [(e["position"], e["kind"], e["action"], e["actor"]) for e in made] == [
            (0, "org", "create", OPERATOR),
            (1, "guild", "create", OPERATOR),
            (2, "guild", "create", OPERATOR),
            (3, "agent", "create", OPERATOR),
            (4, "agent", "create", OPERATOR),
            (5, "agent", "create", OPERATOR),
        ]
        assert [e["target"] for e in made[3:]] == ["Agent Ada", "Agent Bo", "Agent Cy"]

        # Filters, each alone.
        assert {e["type"] for e in await entries_of(http, 2, session=sid, type="outcome")} == {"outcome"}
        assert [e["seq"] for e in await entries_of(http, 1, outcome="declined")] == [second]
        of_ada = await entries_of(http, 4, agent=world.agent_id)  # the proposal's three, and Ada's creation
        assert [(e["type"], e["seq"]) for e in of_ada] == [
            ("outcome", first),
            ("decided", first),
            ("proposed", first),
            ("written", None),
        ]
        # The continuation is the session's guild's; of the world's writes, the guild's creation and its two agents'.
        assert len(await entries_of(http, TURN + 3, guild=world.guild_id)) == TURN + 3
        assert len(await entries_of(http, 6, kind="memory")) == 6
        assert len(await entries_of(http, 4 + WORLD, actor=OPERATOR)) == 4 + WORLD
        assert len(await entries_of(http, 3, kind="agent")) == 3
        window = await entries_of(http, TURN, since=session[0]["at"], until="2999-01-01T00:00:00Z")
        assert {e["position"] for e in window} == {e["position"] for e in session}

        # Another organisation sees none of it, even by its session.
        as_admin_of(stranger, f"org_other_{world.org_id}")
        empty = await http.get(
            "/api/history", params={"since": "2026-12-02T00:00:00Z", "until": "2026-12-01T00:00:00Z"}
        )
        assert empty.status_code == 200 and empty.json() == {"entries": [], "next_cursor": None}
        other = await stranger.get("/api/history", params={"session": sid})
        assert other.status_code == 200 and other.json()["entries"] == []

        # Client mistakes are 422 with the reason.
        for params, said in (
            ({"cursor": "not-a-cursor"}, "should match pattern"),
            ({"since": "2026-12-02T00:00:00"}, "timezone"),
            ({"until": "1764720000"}, "not a number"),
        ):
            refused = await http.get("/api/history", params=params)
            assert refused.status_code == 422 and said in refused.text, refused.text


async def test_a_cursor_holds_while_entries_arrive_and_the_export_checks_outside(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world, sid, _, _ = await a_decided_turn(http, stack)
        everything = await entries_of(http, WORLD + TURN)
        pages: list[dict[str, Any]] = []
        page = (await http.get("/api/history", params={"limit": 3})).json()
        pages += page["entries"]
        # New entries arrive between the pages: a proposal of another turn.
        turn = await open_turn(coach, world)
        ada = await memory(http, world.agent_id)
        assert (await propose(turn, world.agent_id, "More.\n", ada["version"])).ok
        await entries_of(http, WORLD + TURN + 1)
        while page["next_cursor"] is not None:
            page = (await http.get("/api/history", params={"limit": 3, "cursor": page["next_cursor"]})).json()
            pages += page["entries"]
        assert [e["position"] for e in pages] == [e["position"] for e in everything] == list(range(12, -1, -1))

        # JSON Lines, oldest first: every entry's hash and link checked with nothing but hashlib and json.
        exported = await http.get("/api/history/export", params={"format": "jsonl"})
        assert exported.status_code == 200 and exported.headers["content-type"].startswith("application/jsonl")
        lines = [json.loads(line) for line in exported.text.splitlines()]
        assert [e["position"] for e in lines] == list(range(WORLD + TURN + 1))
        prev = GENESIS
        for entry in lines:
            assert entry["prev_hash"] == prev and rehash(entry) == entry["hash"], entry
            prev = entry["hash"]
        assert lines[: WORLD + TURN] == list(reversed(everything))
        # CSV: a header and the same entries, an empty cell for null.
        table = list(
            csv.DictReader(io.StringIO((await http.get("/api/history/export", params={"format": "csv"})).text))
        )
        assert [int(r["position"]) for r in table] == list(range(WORLD + TURN + 1))
        assert [r["hash"] for r in table] == [e["hash"] for e in lines]
        assert [r["seq"] or None for r in table] == [None if e["seq"] is None else str(e["seq"]) for e in lines]
        filtered = await http.get("/api/history/export", params={"format": "jsonl", "session": sid})
        assert len(filtered.text.splitlines()) == TURN

        # The CLI: the same entries, and --export.
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http)}
        shown = await assent("history", "--session", sid, "--json", "--limit", "2", "--all", env=env)
        assert shown.code == 0, shown.err
        assert [e["position"] for e in shown.json()["entries"]] == list(range(12, 5, -1))
        printed = await assent("history", "--outcome", "applied", env={**env, "COLUMNS": "250"})
        assert printed.code == 0 and "applied" in printed.out and OPERATOR in printed.out, printed.out
        dumped = await assent("history", "--export", "jsonl", env=env)
        assert [json.loads(line)["hash"] for line in dumped.out.splitlines()] == [e["hash"] for e in lines]


async def test_verify_names_an_edited_and_a_missing_entry(stack: Stack) -> None:
    async with stack.http() as http:
        world, _, _, _ = await a_decided_turn(http, stack)
        await entries_of(http, WORLD + TURN)
        verified = (await http.get("/api/history/verify")).json()
        assert (verified["ok"], verified["first"], verified["last"], verified["checked"]) == (True, 0, 12, 13)
        assert verified["first_break"] is None and verified["head"]
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http)}
        ok = await assent("audit", "verify", env=env)
        assert ok.code == 0 and "ok: entries 0 to 12" in ok.out, ok.out

        conn = await asyncpg.connect(stack.database_url.replace("postgresql+asyncpg", "postgresql"))
        try:
            # Tampered with as a database superuser can: past the trigger that keeps the history append-only
            # (tests/test_history_proof.py: the application's own path is refused).
            await conn.execute("SET session_replication_role = replica")
            await conn.execute(
                "UPDATE gateway.history SET detail = 'nothing to see' WHERE org_id = $1 AND position = 3", world.org_id
            )
            edited = (await http.get("/api/history/verify")).json()
            assert (edited["ok"], edited["checked"]) == (False, 3)
            assert (edited["first_break"]["position"], edited["first_break"]["reason"]) == (3, "edited")
            assert (await http.get("/api/history/verify", params={"first": 4})).json()["ok"] is True
            broken = await assent("audit", "verify", env=env)
            assert broken.code == BROKEN and "broken at entry 3" in broken.out, broken.out

            await conn.execute("DELETE FROM gateway.history WHERE org_id = $1 AND position = 5", world.org_id)
            missing = (await http.get("/api/history/verify", params={"first": 4})).json()
            assert (missing["first_break"]["position"], missing["first_break"]["reason"]) == (5, "gap")
        finally:
            await conn.close()


async def history_holds_once(http: httpx.AsyncClient, session_id: str, outcomes: dict[int, str]) -> None:
    """The session's history holds each proposal's entries once (proposed, decided, its outcome) and one
    continuation, and the organisation's chain verifies with no gap: for the fault tests, after a kill -9."""
    found = await entries_of(http, 3 * len(outcomes) + 1, session=session_id)
    seen = sorted((e["type"], e["seq"], e["outcome"]) for e in found if e["type"] != "continued")
    assert seen == sorted(
        entry
        for seq, outcome in outcomes.items()
        for entry in (("proposed", seq, None), ("decided", seq, None), ("outcome", seq, outcome))
    )
    assert [e["type"] for e in found].count("continued") == 1
    verified = (await http.get("/api/history/verify")).json()
    assert verified["ok"] and verified["checked"] == verified["last"] + 1 - verified["first"], verified
