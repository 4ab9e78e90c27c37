"""The organisation's policy against the real services: read by anyone of the organisation, set by an admin only and
against the version read (a change made meanwhile is 409 and writes nothing), every version kept, each change an
entry of the history; a document that does not fit refused with the reason; another organisation's policy never
read; a policy tried over the last proposals beside what people did; the CLI's ``policy`` commands."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.conftest import OPERATOR, Stack, as_admin_of, new_world, wait_for
from tests.test_cli import CONFLICT, assent, token_of
from tests.test_console import create_login, four_requests
from tests.test_history import a_decided_turn, entries_of
from tests.test_history_proof import dsn
from tests.test_memory_edits import memory, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration

SMALL_EDITS = {
    "rules": [
        {"name": "small memory edits", "match": {"kind": ["memory"], "lines_at_most": 5}, "decide": "apply"},
        {
            "name": "logins need two admins",
            "match": {"kind": ["login"]},
            "require": {"approvals": 2, "roles": ["admin"]},
        },
        {"name": "tell ops", "notify": ["ops"]},
    ]
}


async def test_an_admin_sets_the_policy_against_the_version_read_and_each_change_is_in_the_history(
    stack: Stack, tmp_path: Path
) -> None:
    async with stack.http() as http, stack.http() as developer, stack.http() as stranger:
        world, _, _, _ = await a_decided_turn(http, stack)
        empty = (await http.get("/api/policy")).json()
        assert (empty["version"], empty["policy"], empty["set_by"]) == (0, {"rules": []}, None)

        first = await http.put("/api/policy", json={"policy": SMALL_EDITS, "expected_version": 0})
        assert first.status_code == 200, first.text
        assert (first.json()["version"], first.json()["set_by"]) == (1, OPERATOR)
        assert (await http.get("/api/policy")).json()["policy"]["rules"][0]["name"] == "small memory edits"

        # Made against the version before: someone changed it meanwhile; nothing is written.
        late = await http.put("/api/policy", json={"policy": {"rules": []}, "expected_version": 0})
        assert late.status_code == 409 and "is at version 1, not 0" in late.json()["detail"], late.text
        second = await http.put("/api/policy", json={"policy": {"rules": []}, "expected_version": 1})
        assert second.status_code == 200 and second.json()["version"] == 2, second.text
        versions = (await http.get("/api/policy/versions")).json()["versions"]
        assert [v["version"] for v in versions] == [2, 1]
        assert (await http.get("/api/policy/versions/1")).json()["hash"] == first.json()["hash"]
        assert (await http.get("/api/policy/versions/3")).status_code == 404

        # Each change is an entry of the history: who, when, the documents' hashes before and after.
        changes = list(reversed(await entries_of(http, 2, kind="policy")))
        assert [(e["type"], e["action"], e["actor"], e["target"]) for e in changes] == [
            ("written", "create", OPERATOR, "Policy, version 1"),
            ("written", "edit", OPERATOR, "Policy, version 2"),
        ]
        assert (changes[0]["hash_before"], changes[0]["hash_after"]) == (None, first.json()["hash"])
        assert (changes[1]["hash_before"], changes[1]["hash_after"]) == (first.json()["hash"], second.json()["hash"])

        # Only an admin sets it; a document that does not fit is refused with the reason.
        as_admin_of(developer, world.org_id, user="dev@example.com", roles=("developer",))
        refused = await developer.put("/api/policy", json={"policy": {"rules": []}, "expected_version": 2})
        assert refused.status_code == 403 and "needs the admin role" in refused.text, refused.text
        assert (await developer.get("/api/policy")).json()["version"] == 2  # any role reads it
        bad = await http.put(
            "/api/policy",
            json={"policy": {"rules": [{"name": "r", "decide": "apply", "notify": ["x"]}]}, "expected_version": 2},
        )
        assert bad.status_code == 422 and "exactly one effect" in bad.text, bad.text
        assert (await http.get("/api/policy")).json()["version"] == 2

        # Another organisation has its own, empty policy.
        as_admin_of(stranger, f"org_other_{world.org_id}")
        assert (await stranger.get("/api/policy")).json()["version"] == 0
        assert (await stranger.get("/api/policy/versions/1")).status_code == 404

        # The CLI: set from YAML against the version in force, show, and a stale --expected-version (exit 5).
        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http), "COLUMNS": "200"}
        path = tmp_path / "policy.yaml"
        path.write_text(
            "rules:\n"
            "  - name: small memory edits\n"
            "    match: {kind: [memory], lines_at_most: 5}\n"
            "    decide: apply\n"
            "  - name: a day at most\n"
            "    expire_after: P1D\n"
        )
        done = await assent("policy", "set", str(path), env=env)
        assert done.code == 0 and "policy version 3 set: 2 rules" in done.out, (done.out, done.err)
        shown = await assent("policy", "show", env=env)
        assert shown.code == 0 and "small memory edits" in shown.out and "expire_after" in shown.out, shown.out
        stale = await assent("policy", "set", str(path), "--expected-version", "2", env=env)
        assert stale.code == CONFLICT and "is at version 3, not 2" in stale.err, stale.err


async def test_a_policy_is_tried_over_the_last_proposals_beside_what_people_did(stack: Stack, tmp_path: Path) -> None:
    async with stack.http() as http, stack.http() as developer:
        world, sid, first, second = await a_decided_turn(http, stack)  # first applied, second declined
        trial = await http.post("/api/policy/test", json={"policy": SMALL_EDITS, "last": 10})
        assert trial.status_code == 200, trial.text
        found: dict[str, Any] = trial.json()
        assert found["summary"] == {
            "replayed": 2,
            "applied": 2,
            "declined": 0,
            "differ": 1,
            "approvals_required": 0,
            "expired": 0,
            "escalated": 0,
            "notified": 2,
        }
        by_seq = {p["seq"]: p for p in found["proposals"]}
        assert (by_seq[first]["status"], by_seq[first]["decided"], by_seq[first]["differs"]) == (
            "applied",
            "apply",
            False,
        )
        assert (by_seq[second]["status"], by_seq[second]["decided"], by_seq[second]["differs"]) == (
            "declined",
            "apply",
            True,
        )
        assert by_seq[second]["decided_by"] == "small memory edits" and by_seq[second]["resolved_by"] == OPERATOR
        assert {p["session_id"] for p in found["proposals"]} == {sid}
        assert (await http.get("/api/policy")).json()["version"] == 0  # trying sets nothing

        as_admin_of(developer, world.org_id, user="dev@example.com", roles=("developer",))
        assert (await developer.post("/api/policy/test", json={"policy": SMALL_EDITS})).status_code == 403

        env = {"ASSENT_URL": stack.gateway_url, "ASSENT_TOKEN": token_of(http), "COLUMNS": "250"}
        path = tmp_path / "policy.json"
        path.write_text(
            '{"rules": [{"name": "decline all memory", "match": {"kind": ["memory"]}, "decide": "decline"}]}'
        )
        tried = await assent("policy", "test", str(path), env=env)
        assert tried.code == 0, tried.err
        assert (
            "replayed 2 proposals: the rules would have applied 0 and declined 2 (1 otherwise than people did)"
            in tried.out
        )
        assert "decline (decline all memory) — differs" in tried.out, tried.out


async def test_a_decide_rule_decides_new_proposals_once_and_never_one_proposed_before_it(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        ada, bo = await memory(http, world.agent_id), await memory(http, world.other_agent_id)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        before = await propose(turn, world.agent_id, ada["content"] + "Proposed before the policy.\n", ada["version"])
        assert before.ok, before.error
        await wait_pending(http, sid, 1)
        policy = {
            "rules": [
                {"name": "small memory edits", "match": {"kind": ["memory"], "lines_at_most": 2}, "decide": "apply"}
            ]
        }
        assert (await http.put("/api/policy", json={"policy": policy, "expected_version": 0})).status_code == 200
        small = await propose(turn, world.other_agent_id, bo["content"] + "Quote the order.\n", bo["version"])
        big = await propose(turn, world.other_agent_id, "".join(f"Line {n}.\n" for n in range(6)), bo["version"])
        assert small.ok and big.ok, (small.error, big.error)
        await turn.end_step()
        seqs = {
            name: turn.calls[call.tool_call_id].seq
            for name, call in (("before", before), ("small", small), ("big", big))
        }

        # The small edit is applied by the rule, as the rule; the others wait for a person.
        rule = "rule small memory edits (policy v1)"

        async def applied() -> dict[str, Any] | None:
            card = (await http.get(f"/api/studio/sessions/{sid}/edits/{seqs['small']}")).json()
            return card if card["status"] == "applied" else None

        card = await wait_for(applied)
        assert [(d["decision"], d["actor"], d["via"], d["outcome"]) for d in card["resolution"]["decisions"]] == [
            ("apply", rule, "policy", "applied")
        ]
        assert (await memory(http, world.other_agent_id))["content"] == bo["content"] + "Quote the order.\n"
        pending = await wait_pending(http, sid, 2)
        assert sorted(item["seq"] for item in pending["items"]) == sorted([seqs["before"], seqs["big"]])

        # The people decide the rest; the turn continues once, listing the rule's decision as any other.
        for seq in (seqs["before"], seqs["big"]):
            answer = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "decline"})
            assert answer.status_code == 200, answer.text
        continuation = await turn.continuation()
        assert sorted((d.seq, d.outcome) for d in continuation.decisions) == sorted(
            [(seqs["before"], "declined"), (seqs["small"], "applied"), (seqs["big"], "declined")]
        )
        assert f"applied by {rule}" in continuation.text, continuation.text
        decided = await entries_of(http, 3, session=sid, type="decided")
        assert sorted((e["seq"], e["actor"], e["via"]) for e in decided) == sorted(
            [(seqs["before"], OPERATOR, "card"), (seqs["small"], rule, "policy"), (seqs["big"], OPERATOR, "card")]
        )


async def test_a_request_waits_no_longer_than_its_policy_allows_and_the_coach_is_told(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        policy = {"rules": [{"name": "memory waits briefly", "match": {"kind": ["memory"]}, "expire_after": "PT2S"}]}
        assert (await http.put("/api/policy", json={"policy": policy, "expected_version": 0})).status_code == 200
        ada = await memory(http, world.agent_id)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        result = await propose(turn, world.agent_id, "Never written.\n", ada["version"])
        assert result.ok, result.error
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq

        # Nobody decides: once two seconds have passed, the request ends as expired, and the turn continues.
        continuation = await turn.continuation(timeout=30)
        rule = "rule memory waits briefly (policy v1)"
        assert [(d.seq, d.outcome, d.resolved_by) for d in continuation.decisions] == [(seq, "expired", rule)]
        assert f"expired by {rule}: it waited too long; nothing was written, as if declined" in continuation.text
        card = (await http.get(f"/api/studio/sessions/{sid}/edits/{seq}")).json()
        assert (card["status"], card["resolution"]["resolved_by"]) == ("expired", rule)
        assert "it waited longer than 2 seconds (rule memory waits briefly, policy v1)" in card["resolution"]["detail"]
        assert (await memory(http, world.agent_id))["version"] == ada["version"]  # nothing was written
        late = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert late.status_code == 422 and f"already expired by {rule}" in late.text, late.text
        await wait_pending(http, sid, 0)
        outcome = await entries_of(http, 1, session=sid, type="outcome")
        assert (outcome[0]["outcome"], outcome[0]["actor"]) == ("expired", rule)


async def test_two_admins_approve_a_request_the_operator_alone_cannot_and_apply_all_counts_once(stack: Stack) -> None:
    async with (
        stack.http() as http,
        stack.http() as ann,
        stack.http() as ben,
        stack.http() as dev,
        stack.coach() as coach,
    ):
        world = await new_world(http)  # ``http`` is the session's operator, an admin
        as_admin_of(ann, world.org_id, user="ann@example.com")
        as_admin_of(ben, world.org_id, user="ben@example.com")
        as_admin_of(dev, world.org_id, user="dev@example.com", roles=("developer",))
        policy = {
            "rules": [
                {"name": "two admins", "match": {"kind": ["memory"]}, "require": {"approvals": 2, "roles": ["admin"]}}
            ]
        }
        assert (await http.put("/api/policy", json={"policy": policy, "expected_version": 0})).status_code == 200
        ada, bo = await memory(http, world.agent_id), await memory(http, world.other_agent_id)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        first = await propose(turn, world.agent_id, ada["content"] + "Cite the order number.\n", ada["version"])
        second = await propose(turn, world.other_agent_id, bo["content"] + "Never guess.\n", bo["version"])
        assert first.ok and second.ok, (first.error, second.error)
        await turn.end_step()
        one, two = turn.calls[first.tool_call_id].seq, turn.calls[second.tool_call_id].seq
        await wait_pending(http, sid, 2)
        at = f"/api/studio/sessions/{sid}/edits/{one}"

        # The operator who runs the session, and a developer, do not count; nothing is recorded for them.
        mine = await http.post(at, json={"decision": "apply"})
        assert mine.status_code == 403 and "you run the session that proposed this request" in mine.text, mine.text
        theirs = await dev.post(at, json={"decision": "apply"})
        assert theirs.status_code == 403 and "needs approvals from two admins" in theirs.text, theirs.text

        # The first admin's approval counts and the request waits; the same admin twice does not count again.
        counted = await ann.post(at, json={"decision": "apply"})
        assert counted.status_code == 202, counted.text
        assert (counted.json()["approvals"], counted.json()["required"], counted.json()["detail"]) == (
            1,
            2,
            "1 of 2 approvals: needs one more admin",
        )
        again = await ann.post(at, json={"decision": "apply"}, headers={"Idempotency-Key": "ann-again"})
        assert again.status_code == 409 and "you approved this request already" in again.text, again.text

        async def judged() -> dict[int, tuple[str, int]] | None:
            # The tray says what each request waits for once the rule worker has judged it (the first approval of
            # a request writes its verdict itself).
            tray = await wait_pending(http, sid, 2)
            waits = {item["seq"]: (item["waiting_for"], item["approvals"]) for item in tray["items"]}
            return waits if all(why for why, _ in waits.values()) else None

        assert await wait_for(judged) == {
            one: ("1 of 2 approvals: needs one more admin", 1),
            two: ("0 of 2 approvals: needs two admins", 0),
        }
        assert (await memory(http, world.agent_id))["version"] == ada["version"]  # nothing applied yet

        # The second admin's approval applies it, as theirs.
        done = await ben.post(at, json={"decision": "apply"})
        assert done.status_code == 200 and done.json()["outcome"] == "applied", done.text
        assert (await memory(http, world.agent_id))["content"] == ada["content"] + "Cite the order number.\n"

        # Apply all is one approval of each request (never several): the other request still waits for one more.
        applied_all = (await ann.post(f"/api/studio/sessions/{sid}/apply-all")).json()
        assert applied_all["resolved"] == [] and applied_all["stopped"] is None, applied_all
        assert [(s["seq"], s["reason"]) for s in applied_all["skipped"]] == [
            (two, "your approval was counted; 1 of 2 approvals: needs one more admin")
        ]
        twice = (await ann.post(f"/api/studio/sessions/{sid}/apply-all")).json()
        assert [s["seq"] for s in twice["skipped"]] == [two] and "approved this request already" in str(twice)

        # A decline declines at once; the turn continues once with both.
        declined = await dev.post(f"/api/studio/sessions/{sid}/edits/{two}", json={"decision": "decline"})
        assert declined.status_code == 200 and declined.json()["outcome"] == "declined", declined.text
        continuation = await turn.continuation()
        assert sorted((d.seq, d.outcome, d.resolved_by) for d in continuation.decisions) == sorted(
            [(one, "applied", "ben@example.com"), (two, "declined", "dev@example.com")]
        )
        assert (await memory(http, world.other_agent_id))["version"] == bo["version"]

        # Each approval is in the history, with what the request waited for after it.
        approved = await entries_of(http, 3, session=sid, type="approved")
        assert sorted((e["seq"], e["actor"], e["detail"]) for e in approved) == sorted(
            [
                (one, "ann@example.com", "1 of 2 approvals: needs one more admin"),
                (one, "ben@example.com", "2 of 2 approvals: complete"),
                (two, "ann@example.com", "1 of 2 approvals: needs one more admin"),
            ]
        )


async def test_a_day_long_deadline_and_a_twelve_hour_escalation_pass_on_a_moved_clock(stack: Stack) -> None:
    """The deadlines a rule sets are the proposal's time plus the rule's durations; moving them into the past (the
    clock, as far as the rule worker is concerned, a day later) escalates to the admins, then expires, each once."""
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        policy = {
            "rules": [
                {"name": "a day at most", "match": {"kind": ["memory"]}, "expire_after": "P1D"},
                {"name": "tell the admins", "escalate": {"after": "PT12H", "roles": ["admin"]}},
            ]
        }
        assert (await http.put("/api/policy", json={"policy": policy, "expected_version": 0})).status_code == 200
        ada = await memory(http, world.agent_id)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        result = await propose(turn, world.agent_id, "Never written.\n", ada["version"])
        assert result.ok, result.error
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq

        async def judged() -> dict[str, Any] | None:
            items = (await wait_pending(http, sid, 1))["items"]
            return items[0] if items[0]["expires_at"] is not None else None

        item = await wait_for(judged)
        proposed_at = datetime.fromisoformat(item["proposed_at"])
        assert datetime.fromisoformat(item["expires_at"]) - proposed_at == timedelta(days=1)
        assert (item["escalated_by"], item["escalated_to"]) == (None, [])

        conn = await asyncpg.connect(dsn(stack.database_url))
        try:
            moved = "UPDATE gateway.policy_verdicts SET {0} = {0} - interval '1 day' WHERE proposal_id = $1"
            await conn.execute(moved.format("escalates_at"), item["proposal_id"])

            async def escalated() -> list[dict[str, Any]] | None:
                page = (await http.get("/api/studio/pending", params={"escalated_to_me": "true"})).json()
                return page["items"] or None

            [told] = await wait_for(escalated)
            assert (told["seq"], told["escalated_by"], told["escalated_to"]) == (seq, "tell the admins", ["admin"])

            async with conn.transaction():  # the whole request a day older, at once
                await conn.execute(moved.format("expires_at"), item["proposal_id"])
                await conn.execute(
                    "UPDATE gateway.projected_proposals SET proposed_at = proposed_at - interval '1 day'"
                    " WHERE proposal_id = $1",
                    item["proposal_id"],
                )
            continuation = await turn.continuation(timeout=30)
            rule = "rule a day at most (policy v1)"
            assert [(d.seq, d.outcome, d.resolved_by) for d in continuation.decisions] == [(seq, "expired", rule)]
            card = (await http.get(f"/api/studio/sessions/{sid}/edits/{seq}")).json()
            assert "it waited longer than 1 day (rule a day at most, policy v1)" in card["resolution"]["detail"]
            decisions = await conn.fetchval(
                "SELECT count(*) FROM gateway.decisions WHERE proposal_id = $1", item["proposal_id"]
            )
            assert decisions == 1
        finally:
            await conn.close()


async def test_the_first_matching_rule_decides_requests_of_four_kinds_each_as_its_kind_says(stack: Stack) -> None:
    """One policy over a memory edit, a guild text edit, a login request and a Task draft: each is decided by the
    first rule that matches it, with its kind's word (a draft is discarded, a login declined), as the rule and the
    policy's version; the turn continues once."""
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        policy = {
            "rules": [
                {"name": "small memory edits", "match": {"kind": ["memory"], "lines_at_most": 3}, "decide": "apply"},
                {"name": "no logins", "match": {"kind": ["login"]}, "decide": "decline"},
                {"name": "no drafts", "match": {"kind": ["draft"]}, "decide": "decline"},
                {"name": "nothing else", "decide": "decline"},
                {"name": "never reached", "match": {"kind": ["memory"]}, "decide": "decline"},
            ]
        }
        assert (await http.put("/api/policy", json={"policy": policy, "expected_version": 0})).status_code == 200
        login = f"rules_{world.org_id.removeprefix('org_')}"
        await create_login(http, login, "Rules")
        sid, seqs, turn = await four_requests(coach, http, world, login)
        memory_seq, guild_seq, login_seq, draft_seq = seqs

        continuation = await turn.continuation(timeout=30)
        by = "rule {} (policy v1)".format
        assert sorted((d.seq, d.outcome, d.resolved_by) for d in continuation.decisions) == sorted(
            [
                (memory_seq, "applied", by("small memory edits")),
                (guild_seq, "declined", by("nothing else")),
                (login_seq, "declined", by("no logins")),
                (draft_seq, "discarded", by("no drafts")),
            ]
        )
        decided = await entries_of(http, 4, session=sid, type="decided")
        assert {(e["seq"], e["via"]) for e in decided} == {(seq, "policy") for seq in seqs}
        await wait_pending(http, sid, 0)


async def test_a_coach_rule_reads_the_channel_and_model_its_session_names(stack: Stack) -> None:
    """A session whose ``SessionOpened`` names its coach's channel and model is matched by them; one that names no
    coach is the studio's, with no model, as before."""
    from assent.contracts import CoachInfo

    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        policy = {
            "rules": [
                {
                    "name": "web coach memory edits",
                    "match": {"kind": ["memory"], "coach": {"channel": ["web"], "model": ["model-*"]}},
                    "decide": "apply",
                }
            ]
        }
        assert (await http.put("/api/policy", json={"policy": policy, "expected_version": 0})).status_code == 200
        named = await coach.open_session(
            org_id=world.org_id,
            source_guild_id=world.guild_id,
            operator_user_id=OPERATOR,
            channel="web",
            coach=CoachInfo(name="Web coach", model="model-1"),
        )
        unnamed = await open_turn(coach, world)
        web = named.begin_turn()
        ada, bo = await memory(http, world.agent_id), await memory(http, world.other_agent_id)
        assert (await propose(web, world.agent_id, ada["content"] + "Web.\n", ada["version"])).ok
        assert (await propose(unnamed, world.other_agent_id, bo["content"] + "Studio.\n", bo["version"])).ok
        await web.end_step()
        await unnamed.end_step()

        async def applied() -> bool:
            return (await memory(http, world.agent_id))["content"] == ada["content"] + "Web.\n"

        await wait_for(applied)
        await wait_pending(http, named.session_id, 0)
        await wait_pending(http, unnamed.session.session_id, 1)
