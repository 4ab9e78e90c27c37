"""Data that a year of use leaves behind, loaded straight into a system's database: resolved proposals of
finished sessions, their decisions and turns, and the inbox rows of their messages, in the gateway's projection
and in the owner's tables. The benchmark (``--preload``) and the query-plan test use it to show that costs stay
flat as data grows."""

from __future__ import annotations

import time

import asyncpg
from sqlalchemy.engine import make_url

PRELOAD = {
    # Resolved proposals of finished sessions, their decisions and turns, and the inbox rows of their messages,
    # in the gateway's projection and in the owner's tables: what a year of use leaves behind.
    "gateway.sessions": """
        INSERT INTO gateway.sessions (session_id, org_id, source_guild_id, operator_user_id, closed_at)
        SELECT 'old-' || s, 'old-org-' || (s % 100), 'old-guild', 'someone', now()
        FROM generate_series(0, :n / 10 - 1) AS s""",
    "gateway.projected_proposals": """
        INSERT INTO gateway.projected_proposals (session_id, seq, proposal_id, tool_call_id, turn_id, step, tool,
            kind, action, section, agent_id, target, base, proposed_hash, lines, widens, reason, card, trace,
            status, resolved_by, resolved_at, result)
        SELECT 'old-' || (i / 10), i % 10, 'old-p-' || i, 'old-c-' || i, 'old-t-' || i, 1, 'studio_edit_memory',
            'memory', 'update', 'Memory', 'old-agent-' || (i % 1000), '{"label": "Memory"}', '{}', 'h',
            '{"added": 1, "removed": 1}', false, 'old', '{}', '{}', 'applied', 'someone', now(), '{}'
        FROM generate_series(0, :n - 1) AS i""",
    "gateway.decisions": """
        INSERT INTO gateway.decisions (decision_id, session_id, seq, proposal_id, decision, actor, via,
            outcome, outcome_at, message_id)
        SELECT 'old-d-' || i, 'old-' || (i / 10), i % 10, 'old-p-' || i, 'apply', 'someone', 'http', '{}', now(),
            gen_random_uuid()
        FROM generate_series(0, :n - 1) AS i""",
    "gateway.turns": """
        INSERT INTO gateway.turns (session_id, turn_id, step, tool_call_ids, continued_at, sends)
        SELECT 'old-' || (i / 10), 'old-t-' || i, 1, jsonb_build_array('old-c-' || i), now(), 1
        FROM generate_series(0, :n - 1) AS i""",
    "gateway.inbox": """
        INSERT INTO gateway.inbox (consumer, message_id)
        SELECT 'gateway:' || (ARRAY['proposals.proposed', 'proposals.outcomes', 'studio.turns'])[1 + i % 3],
            gen_random_uuid()
        FROM generate_series(0, :n - 1) AS i""",
    "edits.sessions": """
        INSERT INTO edits.sessions (session_id, org_id, source_guild_id, operator_user_id, closed_at)
        SELECT 'old-' || s, 'old-org-' || (s % 100), 'old-guild', 'someone', now()
        FROM generate_series(0, :n / 10 - 1) AS s""",
    "edits.proposals": """
        INSERT INTO edits.proposals (proposal_id, session_id, seq, turn_id, step, tool_call_id, tool, kind,
            action, agent_id, target, base, proposed_hash, payload, result, status, resolved_by, resolved_at)
        SELECT 'old-p-' || i, 'old-' || (i / 10), i % 10, 'old-t-' || i, 1, 'old-c-' || i, 'studio_edit_memory',
            'memory', 'update', 'old-agent-' || (i % 1000), '{}', '{}', 'h', '{}', '{}', 'applied', 'someone', now()
        FROM generate_series(0, :n - 1) AS i""",
    "edits.inbox": """
        INSERT INTO edits.inbox (consumer, message_id)
        SELECT 'edits:' || (ARRAY['edits.tool-calls', 'proposals.decided', 'studio.sessions'])[1 + i % 3],
            gen_random_uuid()
        FROM generate_series(0, :n - 1) AS i""",
}


async def preload(database_url: str, n: int) -> float:
    """Load ``n`` resolved proposals, decisions, turns and inbox rows per service; returns the seconds it took.

    Each table is then vacuumed and analysed, and (where the role may) a checkpoint written, as a year's data
    would be by then: otherwise autovacuum's first pass over the fresh rows, and the checkpoint of their WAL,
    would run during whatever is measured next.
    """
    url = make_url(database_url)
    conn = await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
    )
    started = time.perf_counter()
    try:
        for table, statement in PRELOAD.items():
            await conn.execute(statement.replace(":n", str(n)))
            await conn.execute(f"VACUUM (ANALYZE) {table}")
        try:
            await conn.execute("CHECKPOINT")
        except asyncpg.InsufficientPrivilegeError:
            pass  # a role that may not: the server checkpoints on its own schedule
    finally:
        await conn.close()
    return time.perf_counter() - started
