"""The gateway's projection in PostgreSQL: proposals, refused calls, turns, decisions and sessions.

The statements run on every round: on the asyncpg connection inside the unit of work's transaction, or on a
connection of their own (:func:`assent.db.driver_connection`), as fixed texts prepared once per connection. JSONB
values go as JSON text. :class:`ProjectionStore` runs them; the texts a runtime helper runs itself (with a batch's
claim, or with the outbox rows) are exported as they are.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from assent.contracts import CoachInfo, DecisionMade, ProposalOutcome
from assent.db import driver_connection, json_param, update_rows
from assent.outbox import Outbox
from assent.topics import decisions_of

from ..domain.history import DecisionTaken, History, Told
from ..domain.proposals import Proposal
from . import tables as t

# The projection's statements run on every round: on the asyncpg connection inside the unit of work's transaction
# (assent.db.driver_connection), as fixed texts prepared once per connection. JSONB values go as JSON text.

PROPOSAL_COLUMNS = (
    ("message_id", "uuid"),
    ("session_id", "text"),
    ("seq", "integer"),
    ("proposal_id", "text"),
    ("tool_call_id", "text"),
    ("turn_id", "text"),
    ("step", "integer"),
    ("tool", "text"),
    ("kind", "text"),
    ("action", "text"),
    ("section", "text"),
    ("agent_id", "text"),
    ("target", "jsonb"),
    ("base", "jsonb"),
    ("proposed_hash", "text"),
    ("lines", "jsonb"),
    ("widens", "boolean"),
    ("reason", "text"),
    ("card", "jsonb"),
    ("trace", "jsonb"),
)
"""A proposal's columns as :meth:`gateway.handlers.Projection.on_proposed` passes them (one array each), the
message's first."""


@functools.cache
def insert_claimed_proposals(n: int) -> str:
    """The proposals of the messages that the batch's claim (``claimed``) took, from the arrays ``$n``… (one per column
    of :data:`PROPOSAL_COLUMNS`)."""
    names = [name for name, _ in PROPOSAL_COLUMNS]
    arrays = ", ".join(
        f"${n + i}::{'text' if kind == 'jsonb' else kind}[]" for i, (_, kind) in enumerate(PROPOSAL_COLUMNS)
    )
    values = ", ".join(f"r.{name}::jsonb" if kind == "jsonb" else f"r.{name}" for name, kind in PROPOSAL_COLUMNS[1:])
    return (
        f"INSERT INTO {t.projected_proposals.fullname} ({', '.join(names[1:])}) SELECT {values}"
        f" FROM unnest({arrays}) AS r({', '.join(names)})"
        " WHERE r.message_id IN (SELECT message_id FROM claimed) ON CONFLICT DO NOTHING"
    )


INSERT_REFUSED_CALL = (
    f"INSERT INTO {t.refused_calls.fullname} (tool_call_id, session_id, seq, tool, error) VALUES ($1, $2, $3, $4, $5)"
    " ON CONFLICT DO NOTHING"
)

INSERT_COACH = (
    f"INSERT INTO {t.session_coaches.fullname} (session_id, name, channel, model) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT DO NOTHING"
)
"""The coach a session's ``SessionOpened`` names (migration 0013), once."""

INSERT_TURN = (
    f"INSERT INTO {t.turns.fullname} (session_id, turn_id, step, tool_call_ids, continued_at)"
    " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"
)

RECORD_OUTCOME = f"UPDATE {t.decisions.fullname} SET outcome = $2, outcome_at = $3 WHERE decision_id = $1"

MARK_PROPOSAL_STALE = (
    f"WITH recorded AS (UPDATE {t.decisions.fullname} SET outcome = $2, outcome_at = $3 WHERE decision_id = $4)"
    f" UPDATE {t.projected_proposals.fullname} SET stale = true WHERE proposal_id = $1 AND status = 'pending'"
)
"""The decision's outcome recorded, and its proposal marked stale while it stays pending."""

PAUSED = (
    "SELECT tu.session_id, tu.turn_id, tu.step, tu.tool_call_ids, awaited.value AS awaited, r.seq AS proposal_seq,"
    " r.proposal_id, r.kind, r.label, r.status, r.resolved_by, rc.seq AS refused_seq, rc.error_code"
    f" FROM {t.turns.fullname} AS tu"
    " JOIN LATERAL jsonb_array_elements_text(tu.tool_call_ids) AS awaited(value) ON true"
    " LEFT OUTER JOIN LATERAL (SELECT seq, proposal_id, kind, target ->> 'label' AS label, status, resolved_by"
    f" FROM {t.projected_proposals.fullname} WHERE tool_call_id = awaited.value LIMIT 1) AS r ON true"
    " LEFT OUTER JOIN LATERAL (SELECT seq, error ->> 'code' AS error_code"
    f" FROM {t.refused_calls.fullname} WHERE tool_call_id = awaited.value LIMIT 1) AS rc ON true"
    " WHERE tu.session_id = ANY($1::text[]) AND tu.continued_at IS NULL"
    " ORDER BY tu.session_id, tu.ended_at, tu.turn_id, tu.step"
)
"""The paused turns of the sessions ``$1``, one row per awaited call, with that call's proposal or refusal (if any).

Each awaited call is looked up on its own (a lateral subquery, so by index): the planner guesses a hundred calls
per turn, and with statistics from when the tables were small (a plan lasts as long as its connection, until the
next ANALYZE) a join would read every proposal of the table to find one or two.
"""

RESOLVE_PROPOSALS_THEN_PAUSED = (
    "WITH o AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::text[])"
    " WITH ORDINALITY AS o(proposal_id, outcome, resolved_by, resolved_at, result, decision_id, n)),"
    f" recorded AS (UPDATE {t.decisions.fullname} AS d SET outcome = o.result::jsonb, outcome_at = $7 FROM o"
    " WHERE d.decision_id = o.decision_id),"
    f" resolved AS (UPDATE {t.projected_proposals.fullname} AS r SET status = o.outcome, stale = false,"
    " resolved_by = o.resolved_by, resolved_at = o.resolved_at, result = o.result::jsonb"
    " FROM (SELECT DISTINCT ON (proposal_id) * FROM o ORDER BY proposal_id, n) AS o"
    " WHERE r.proposal_id = o.proposal_id AND r.status = 'pending') " + PAUSED.replace("$1", "$8")
)
"""Each outcome (the arrays ``$1``..``$6``, one element each: proposal, outcome, by whom, when, the outcome as JSON,
decision) recorded on its decision and resolving its proposal (unless another decision resolved it first; of two
here, the first), then :data:`PAUSED` of the sessions ``$8``, in one statement (the read sees the tables as they
were before the updates)."""

CONTINUE_TURN = (
    f"UPDATE {t.turns.fullname} SET continued_at = $4, continuation = $5, sends = 1"
    " WHERE session_id = $1 AND turn_id = $2 AND step = $3"
)

CONTINUE_TURNS = update_rows(t.turns, ("session_id", "turn_id", "step"), ("continued_at", "continuation", "sends"))
""":data:`CONTINUE_TURN` of many turns at once: arrays of its arguments, and of ``sends`` (1)."""

SESSION_ORG = f"SELECT org_id FROM {t.sessions.fullname} WHERE session_id = $1"

READ_COLUMNS = tuple(column.name for column in t.projected_proposals.c if column.name in Proposal.model_fields)
"""The columns a :class:`~gateway.domain.proposals.Proposal` is read from (``result`` is its outcome's, which the
decisions hold)."""

POLICY_CONTEXT = (
    ", s.org_id, s.operator_user_id AS operator, coalesce(a.guild_id, s.source_guild_id) AS guild_id,"
    f" (SELECT v.version FROM {t.policies.fullname} AS v WHERE v.org_id = s.org_id AND v.set_at <= r.proposed_at"
    " ORDER BY v.version DESC LIMIT 1) AS policy_version,"
    f" (SELECT c.channel FROM {t.session_coaches.fullname} AS c WHERE c.session_id = s.session_id) AS coach_channel,"
    f" (SELECT c.model FROM {t.session_coaches.fullname} AS c WHERE c.session_id = s.session_id) AS coach_model"
)
"""What a decision on a proposal ``r`` of session ``s`` (its agent ``a``) needs of the policy: the organisation, the
session's operator, the guild the rules match, and the version of the policy in force when it was proposed (NULL:
none; read by the policies' key, one index probe), and the channel and model of the session's coach where its
``SessionOpened`` named them (migration 0013)."""

_PROPOSAL = (
    "SELECT "
    + ", ".join(f"r.{name}" for name in READ_COLUMNS)
    + ", s.org_id AS session_org, a.owners, a.editors"
    + POLICY_CONTEXT
    + f" FROM {t.projected_proposals.fullname} AS r"
    f" JOIN {t.sessions.fullname} AS s ON s.session_id = r.session_id"
    f" LEFT OUTER JOIN {t.agents.fullname} AS a ON a.agent_id = r.agent_id"
)
PROPOSAL_AT = _PROPOSAL + " WHERE r.session_id = $1 AND r.seq = $2"
"""The proposal at a session's seq, with its session's organisation and its agent's owners and editors."""
PROPOSAL_OF = _PROPOSAL + " WHERE r.proposal_id = $1"
"""A proposal by its id, as :data:`PROPOSAL_AT` reads it."""

PROPOSAL_HISTORY = (
    "SELECT r.result ->> 'detail' AS detail, tu.continued_at, tu.continuation ->> 'text' AS told,"
    " line.value AS line, d.decision, d.actor, d.via, d.decided_at, d.outcome ->> 'outcome' AS outcome,"
    " d.outcome ->> 'detail' AS outcome_detail"
    f" FROM {t.projected_proposals.fullname} AS r"
    f" LEFT OUTER JOIN {t.turns.fullname} AS tu"
    " ON tu.session_id = r.session_id AND tu.turn_id = r.turn_id AND tu.step = r.step"
    " LEFT OUTER JOIN LATERAL (SELECT value FROM jsonb_array_elements(tu.continuation -> 'decisions')"
    " WHERE value ->> 'tool_call_id' = r.tool_call_id LIMIT 1) AS line ON true"
    f" LEFT OUTER JOIN {t.decisions.fullname} AS d ON d.proposal_id = r.proposal_id"
    " WHERE r.proposal_id = $1 ORDER BY d.decided_at, d.decision_id"
)
"""A proposal's history (:class:`~gateway.domain.history.History`): one row per decision taken on it, oldest first
(one row with no decision when none was: a superseded proposal), each with the reason of the outcome that resolved
the proposal, and the continuation of the turn that held it (its line for this proposal, its text, when) once the
turn continued. The proposal by its unique id, its turn by its key, its decisions by their index of proposals."""

INSERT_DECISION = (
    f"INSERT INTO {t.decisions.fullname} (decision_id, session_id, seq, proposal_id, decision, actor, via, message_id)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
)

LATEST_PAUSED_TURN = (
    f"SELECT turn_id, step, tool_call_ids, continuation, sends FROM {t.turns.fullname}"
    " WHERE session_id = $1 AND jsonb_array_length(tool_call_ids) > 0 ORDER BY ended_at DESC LIMIT 1"
)
"""The session's latest turn that paused (that waited on at least one call), continued or not."""

DECIDED_OF = (
    f"SELECT count(*) FROM {t.projected_proposals.fullname}"
    " WHERE tool_call_id = ANY($1::text[]) AND status <> 'pending'"
)

COUNT_SEND = f"UPDATE {t.turns.fullname} SET sends = sends + 1 WHERE session_id = $1 AND turn_id = $2 AND step = $3"

DECISION_OUTCOME = f"SELECT outcome FROM {t.decisions.fullname} WHERE decision_id = $1"


AGENTS_OF = (
    f"SELECT proposal_id, agent_id FROM {t.projected_proposals.fullname}"
    " WHERE proposal_id = ANY($1::text[]) AND agent_id IS NOT NULL"
)


class ProjectionStore:
    """The projection's statements over one asyncpg connection (in the caller's transaction, if it has one)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    @classmethod
    async def over(cls, conn: AsyncConnection) -> ProjectionStore:
        return cls(await driver_connection(conn))

    async def agents_of(self, proposal_ids: list[str]) -> list[tuple[str, str]]:
        """``(proposal_id, agent_id)`` of each projected proposal of ``proposal_ids`` that names an agent."""
        rows = await self.conn.fetch(AGENTS_OF, proposal_ids)
        return [(row["proposal_id"], row["agent_id"]) for row in rows]

    async def record_refused_call(self, tool_call_id: str, session_id: str, seq: int, tool: str, error: Any) -> None:
        await self.conn.execute(INSERT_REFUSED_CALL, tool_call_id, session_id, seq, tool, json_param(error))

    async def record_coach(self, session_id: str, coach: CoachInfo) -> None:
        """Keep the coach a session's ``SessionOpened`` names (:data:`INSERT_COACH`); a second time changes nothing."""
        await self.conn.execute(INSERT_COACH, session_id, coach.name, coach.channel, coach.model)

    async def add_turns(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Record ended steps: (session, turn, step, awaited call ids as JSON text, continued at), once each."""
        await self.conn.executemany(INSERT_TURN, rows)

    async def paused(self, session_ids: Sequence[str]) -> list[asyncpg.Record]:
        """:data:`PAUSED`: the sessions' paused turns, a row per awaited call with its proposal or refusal."""
        return list(await self.conn.fetch(PAUSED, list(session_ids)))

    async def record_outcome(self, message: ProposalOutcome, at: datetime) -> None:
        """An outcome that resolves nothing, on its decision; a stale one also marks its proposal stale."""
        outcome = json_param(message.model_dump(mode="json"))
        if message.outcome == "stale":
            await self.conn.execute(MARK_PROPOSAL_STALE, message.proposal_id, outcome, at, message.decision_id)
        else:
            await self.conn.execute(RECORD_OUTCOME, message.decision_id, outcome, at)

    async def resolve_then_paused(
        self, messages: Sequence[ProposalOutcome], at: datetime, session_ids: Sequence[str]
    ) -> list[asyncpg.Record]:
        """:data:`RESOLVE_PROPOSALS_THEN_PAUSED`: the outcomes resolve their proposals, then the sessions' paused
        turns as they were before (one statement)."""
        return list(
            await self.conn.fetch(
                RESOLVE_PROPOSALS_THEN_PAUSED,
                [m.proposal_id for m in messages],
                [m.outcome for m in messages],
                [m.resolved_by for m in messages],
                [m.resolved_at for m in messages],
                [json_param(m.model_dump(mode="json")) for m in messages],
                [m.decision_id for m in messages],
                at,
                list(session_ids),
            )
        )

    async def continue_turns(self, continued: Sequence[tuple[Any, ...]]) -> None:
        """Mark turns continued: the arguments of :data:`CONTINUE_TURN` for each."""
        await self.conn.executemany(CONTINUE_TURN, continued)

    async def session_org(self, session_id: str) -> str | None:
        return cast("str | None", await self.conn.fetchval(SESSION_ORG, session_id))

    async def proposal_at(self, session_id: str, seq: int) -> tuple[Proposal, str] | None:
        """:data:`PROPOSAL_AT`: the proposal, and its session's organisation."""
        return _walled(await self.conn.fetchrow(PROPOSAL_AT, session_id, seq))

    async def proposal_of(self, proposal_id: str) -> tuple[Proposal, str] | None:
        """:data:`PROPOSAL_OF`: the proposal, and its session's organisation."""
        return _walled(await self.conn.fetchrow(PROPOSAL_OF, proposal_id))

    async def history(self, proposal_id: str) -> History:
        """:data:`PROPOSAL_HISTORY`: what became of the proposal (nothing when there is no such proposal)."""
        return read_history(await self.conn.fetch(PROPOSAL_HISTORY, proposal_id))

    async def latest_paused_turn(self, session_id: str) -> asyncpg.Record | None:
        """:data:`LATEST_PAUSED_TURN`: its turn, step, awaited calls, continuation (None until continued), sends."""
        return await self.conn.fetchrow(LATEST_PAUSED_TURN, session_id)

    async def decided_of(self, tool_call_ids: Sequence[str]) -> int:
        """How many of the proposals made by ``tool_call_ids`` are no longer pending."""
        return cast(int, await self.conn.fetchval(DECIDED_OF, list(tool_call_ids)))

    async def count_send(self, session_id: str, turn_id: str, step: int) -> None:
        """One more send of the turn's continuation."""
        await self.conn.execute(COUNT_SEND, session_id, turn_id, step)


class SqlDecisions:
    """Decisions in the projection: recorded with their message in one statement, and their outcomes read back."""

    def __init__(self, engine: AsyncEngine, outbox: Outbox) -> None:
        self.engine = engine
        self.outbox = outbox

    async def record(self, message: DecisionMade) -> None:
        """The decision and its ``DecisionMade`` (to the outbox) in one statement: no BEGIN or COMMIT round trip."""
        row = (
            message.decision_id,
            message.session_id,
            message.seq,
            message.proposal_id,
            message.decision,
            message.actor,
            message.via,
            message.id,
        )
        async with self.engine.connect() as conn:
            await self.outbox.write_with(
                conn, INSERT_DECISION, row, [(decisions_of(message.kind), message.session_id, message)]
            )

    async def outcome(self, decision_id: str) -> ProposalOutcome | None:
        """The decision's outcome as the projection holds it (None until it arrived)."""
        async with self.engine.connect() as conn:
            outcome = await (await driver_connection(conn)).fetchval(DECISION_OUTCOME, decision_id)
        return None if outcome is None else ProposalOutcome.model_validate(outcome)


def read_proposal(row: asyncpg.Record) -> Proposal:
    """A row of :data:`READ_COLUMNS` as a :class:`~gateway.domain.proposals.Proposal`, with its agent's ``owners``
    and ``editors`` where the row joins them (none: empty)."""
    values = dict(row)
    for people in ("owners", "editors"):
        if people in values:
            values[people] = tuple(values[people] or ())
    return Proposal.model_validate(values)


def read_history(rows: Sequence[asyncpg.Record]) -> History:
    """The rows of :data:`PROPOSAL_HISTORY` (each a mapping of its columns) as a proposal's
    :class:`~gateway.domain.history.History`."""
    if not rows:
        return History()
    first = rows[0]
    told = None
    if first["continued_at"] is not None and first["line"] is not None:
        told = Told(line=first["line"], text=first["told"] or "", continued_at=first["continued_at"])
    decisions = tuple(
        DecisionTaken(
            decision=row["decision"],
            actor=row["actor"],
            via=row["via"],
            decided_at=row["decided_at"],
            outcome=row["outcome"],
            detail=row["outcome_detail"],
        )
        for row in rows
        if row["decision"] is not None
    )
    return History(detail=first["detail"], decisions=decisions, told=told)


def _walled(row: asyncpg.Record | None) -> tuple[Proposal, str] | None:
    return None if row is None else (read_proposal(row), row["session_org"])
