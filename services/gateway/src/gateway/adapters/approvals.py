"""Approvals a ``require`` rule counts, in PostgreSQL (``gateway.approvals``, migration 0012).

A person's apply on a proposal that a ``require`` rule governs is one approval. :meth:`SqlApprovals.approve` counts it
in one transaction that holds the proposal's verdict row (written here first when the rule worker has not judged the
proposal yet: the verdict is the same, :func:`assent.policy.evaluate` being pure), so two approvers at once are
counted one after the other: the approval that completes the count records the decision and sends it to the owner
(through the outbox) in the same transaction, and only that one. The same person's second approval, or one after
the count was complete, is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from assent.contracts import DecisionMade
from assent.db import driver_connection
from assent.outbox import Outbox
from assent.policy import Require, waiting_for
from assent.topics import decisions_of

from . import tables as t
from .projection import INSERT_DECISION
from .rules import RECORD_VERDICTS

HOLD_VERDICT = f"SELECT require FROM {t.policy_verdicts.fullname} WHERE proposal_id = $1 FOR UPDATE"
APPROVERS = f"SELECT actor FROM {t.approvals.fullname} WHERE proposal_id = $1"
INSERT_APPROVAL = (
    f"INSERT INTO {t.approvals.fullname} (proposal_id, actor, decision, via, detail, decision_id)"
    " VALUES ($1, $2, $3, $4, $5, $6)"
)


@dataclass(frozen=True)
class Tally:
    """What became of one approval: whether it ``counted`` (not: its person's was counted already, or the count was
    complete before it), the approvals counted with it, and whether it completed the count (its decision was sent)."""

    counted: bool
    approvals: int
    decided: bool
    detail: str


class SqlApprovals:
    """Counts approvals, and sends the decision the last one completes."""

    def __init__(self, engine: AsyncEngine, outbox: Outbox) -> None:
        self.engine = engine
        self.outbox = outbox

    async def approve(self, message: DecisionMade, verdict: tuple[Any, ...], require: Require) -> Tally:
        """Count ``message``'s actor's approval of its proposal, whose verdict is ``verdict`` (the columns of
        :data:`~gateway.adapters.rules.RECORD_VERDICTS`) and which ``require`` governs; when it is the last one
        needed, record ``message`` and send it, in the same transaction."""
        async with self.outbox.transaction(self.engine) as conn:
            pg = await driver_connection(conn)
            await pg.fetch(RECORD_VERDICTS, *([column] for column in verdict))
            await pg.fetchval(HOLD_VERDICT, message.proposal_id)
            approvers = [row["actor"] for row in await pg.fetch(APPROVERS, message.proposal_id)]
            if message.actor in approvers or len(approvers) >= require.approvals:
                return Tally(False, len(approvers), False, waiting_for(require, len(approvers)))
            approvals = len(approvers) + 1
            decided = approvals >= require.approvals
            detail = (
                f"{approvals} of {require.approvals} approvals: complete"
                if decided
                else waiting_for(require, approvals)
            )
            await pg.execute(
                INSERT_APPROVAL,
                message.proposal_id,
                message.actor,
                message.decision,
                message.via,
                detail,
                message.decision_id if decided else None,
            )
            if decided:
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
            return Tally(True, approvals, decided, detail)
