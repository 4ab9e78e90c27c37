"""The policy's rules at work: a proposal that a ``decide`` rule matches is decided by the rule, once.

:class:`RuleWorker` runs in every gateway process, one at a time across replicas (a transaction-scoped advisory lock),
beside the rounds and never in them. Every ``every`` seconds it reads the pending proposals that no verdict was
written for yet, of organisations with a policy, evaluates the policy in force when each was proposed
(:func:`assent.policy.evaluate`: a policy set later never re-decides what was proposed before it), and in one
transaction writes each one's verdict (``gateway.policy_verdicts``, migration 0010: which version, which rule) and,
where a rule decides, the decision (``gateway.decisions``, actor ``rule <name> (policy v<version>)``, via
``policy``) with its ``DecisionMade`` in the outbox. The verdict's key is the proposal: a proposal is judged once, and
a gateway killed before the commit leaves nothing, after it everything (the relay publishes the decision). The worker
decides only the proposals whose verdict its own statement wrote: a person's approval of a proposal a ``require`` rule
governs may have written the same verdict first (:mod:`gateway.adapters.approvals`). The owner
then carries the decision out as any other: its stale rule and its kind's checks apply.

A proposal an ``expire_after`` rule matches (and no rule decides) gets a deadline with its verdict. Once it passed, the
worker sends the owner the ``expire`` decision (:data:`assent.kinds.EXPIRE`, every kind's; never a person's) with the
reason, and settles the deadline, in one transaction: the owner resolves the proposal as ``expired``, writing nothing,
and the coach's continuation lists it as declined. A proposal resolved before its deadline is settled with nothing
sent.

A proposal an ``escalate`` rule matches (and no rule decides) gets, with its verdict, the time its escalation is due
and the rule's name; the webhook worker (:mod:`gateway.adapters.webhooks`) sends it once, if it still waits then.

An organisation without a policy costs one ``EXISTS`` a period.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from assent.contracts import DecisionMade
from assent.db import driver_connection, json_param
from assent.faults import crash_point
from assent.kinds import EXPIRE, KINDS
from assent.outbox import Outbox
from assent.policy import Policy, Proposed, Verdict, evaluate
from assent.topics import decisions_of

from ..domain.desk import apply_decision
from . import tables as t
from .projection import INSERT_DECISION

log = logging.getLogger(__name__)

RULES_LOCK = 0x6173_7365_6E74_7231  # "assentr1": one rule worker at a time, across replicas
ANY_POLICY = f"SELECT EXISTS (SELECT 1 FROM {t.policies.fullname})"
UNJUDGED = (
    "SELECT p.proposal_id, p.session_id, p.seq, p.kind, p.action, p.agent_id, p.trace,"
    " coalesce(a.guild_id, s.source_guild_id) AS guild_id, p.target ->> 'label' AS label,"
    " p.target ->> 'path' AS path,"
    " coalesce((p.lines ->> 'added')::int, 0) + coalesce((p.lines ->> 'removed')::int, 0) AS lines,"
    " p.widens, p.proposed_at, s.org_id, pol.version, pol.document, c.channel AS coach_channel,"
    " c.model AS coach_model"
    f" FROM {t.projected_proposals.fullname} AS p"
    f" JOIN {t.sessions.fullname} AS s ON s.session_id = p.session_id"
    f" JOIN LATERAL (SELECT version, document FROM {t.policies.fullname} AS v"
    "   WHERE v.org_id = s.org_id AND v.set_at <= p.proposed_at ORDER BY v.version DESC LIMIT 1) AS pol ON true"
    f" LEFT OUTER JOIN {t.agents.fullname} AS a ON a.agent_id = p.agent_id"
    f" LEFT OUTER JOIN {t.session_coaches.fullname} AS c ON c.session_id = p.session_id"
    " WHERE p.status = 'pending'"
    f" AND NOT EXISTS (SELECT 1 FROM {t.policy_verdicts.fullname} AS j WHERE j.proposal_id = p.proposal_id)"
    " ORDER BY p.proposed_at LIMIT $1"
)
"""The pending proposals no verdict was written for, each with the policy in force when it was proposed (a proposal of
an organisation with none, or proposed before its first, is not read)."""
RECORD_VERDICTS = (
    f"INSERT INTO {t.policy_verdicts.fullname}"
    " (proposal_id, org_id, version, rule, effect, expires_at, expiry_rule, escalates_at, escalation_rule, require,"
    " escalate_to)"
    " SELECT p, o, v, r, e, x, xr, es, er, q::jsonb, et::jsonb"
    " FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::timestamptz[], $7::text[],"
    " $8::timestamptz[], $9::text[], $10::text[], $11::text[]) AS u(p, o, v, r, e, x, xr, es, er, q, et)"
    " ON CONFLICT DO NOTHING RETURNING proposal_id"
)
"""Verdicts (arrays of :func:`verdict_row`'s columns), each written unless one was already: answers the proposals
whose verdict this statement wrote, the only ones its writer may act on (a person's apply that a ``require`` rule
governs may have written the verdict first, :mod:`gateway.adapters.approvals`)."""
DUE = (
    "SELECT v.proposal_id, v.version, v.expiry_rule, v.expires_at, p.session_id, p.seq, p.kind, p.status,"
    " p.proposed_at"
    f" FROM {t.policy_verdicts.fullname} AS v"
    f" JOIN {t.projected_proposals.fullname} AS p ON p.proposal_id = v.proposal_id"
    " WHERE v.expires_at IS NOT NULL AND v.settled_at IS NULL AND v.expires_at <= $1"
    " ORDER BY v.expires_at LIMIT $2"
)
"""The deadlines passed and not settled, with their proposals as they are now."""
SETTLE = f"UPDATE {t.policy_verdicts.fullname} SET settled_at = $2 WHERE proposal_id = ANY($1::text[])"


class RuleWorker:
    """Judges new proposals by their organisation's policy every ``every`` seconds, ``batch`` at a time."""

    def __init__(
        self,
        engine: AsyncEngine,
        outbox: Outbox,
        ready: Callable[[], bool],
        every: float = 0.5,
        batch: int = 200,
    ) -> None:
        self.engine = engine
        self.outbox = outbox
        self.ready = ready
        self.every = every
        self.batch = batch
        self._task: asyncio.Task[None] | None = None
        self._policies = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="policy-rules")

    async def policies_exist(self) -> bool:
        """Whether any organisation has a policy (:data:`ANY_POLICY`). A verdict, and so a deadline, comes only from
        a policy, and a policy's versions are all kept: once one exists, it is not asked again."""
        if not self._policies:
            async with self.engine.connect() as conn:
                self._policies = bool(await (await driver_connection(conn)).fetchval(ANY_POLICY))
        return self._policies

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            try:
                # The outbox's rows may be written once its relay holds its lock. Without any policy there is
                # nothing to judge and no deadline: one probe a period, not a transaction.
                if self.ready() and await self.policies_exist():
                    while self.ready() and await self.judge_once() == self.batch:
                        pass
                    while self.ready() and await self.expire_once() == self.batch:
                        pass
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("could not judge new proposals by their policy; trying again", exc_info=True)
            await asyncio.sleep(self.every)

    async def judge_once(self) -> int:
        """Judge up to ``batch`` new proposals; answers how many were read (0: none, no policy, or another
        replica's worker holds the lock)."""
        async with self.engine.connect() as conn:
            if not await (await driver_connection(conn)).fetchval(ANY_POLICY):
                return 0
        async with self.outbox.transaction(self.engine) as conn:
            pg = await driver_connection(conn)
            if not await pg.fetchval("SELECT pg_try_advisory_xact_lock($1)", RULES_LOCK):
                return 0
            rows = await pg.fetch(UNJUDGED, self.batch)
            if not rows:
                return 0
            policies: dict[tuple[str, int], Policy] = {}
            verdicts: list[tuple[Any, ...]] = []
            deciding: dict[str, tuple[Any, str, str]] = {}
            for row in rows:
                key = (row["org_id"], row["version"])
                if key not in policies:
                    document = row["document"]
                    policies[key] = Policy.model_validate(
                        json.loads(document) if isinstance(document, str) else document
                    )
                verdict = evaluate(policies[key], row["version"], _proposed(row))
                verdicts.append(verdict_row(verdict, row["proposal_id"], row["org_id"], row["proposed_at"]))
                rule = verdict.decision
                if verdict.decided is not None and rule is not None:
                    deciding[row["proposal_id"]] = (
                        row,
                        verdict.decided,
                        f"rule {rule.name} (policy v{row['version']})",
                    )
            written = await pg.fetch(RECORD_VERDICTS, *(list(column) for column in zip(*verdicts, strict=True)))
            for judged in written:
                if judged["proposal_id"] in deciding:
                    await self._decide(conn, pg, *deciding[judged["proposal_id"]])
            crash_point("gateway.rules.before_commit")
        crash_point("gateway.rules.after_commit")
        return len(rows)

    async def expire_once(self, now: datetime | None = None) -> int:
        """Expire the proposals whose deadline passed (up to ``batch``), each once: the expiry decision sent to its
        owner and the deadline settled in one transaction (a proposal resolved before its deadline is settled with
        nothing sent). Answers how many deadlines were read."""
        now = now or datetime.now(UTC)
        async with self.outbox.transaction(self.engine) as conn:
            pg = await driver_connection(conn)
            if not await pg.fetchval("SELECT pg_try_advisory_xact_lock($1)", RULES_LOCK):
                return 0
            rows = await pg.fetch(DUE, now, self.batch)
            for row in rows:
                if row["status"] != "pending":
                    continue
                waited = row["expires_at"] - row["proposed_at"]
                why = f"it waited longer than {_duration(waited)} (rule {row['expiry_rule']}, policy v{row['version']})"
                actor = f"rule {row['expiry_rule']} (policy v{row['version']})"
                await self._decide(conn, pg, row, EXPIRE, actor, {"reason": why})
            if rows:
                await pg.execute(SETTLE, [row["proposal_id"] for row in rows], now)
                crash_point("gateway.rules.expiry.before_commit")  # only where there was something to expire
        return len(rows)

    async def _decide(
        self, conn: Any, pg: Any, row: Any, decided: str, actor: str, options: dict[str, Any] | None = None
    ) -> None:
        """The rule's decision on ``row``'s proposal (``apply``, ``decline`` or :data:`~assent.kinds.EXPIRE`):
        recorded as a person's is, with its message to the owner."""
        spec = KINDS[row["kind"]]
        word = EXPIRE if decided == EXPIRE else apply_decision(spec) if decided == "apply" else spec.decline
        message = DecisionMade(
            decision_id=f"dec_{uuid.uuid4().hex}",
            proposal_id=row["proposal_id"],
            session_id=row["session_id"],
            seq=row["seq"],
            kind=row["kind"],
            decision=word,
            actor=actor,
            via="policy",
            options=options or {},
        )
        await pg.execute(
            INSERT_DECISION,
            message.decision_id,
            message.session_id,
            message.seq,
            message.proposal_id,
            message.decision,
            message.actor,
            message.via,
            message.id,
        )
        await self.outbox.put(conn, decisions_of(message.kind), message.session_id, message)


def verdict_row(verdict: Verdict, proposal_id: str, org_id: str, proposed_at: datetime) -> tuple[Any, ...]:
    """The columns of :data:`RECORD_VERDICTS` for ``verdict`` on a proposal: the decision rule (none: a person
    decides), the deadline and escalation it sets when no rule decides (with the roles the escalation tells), and what
    a ``require`` rule asks for."""
    rule = verdict.decision
    expiry = verdict.expiry if verdict.decided is None else None
    lasts = None if expiry is None else expiry.expire_after
    escalation = verdict.escalation if verdict.decided is None else None
    waits = None if escalation is None or escalation.escalate is None else escalation.escalate.after
    required = verdict.required
    return (
        proposal_id,
        org_id,
        verdict.version,
        None if rule is None else rule.name,
        None if rule is None else rule.effect,
        None if lasts is None else proposed_at + lasts,
        None if expiry is None else expiry.name,
        None if waits is None else proposed_at + waits,
        None if waits is None or escalation is None else escalation.name,
        None if required is None else json_param(required.model_dump(mode="json")),
        None
        if waits is None or escalation is None or escalation.escalate is None
        else json_param(escalation.escalate.roles),
    )


def _duration(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{seconds} second{'' if seconds == 1 else 's'}"


def _proposed(row: Any) -> Proposed:
    return Proposed(
        kind=row["kind"],
        action=row["action"],
        agent_id=row["agent_id"],
        guild_id=row["guild_id"],
        label=row["label"] or "",
        path=row["path"],
        lines=row["lines"],
        widens=row["widens"],
        channel=row["coach_channel"] or "studio",
        model=row["coach_model"],
        proposed_at=row["proposed_at"],
    )
