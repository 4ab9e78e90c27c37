"""The policy's rules under kill -9: a burst of proposals that rules decide and expire, while the gateway dies as its
rule worker commits a batch of decisions and again as it sends a batch of expiries, and the owner dies as it commits
a batch of the rules' decisions. Once everything is back, every proposal is decided once, carried out once, and every
turn continues once: nothing twice, nothing lost."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import asyncpg
import pytest

from assent.coach import CoachTurn
from assent.contracts import ToolResult
from edits_contract.topics import DECISIONS as EDITS_DECISIONS
from tests.conftest import Endpoints, new_world, running_stack, wait_for
from tests.test_history import entries_of
from tests.test_memory_edits import memory, open_turn

pytestmark = pytest.mark.integration

SESSIONS = 40
"""Each session's turn proposes a small edit of an agent of its own (applied by a rule) and a big edit of an agent
they all share (expired by a rule), then pauses."""
APPLIES = "rule small memory edits (policy v1)"
EXPIRES = "rule others wait briefly (policy v1)"
POLICY = {
    "rules": [
        {"name": "small memory edits", "match": {"kind": ["memory"], "lines_at_most": 2}, "decide": "apply"},
        {"name": "others wait briefly", "match": {"kind": ["memory"]}, "expire_after": "PT2S"},
    ]
}
BIG = "".join(f"Line {n}.\n" for n in range(6))


async def edit(turn: CoachTurn, agent_id: str, content: str, base_version: int) -> ToolResult:
    """A memory edit proposed by ``turn``, waited for as long as an owner's restart may take."""
    arguments = {"agent_id": agent_id, "content": content, "base_version": base_version, "reason": "burst"}
    result = await turn.call("studio_edit_memory", arguments, timeout=90)
    assert result.ok, result.error
    return result


async def test_kill_9_of_the_gateway_and_the_owner_in_a_burst_of_rule_decisions_and_expiries(
    endpoints: Endpoints, tmp_path: Any
) -> None:
    async with running_stack(endpoints, tmp_path) as stack:
        async with stack.http() as http, stack.coach() as coach:
            world = await new_world(http)
            ada = [f"{world.agent_id}_{n}" for n in range(SESSIONS)]
            for n, agent_id in enumerate(ada):
                body = {
                    "agent_id": agent_id,
                    "org_id": world.org_id,
                    "guild_id": world.guild_id,
                    "name": f"Ada {n}",
                    "memory": "Prefer short answers.\n",
                }
                assert (await http.post("/api/workspace/agents", json=body)).status_code == 201
            bases = {agent_id: (await memory(http, agent_id))["version"] for agent_id in ada}
            shared = await memory(http, world.other_agent_id)
            assert (await http.put("/api/policy", json={"policy": POLICY, "expected_version": 0})).is_success

            # The gateway dies right after its rule worker commits its first batch of verdicts and decisions (before
            # its relay publishes them); the owner right after it commits its first batch of decisions (before it
            # commits its offsets or publishes the outcomes).
            gateway, edits = stack.system.gateway, stack.system.edits

            def armed(service: Any, crash_at: str) -> None:
                service.stop()
                service.start({"ASSENT_CRASH_AT": crash_at})

            await asyncio.gather(
                asyncio.to_thread(armed, gateway, "gateway.rules.after_commit"),
                asyncio.to_thread(armed, edits, "edits.decision.after_commit"),
            )

            def owner_back() -> int:
                """The owner's exit code once it died; it is started again at once (the burst's calls wait for it)."""
                code = edits.wait_exit(120)
                if code == -9:
                    edits.start()
                return code

            owner = asyncio.create_task(asyncio.to_thread(owner_back))

            async def session(n: int) -> tuple[CoachTurn, ToolResult, ToolResult]:
                await asyncio.sleep(n * 0.05)  # the burst spread over two seconds: the gateway dies in its midst
                turn = await open_turn(coach, world)
                small = await edit(turn, ada[n], small_text(n), bases[ada[n]])
                big = await edit(turn, world.other_agent_id, BIG, shared["version"])
                await turn.end_step()
                return turn, small, big

            burst = asyncio.gather(*(session(n) for n in range(SESSIONS)))
            assert await asyncio.to_thread(gateway.wait_exit, 60) == -9
            turns = await burst

            conn = await asyncpg.connect(stack.database_url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                # What the first batch decided is in the outbox, unpublished. Once its deadlines have passed (the
                # gateway being down, nothing writes verdicts meanwhile), the gateway comes back and dies again as
                # its rule worker is about to commit the expiries it sends: its first pass over the deadlines.
                await wait_for(
                    lambda: conn.fetchval(
                        "SELECT NOT EXISTS (SELECT 1 FROM gateway.policy_verdicts WHERE expires_at > now())"
                    ),
                    timeout=10,
                )
                await asyncio.to_thread(gateway.launch, {"ASSENT_CRASH_AT": "gateway.rules.expiry.before_commit"})
                assert await asyncio.to_thread(gateway.wait_exit, 60) == -9
                await asyncio.to_thread(gateway.start)
                assert await owner == -9

                # Every turn continues once, listing its two requests: the small edit applied, the big one expired.
                continuations = await asyncio.gather(*(turn.continuation(timeout=90) for turn, _, _ in turns))
                for (turn, small, big), continuation in zip(turns, continuations, strict=True):
                    assert sorted((d.seq, d.outcome, d.resolved_by) for d in continuation.decisions) == sorted(
                        [
                            (turn.calls[small.tool_call_id].seq, "applied", APPLIES),
                            (turn.calls[big.tool_call_id].seq, "expired", EXPIRES),
                        ]
                    ), continuation

                sids = [turn.session.session_id for turn, _, _ in turns]
                applied = {small.widget.proposal_id for _, small, _ in turns if small.widget is not None}
                expired = {big.widget.proposal_id for _, _, big in turns if big.widget is not None}
                assert len(applied) == len(expired) == SESSIONS
                every = sorted(applied | expired)

                # Each proposal: one verdict, one decision (the rule's), its outcome recorded; nothing left pending.
                verdicts = await conn.fetch(
                    "SELECT proposal_id, rule, effect, expiry_rule, settled_at IS NOT NULL AS settled"
                    " FROM gateway.policy_verdicts WHERE proposal_id = ANY($1::text[])",
                    every,
                )
                assert sorted(
                    (r["proposal_id"] in applied, r["rule"], r["effect"], r["expiry_rule"], r["settled"])
                    for r in verdicts
                ) == sorted(
                    [(True, "small memory edits", "decide", None, False)] * SESSIONS
                    + [(False, None, None, "others wait briefly", True)] * SESSIONS
                )
                decisions = await conn.fetch(
                    "SELECT decision_id, proposal_id, decision, actor, via, outcome ->> 'outcome' AS outcome"
                    " FROM gateway.decisions WHERE proposal_id = ANY($1::text[])",
                    every,
                )
                assert Counter(r["proposal_id"] for r in decisions) == Counter(every), "a proposal decided twice"
                assert sorted(
                    (r["proposal_id"] in applied, r["decision"], r["actor"], r["via"], r["outcome"]) for r in decisions
                ) == sorted(
                    [(True, "apply", APPLIES, "policy", "applied")] * SESSIONS
                    + [(False, "expire", EXPIRES, "policy", "expired")] * SESSIONS
                )
                proposals = await conn.fetch(
                    "SELECT proposal_id, status, resolved_by FROM gateway.projected_proposals"
                    " WHERE session_id = ANY($1::text[])",
                    sids,
                )
                assert sorted((r["proposal_id"], r["status"], r["resolved_by"]) for r in proposals) == sorted(
                    [(p, "applied", APPLIES) for p in applied] + [(p, "expired", EXPIRES) for p in expired]
                )
                paused = await conn.fetch(
                    "SELECT session_id, sends, continued_at IS NOT NULL AS continued FROM gateway.turns"
                    " WHERE session_id = ANY($1::text[])",
                    sids,
                )
                assert sorted((r["session_id"], r["sends"], r["continued"]) for r in paused) == sorted(
                    (sid, 1, True) for sid in sids
                )
            finally:
                await conn.close()

            # The owner carried each decision out once: each small edit written once (one version more, one
            # revision of its tool call), the shared agent never written; one decision message per proposal on
            # the owner's topic, one outcome message per decision, one continuation message per turn.
            for n, ((_, small, _), agent_id) in enumerate(zip(turns, ada, strict=True)):
                live = await memory(http, agent_id)
                assert (live["version"], live["content"]) == (bases[agent_id] + 1, small_text(n))
                history = (await http.get(f"/api/workspace/agents/{agent_id}/memory/history")).json()
                assert [rev["tool_call_id"] for rev in history].count(small.tool_call_id) == 1
            assert (await memory(http, world.other_agent_id))["version"] == shared["version"]

            def ids(records: list[Any], field: str, key: str = "id") -> Counter[str]:
                """How many distinct messages (by ``key``) each ``field`` value has."""
                return Counter(
                    body[field] for body in {json.loads(r.value)[key]: json.loads(r.value) for r in records}.values()
                )

            def of(values: set[str] | list[str], field: str) -> Any:
                return lambda r: json.loads(r.value).get(field) in values

            sent = await stack.records(stack.topic(EDITS_DECISIONS.name), of(set(every), "proposal_id"))
            assert ids(sent, "proposal_id", "decision_id") == Counter(every)
            decision_ids = {r["decision_id"] for r in decisions}
            outcomes = await stack.records(stack.topic("proposals.outcomes"), of(decision_ids, "decision_id"))
            assert ids(outcomes, "decision_id") == Counter(decision_ids)
            resumed = await stack.records(stack.topic("studio.continuations"), of(set(sids), "session_id"))
            assert ids(resumed, "session_id") == Counter(sids)

            # The history holds each proposal's entries once and each turn's continuation once; its chain verifies.
            for kind, n in (("proposed", 2 * SESSIONS), ("decided", 2 * SESSIONS), ("outcome", 2 * SESSIONS)):
                found = await entries_of(http, n, type=kind)
                assert Counter(e["proposal_id"] for e in found) == Counter(every), kind
            continued = await entries_of(http, SESSIONS, type="continued")
            assert Counter(e["session_id"] for e in continued) == Counter(sids)
            verified = (await http.get("/api/history/verify")).json()
            assert verified["ok"] and verified["checked"] == verified["last"] + 1 - verified["first"], verified


def small_text(n: int) -> str:
    return f"Prefer short answers.\nQuote order {n}.\n"
