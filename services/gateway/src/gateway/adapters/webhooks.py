"""Webhooks: each organisation's (``gateway.webhooks``, migration 0011), the events they are told of, and their
deliveries, signed, retried, logged.

:class:`WebhookWorker` runs in every gateway process, beside the rounds and never in them. Every ``every`` seconds,
one at a time across replicas (a transaction-scoped advisory lock of its own), it reads the entries of each
organisation's history after its cursor (``gateway.webhook_cursors``), in position order, and in one transaction
writes a delivery (``gateway.webhook_deliveries``) for each event and each webhook told of it, and moves the cursor:
an entry is read once, and a gateway killed before the commit leaves nothing, after it everything. An entry
``proposed`` is the event ``proposed``; ``decided``, ``decided`` (but the expiry a rule sends); ``outcome`` with the
outcome ``expired``, ``expired``. In the same way it sends the ``escalated`` event of each proposal whose
``escalate`` rule's wait passed while it still waits, once (``gateway.policy_verdicts.escalated_at``).

Which webhooks are told: those subscribed to the event, made before it happened, and, where the policy the proposal
was judged by names the webhook in a ``notify`` rule, only when such a rule matches the proposal (a webhook no
``notify`` rule names is told of every event it subscribes to). An escalation is told to the webhooks its rule names.

The deliveries are the webhooks' outbox: sent by the same worker, never in a request, each in a task of its own
(``concurrency`` at most at once), so a receiver that hangs or fails delays no other. A delivery is claimed (its
attempt counted, and its next try moved past the time an attempt may take) in a transaction of its own before it
is sent, so two replicas never send the same attempt, and a gateway killed while sending tries it again once the
claim lapsed. A 2xx answer delivers it; anything else is tried again after a wait that doubles, until
``give_up`` seconds passed: then it is dead, and an admin may replay it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from assent.db import driver_connection
from assent.faults import crash_point
from assent.kinds import EXPIRE, KINDS
from assent.policy import Policy, Proposed, evaluate

from ..domain.webhooks import Happened, body, headers, link, retry_at
from . import tables as t

log = logging.getLogger(__name__)

WEBHOOKS_LOCK = 0x6173_7365_6E74_7768  # "assentwh": one reader of the history for webhooks at a time
WEBHOOK_COLUMNS = "webhook_id, org_id, name, url, events, format, created_by, created_at"
INSERT_WEBHOOK = (
    f"INSERT INTO {t.webhooks.fullname} (webhook_id, org_id, name, url, secret, events, format, created_by, created_at)"
    f" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {WEBHOOK_COLUMNS}"
)
START_CURSOR = (
    f"INSERT INTO {t.webhook_cursors.fullname} (org_id, position)"
    f" SELECT $1, coalesce((SELECT position FROM {t.history_heads.fullname} WHERE org_id = $1), -1)"
    " ON CONFLICT DO NOTHING"
)
LIST_WEBHOOKS = f"SELECT {WEBHOOK_COLUMNS} FROM {t.webhooks.fullname} WHERE org_id = $1 ORDER BY name"
ONE_WEBHOOK = f"SELECT {WEBHOOK_COLUMNS} FROM {t.webhooks.fullname} WHERE org_id = $1 AND name = $2"
DELETE_WEBHOOK = f"DELETE FROM {t.webhooks.fullname} WHERE org_id = $1 AND name = $2 RETURNING {WEBHOOK_COLUMNS}"
DELIVERY_COLUMNS = (
    "d.delivery_id, w.name AS webhook, d.event, d.proposal_id, d.body, d.attempts, d.status, d.next_at,"
    " d.last_status, d.last_error, d.created_at, d.delivered_at"
)
DELIVERIES = (
    f"SELECT {DELIVERY_COLUMNS} FROM {t.webhook_deliveries.fullname} AS d"
    f" JOIN {t.webhooks.fullname} AS w ON w.webhook_id = d.webhook_id"
    " WHERE d.org_id = $1 AND ($2::text IS NULL OR w.name = $2) AND ($3::text IS NULL OR d.status = $3)"
    " ORDER BY d.created_at DESC, d.delivery_id DESC LIMIT $4"
)
REPLAY = (
    f"UPDATE {t.webhook_deliveries.fullname} AS d SET status = 'pending', next_at = $3, tried_since = $3,"
    " last_error = NULL"
    f" FROM {t.webhooks.fullname} AS w"
    " WHERE d.delivery_id = $1 AND d.org_id = $2 AND d.status = 'dead' AND w.webhook_id = d.webhook_id"
    f" RETURNING {DELIVERY_COLUMNS}"
)
ONE_DELIVERY = (
    f"SELECT {DELIVERY_COLUMNS} FROM {t.webhook_deliveries.fullname} AS d"
    f" JOIN {t.webhooks.fullname} AS w ON w.webhook_id = d.webhook_id WHERE d.delivery_id = $1 AND d.org_id = $2"
)

CONFIGURED = (
    f"SELECT EXISTS (SELECT 1 FROM {t.webhooks.fullname}) AS webhooks,"
    f" EXISTS (SELECT 1 FROM {t.policies.fullname}) AS policies"
)
"""Whether any organisation has a webhook (without one no entry is collected and no delivery claimed: both read
only organisations' with a webhook), and whether any has a policy (an escalation comes only from a policy's
verdict)."""
NEW_ENTRIES = (
    "SELECT h.org_id, h.position, h.type, h.at, h.proposal_id, h.actor, h.decision, h.outcome"
    f" FROM {t.webhook_cursors.fullname} AS c"
    f" JOIN {t.history.fullname} AS h ON h.org_id = c.org_id AND h.position > c.position"
    f" WHERE EXISTS (SELECT 1 FROM {t.webhooks.fullname} AS w WHERE w.org_id = c.org_id)"
    " ORDER BY h.org_id, h.position LIMIT $1"
)
"""The entries after each cursor, of organisations with a webhook."""
MOVE_CURSORS = (
    f"UPDATE {t.webhook_cursors.fullname} AS c SET position = m.position"
    " FROM unnest($1::text[], $2::bigint[]) AS m (org_id, position) WHERE c.org_id = m.org_id"
)
PROPOSALS = (
    "SELECT p.proposal_id, p.session_id, p.seq, p.kind, p.action, p.agent_id, p.status,"
    " coalesce(a.guild_id, s.source_guild_id) AS guild_id, p.target ->> 'label' AS label,"
    " p.target ->> 'path' AS path, coalesce((p.lines ->> 'added')::int, 0) AS added,"
    " coalesce((p.lines ->> 'removed')::int, 0) AS removed, p.widens, p.proposed_at, s.org_id,"
    " pol.version, pol.document, v.escalation_rule"
    f" FROM {t.projected_proposals.fullname} AS p"
    f" JOIN {t.sessions.fullname} AS s ON s.session_id = p.session_id"
    f" LEFT OUTER JOIN {t.agents.fullname} AS a ON a.agent_id = p.agent_id"
    f" LEFT OUTER JOIN {t.policy_verdicts.fullname} AS v ON v.proposal_id = p.proposal_id"
    f" LEFT JOIN LATERAL (SELECT pv.version, pv.document FROM {t.policies.fullname} AS pv"
    "   WHERE pv.org_id = s.org_id AND (pv.version = v.version OR v.version IS NULL AND pv.set_at <= p.proposed_at)"
    "   ORDER BY pv.version DESC LIMIT 1) AS pol ON true"
    " WHERE p.proposal_id = ANY($1::text[])"
)
"""The proposals the events are of, as the rules read them, with the policy they were (or are) judged by."""
WEBHOOKS_OF = (
    f"SELECT webhook_id, org_id, name, secret, events, format, created_at FROM {t.webhooks.fullname}"
    " WHERE org_id = ANY($1::text[])"
)
DUE_ESCALATIONS = (
    f"SELECT v.proposal_id FROM {t.policy_verdicts.fullname} AS v"
    " WHERE v.escalates_at IS NOT NULL AND v.escalated_at IS NULL AND v.escalates_at <= $1"
    " ORDER BY v.escalates_at LIMIT $2"
)
ESCALATED = f"UPDATE {t.policy_verdicts.fullname} SET escalated_at = $2 WHERE proposal_id = ANY($1::text[])"
INSERT_DELIVERIES = (
    f"INSERT INTO {t.webhook_deliveries.fullname}"
    " (delivery_id, org_id, webhook_id, event, proposal_id, body, next_at, created_at, tried_since)"
    " SELECT d, o, w, e, p, b, $7, $7, $7"
    " FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[]) AS u (d, o, w, e, p, b)"
)
CLAIM = (
    f"UPDATE {t.webhook_deliveries.fullname} AS d SET attempts = d.attempts + 1, next_at = $2"
    f" FROM {t.webhooks.fullname} AS w"
    f" WHERE d.delivery_id IN (SELECT delivery_id FROM {t.webhook_deliveries.fullname}"
    "   WHERE status = 'pending' AND next_at <= $1 ORDER BY next_at LIMIT $3 FOR UPDATE SKIP LOCKED)"
    " AND w.webhook_id = d.webhook_id"
    " RETURNING d.delivery_id, d.event, d.body, d.attempts, d.tried_since, w.url, w.secret"
)
"""Up to ``$3`` due deliveries, each with its attempt counted and its next try moved to ``$2`` (past the time an
attempt may take), so no other sender takes it meanwhile."""
RECORD = (
    f"UPDATE {t.webhook_deliveries.fullname} SET status = $3, next_at = $4, last_status = $5, last_error = $6,"
    " delivered_at = $7 WHERE delivery_id = $1 AND attempts = $2 AND status = 'pending'"
)


@dataclass(frozen=True)
class Webhook:
    name: str
    url: str
    events: list[str]
    format: str
    created_by: str
    created_at: datetime


class NameTaken(Exception):
    """A webhook of this name exists in the organisation."""


def _webhook(row: asyncpg.Record) -> Webhook:
    return Webhook(row["name"], row["url"], list(row["events"]), row["format"], row["created_by"], row["created_at"])


def _delivery(row: asyncpg.Record) -> dict[str, Any]:
    values = dict(row)
    try:
        values["body"] = json.loads(bytes(values["body"]))
    except ValueError:
        values["body"] = None
    return values


class WebhookStore:
    """Reads and writes the webhooks and their deliveries, each organisation's own."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(
        self, org_id: str, name: str, url: str, events: list[str], fmt: str, actor: str
    ) -> tuple[Webhook, str]:
        """A new webhook, and its secret (generated here, answered this once); :class:`NameTaken`."""
        secret = f"whsec_{secrets.token_urlsafe(32)}"
        async with self.engine.connect() as sa_conn:
            conn = await driver_connection(sa_conn)
            async with conn.transaction():
                try:
                    row = await conn.fetchrow(
                        INSERT_WEBHOOK,
                        f"whk_{uuid.uuid4().hex}",
                        org_id,
                        name,
                        url,
                        secret,
                        events,
                        fmt,
                        actor,
                        datetime.now(UTC),
                    )
                except asyncpg.UniqueViolationError:
                    raise NameTaken(name) from None
                # The worker reads the organisation's history from here on.
                await conn.execute(START_CURSOR, org_id)
        assert row is not None
        return _webhook(row), secret

    async def all(self, org_id: str) -> list[Webhook]:
        async with self.engine.connect() as conn:
            rows = await (await driver_connection(conn)).fetch(LIST_WEBHOOKS, org_id)
        return [_webhook(row) for row in rows]

    async def exists(self, org_id: str, name: str) -> bool:
        async with self.engine.connect() as conn:
            return await (await driver_connection(conn)).fetchrow(ONE_WEBHOOK, org_id, name) is not None

    async def delete(self, org_id: str, name: str) -> Webhook | None:
        """Remove a webhook, with its deliveries; ``None`` where the organisation has none of this name."""
        async with self.engine.connect() as sa_conn:
            conn = await driver_connection(sa_conn)
            async with conn.transaction():
                row = await conn.fetchrow(DELETE_WEBHOOK, org_id, name)
        return None if row is None else _webhook(row)

    async def deliveries(self, org_id: str, name: str | None, status: str | None, limit: int) -> list[dict[str, Any]]:
        """The deliveries, newest first: of one webhook (``name``) or all, of one status or all."""
        async with self.engine.connect() as conn:
            rows = await (await driver_connection(conn)).fetch(DELIVERIES, org_id, name, status, limit)
        return [_delivery(row) for row in rows]

    async def replay(self, org_id: str, delivery_id: str) -> tuple[dict[str, Any] | None, bool]:
        """A dead delivery back to pending, tried again from now as if new: ``(delivery, True)``; ``(delivery,
        False)`` where it is not dead; ``(None, False)`` where the organisation has no such delivery."""
        async with self.engine.connect() as sa_conn:
            conn = await driver_connection(sa_conn)
            async with conn.transaction():
                row = await conn.fetchrow(REPLAY, delivery_id, org_id, datetime.now(UTC))
                if row is not None:
                    return _delivery(row), True
                found = await conn.fetchrow(ONE_DELIVERY, delivery_id, org_id)
        return (None if found is None else _delivery(found)), False


def _proposed(row: Any) -> Proposed:
    return Proposed(
        kind=row["kind"],
        action=row["action"],
        agent_id=row["agent_id"],
        guild_id=row["guild_id"],
        label=row["label"] or "",
        path=row["path"],
        lines=row["added"] + row["removed"],
        widens=row["widens"],
        proposed_at=row["proposed_at"],
    )


def _policy(row: Any) -> Policy | None:
    document = row["document"]
    if document is None:
        return None
    return Policy.model_validate(json.loads(document) if isinstance(document, str) else document)


def told(webhook: Any, event: str, at: datetime, policy: Policy | None, version: int, proposed: Proposed) -> bool:
    """Whether ``webhook`` is told of ``event`` of a proposal judged by ``policy``: it subscribes to the event, was
    made before it, and, where a ``notify`` rule of the policy names it, such a rule matches the proposal."""
    if event not in webhook["events"] or webhook["created_at"] > at:
        return False
    if policy is None:
        return True
    named = {name for rule in policy.rules for name in rule.notify or ()}
    if webhook["name"] not in named:
        return True
    return any(webhook["name"] in (rule.notify or ()) for rule in evaluate(policy, version, proposed).notify)


class WebhookWorker:
    """Writes the deliveries of new events every ``every`` seconds, and sends them."""

    def __init__(
        self,
        engine: AsyncEngine,
        ready: Callable[[], bool],
        *,
        console_url: str = "",
        every: float = 0.5,
        timeout: float = 5.0,
        retry: float = 5.0,
        give_up: float = 3600.0,
        concurrency: int = 16,
        batch: int = 500,
    ) -> None:
        self.engine = engine
        self.ready = ready
        self.console_url = console_url
        self.every = every
        self.timeout = timeout
        self.retry = retry
        self.give_up = give_up
        self.concurrency = concurrency
        self.batch = batch
        self._task: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None
        self._policies = False

    def start(self) -> None:
        self._client = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)
        self._task = asyncio.create_task(self._run(), name="webhooks")

    async def stop(self) -> None:
        for task in [self._task, *self._sending]:
            if task is not None:
                task.cancel()
        for task in [self._task, *self._sending]:
            if task is not None:
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        if self._client is not None:
            await self._client.aclose()

    async def configured(self) -> tuple[bool, bool]:
        """:data:`CONFIGURED`: whether any webhook exists, and whether any policy does. A policy's versions are all
        kept, so once one exists it is not asked again; webhooks come and go."""
        async with self.engine.connect() as sa_conn:
            row = await (await driver_connection(sa_conn)).fetchrow(CONFIGURED)
        assert row is not None  # one row, always
        self._policies = self._policies or bool(row["policies"])
        return bool(row["webhooks"]), self._policies

    async def _run(self) -> None:
        while True:
            try:
                # With no webhook and no policy anywhere there is nothing to collect, escalate or send: one probe a
                # period instead of three transactions.
                webhooks, policies = await self.configured()
                if self.ready():
                    while webhooks and await self.collect_once() == self.batch:
                        pass
                    while policies and await self.escalate_once() == self.batch:
                        pass
                if webhooks:
                    await self.send_due()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("could not deliver the webhooks' events; trying again", exc_info=True)
            await asyncio.sleep(self.every)

    async def collect_once(self) -> int:
        """Write the deliveries of up to ``batch`` new entries of the organisations' histories, and move their
        cursors, in one transaction; answers how many entries were read (0: none, or another replica holds the
        lock)."""
        now = datetime.now(UTC)
        async with self.engine.connect() as sa_conn:
            pg = await driver_connection(sa_conn)
            async with pg.transaction():
                if not await pg.fetchval("SELECT pg_try_advisory_xact_lock($1)", WEBHOOKS_LOCK):
                    return 0
                entries = await pg.fetch(NEW_ENTRIES, self.batch)
                if not entries:
                    return 0
                events = [(entry, event_of(entry)) for entry in entries]
                ids = sorted({e["proposal_id"] for e, event in events if event and e["proposal_id"]})
                proposals = {row["proposal_id"]: row for row in await pg.fetch(PROPOSALS, ids)} if ids else {}
                hooks = await self._webhooks(pg, {e["org_id"] for e in entries})
                rows: list[tuple[Any, ...]] = []
                for entry, event in events:
                    proposal = proposals.get(entry["proposal_id"])
                    if event is None or proposal is None:
                        continue
                    policy, proposed = _policy(proposal), _proposed(proposal)
                    for hook in hooks.get(entry["org_id"], ()):
                        if told(hook, event, entry["at"], policy, proposal["version"] or 0, proposed):
                            rows.append(self._delivery(hook, event, entry["at"], proposal, entry))
                await self._insert(pg, rows, now)
                last: dict[str, int] = {}
                for entry in entries:
                    last[entry["org_id"]] = max(last.get(entry["org_id"], -1), entry["position"])
                await pg.execute(MOVE_CURSORS, list(last), list(last.values()))
                if rows:  # a fault test's crash as deliveries are written, not as other entries are passed over
                    crash_point("gateway.webhooks.collect.before_commit")
        return len(entries)

    async def escalate_once(self, now: datetime | None = None) -> int:
        """Write the ``escalated`` deliveries of the proposals whose escalation is due (up to ``batch``), each once:
        marked escalated in the same transaction (one resolved meanwhile is marked with nothing sent)."""
        now = now or datetime.now(UTC)
        async with self.engine.connect() as sa_conn:
            pg = await driver_connection(sa_conn)
            async with pg.transaction():
                if not await pg.fetchval("SELECT pg_try_advisory_xact_lock($1)", WEBHOOKS_LOCK):
                    return 0
                due = [row["proposal_id"] for row in await pg.fetch(DUE_ESCALATIONS, now, self.batch)]
                if not due:
                    return 0
                proposals = await pg.fetch(PROPOSALS, due)
                hooks = await self._webhooks(pg, {row["org_id"] for row in proposals})
                rows = []
                for proposal in proposals:
                    policy = _policy(proposal)
                    if proposal["status"] != "pending" or policy is None:
                        continue
                    rule = next((r for r in policy.rules if r.name == proposal["escalation_rule"]), None)
                    names = set() if rule is None or rule.escalate is None else set(rule.escalate.webhooks)
                    for hook in hooks.get(proposal["org_id"], ()):
                        if hook["name"] in names and "escalated" in hook["events"]:
                            rows.append(
                                self._delivery(hook, "escalated", now, proposal, None, rule=proposal["escalation_rule"])
                            )
                await self._insert(pg, rows, now)
                await pg.execute(ESCALATED, due, now)
                crash_point("gateway.webhooks.escalate.before_commit")
        return len(due)

    async def send_due(self) -> int:
        """Claim the due deliveries (as many as ``concurrency`` allows besides those in flight) and send each in a
        task of its own; answers how many were claimed."""
        room = self.concurrency - len(self._sending)
        if room <= 0 or self._client is None:
            return 0
        now = datetime.now(UTC)
        lease = now + timedelta(seconds=self.timeout * 2 + 5)  # an attempt is cut at ``timeout``; then recorded
        async with self.engine.connect() as sa_conn:
            pg = await driver_connection(sa_conn)
            async with pg.transaction():
                claimed = await pg.fetch(CLAIM, now, lease, room)
        for row in claimed:
            task = asyncio.create_task(self._send(dict(row)), name=f"webhook {row['delivery_id']}")
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        return len(claimed)

    async def _send(self, row: dict[str, Any]) -> None:
        assert self._client is not None
        payload = bytes(row["body"])
        status: int | None = None
        error: str | None = None
        try:
            sent = headers(row["secret"], int(time.time()), payload, row["delivery_id"], row["event"])
            crash_point("gateway.webhooks.before_send")
            async with asyncio.timeout(self.timeout):
                answer = await self._client.post(row["url"], content=payload, headers=sent)
            status = answer.status_code
            if not 200 <= status < 300:
                error = f"answered {status}"
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            error = f"no answer within {self.timeout:g} s"
        except Exception as exc:  # a receiver that cannot be reached, or answers nonsense
            error = f"{type(exc).__name__}: {exc}"[:500]
        crash_point("gateway.webhooks.after_send")
        now = datetime.now(UTC)
        if error is None:
            values: tuple[Any, ...] = ("delivered", now, status, None, now)
        else:
            then = retry_at(row["attempts"], now, row["tried_since"], self.retry, self.give_up)
            values = ("dead", now, status, error, None) if then is None else ("pending", then, status, error, None)
        try:
            async with self.engine.connect() as sa_conn:
                pg = await driver_connection(sa_conn)
                async with pg.transaction():
                    await pg.execute(RECORD, row["delivery_id"], row["attempts"], *values)
        except Exception:
            log.warning("could not record a webhook delivery's attempt; it is tried again", exc_info=True)

    async def _webhooks(self, pg: Any, orgs: set[str]) -> dict[str, list[Any]]:
        found: dict[str, list[Any]] = {}
        for row in await pg.fetch(WEBHOOKS_OF, sorted(orgs)):
            found.setdefault(row["org_id"], []).append(row)
        return found

    def _delivery(
        self, hook: Any, event: str, at: datetime, proposal: Any, entry: Any, rule: str | None = None
    ) -> tuple[Any, ...]:
        delivery_id = f"dlv_{uuid.uuid4().hex}"
        spec = KINDS.get(proposal["kind"])
        happened = Happened(
            event=event,
            org_id=proposal["org_id"],
            at=at,
            proposal_id=proposal["proposal_id"],
            session_id=proposal["session_id"],
            seq=proposal["seq"],
            kind=proposal["kind"],
            action=proposal["action"],
            target=proposal["label"] or proposal["path"],
            lines_added=proposal["added"],
            lines_removed=proposal["removed"],
            actor=None if entry is None else entry["actor"],
            decision=None if entry is None else entry["decision"],
            outcome=None if entry is None else entry["outcome"],
            rule=rule,
            link=link(
                self.console_url, proposal["session_id"], None if spec is None else spec.endpoint, proposal["seq"]
            ),
        )
        return (
            delivery_id,
            proposal["org_id"],
            hook["webhook_id"],
            event,
            proposal["proposal_id"],
            body(happened, hook["name"], delivery_id, hook["format"]),
        )

    @staticmethod
    async def _insert(pg: Any, rows: list[tuple[Any, ...]], now: datetime) -> None:
        if rows:
            await pg.execute(INSERT_DELIVERIES, *(list(column) for column in zip(*rows, strict=True)), now)


def event_of(entry: Any) -> str | None:
    """The event a history entry is, if any: ``proposed``, ``decided``, ``expired``."""
    if entry["type"] == "proposed":
        return "proposed"
    if entry["type"] == "decided" and entry["decision"] != EXPIRE:  # an expiry is told as ``expired``
        return "decided"
    if entry["type"] == "outcome" and entry["outcome"] == "expired":
        return "expired"
    return None
