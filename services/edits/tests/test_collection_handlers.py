"""The edits service's handlers over the collection kind (OwnerKit + CollectionKind) on an in-memory unit of work."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assent.contracts import DecisionMade, ProposalOutcome, ProposalProposed, SessionContext, ToolCall, ToolResult
from assent.domain import Agent, Guild
from assent.runtime import OwnerKit
from assent.testing import FakeUnitOfWork, FakeWorkspace, shown_line_counts
from assent.topics import PROPOSALS_OUTCOMES, PROPOSALS_PROPOSED, TOOL_RESULTS
from edits.adapters.collections import CollectionsRepository
from edits.domain.collections import AccessRow, ColumnPlan, ColumnSpec, LiveCollection, Logged, RecordCounts, convert
from edits.domain.model import WriteOrigin
from edits.kinds.collection import CollectionKind
from edits_contract.collections import RecordOut

ORG, GUILD, SESSION, OPERATOR = "org", "guild", "s1", "operator@example.com"
CONTEXT = SessionContext(org_id=ORG, source_guild_id=GUILD, operator_user_id=OPERATOR)
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@dataclass
class FakeCollectionsRepository:
    """The CollectionsRepository methods the collection kind calls, in memory; records are changed with the rules'
    own :func:`convert` (PostgreSQL's are compared with it in the integration tests)."""

    collections: dict[str, LiveCollection] = field(default_factory=dict)
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    log_entries: list[dict[str, Any]] = field(default_factory=list)
    locked: list[str] = field(default_factory=list)
    clock: datetime = T0

    def tick(self) -> datetime:
        self.clock += timedelta(seconds=1)
        return self.clock

    def place(self, name: str, columns: tuple[ColumnSpec, ...], rows: list[dict[str, Any]], **more: Any) -> str:
        cid = f"col_{name}"
        self.collections[cid] = LiveCollection(
            **{
                "collection_id": cid,
                "org_id": ORG,
                "name": name,
                "purpose": f"Track {name}",
                "scope": "guild",
                "guild_id": GUILD,
                "columns": columns,
                "access": (AccessRow("guild", GUILD, "write"),),
                "version": 1,
                "updated_at": self.tick(),
                **more,
            }
        )
        self.rows[cid] = [dict(r) for r in rows]
        return cid

    def _with_count(self, live: LiveCollection) -> LiveCollection:
        return replace(live, records=len(self.rows.get(live.collection_id, [])))

    async def get(self, collection_id: str, *, for_update: bool = False) -> LiveCollection | None:
        if for_update:
            self.locked.append(collection_id)
        live = self.collections.get(collection_id)
        return None if live is None else self._with_count(live)

    async def by_ref(self, org_id: str, ref: str, *, for_update: bool = False) -> LiveCollection | None:
        for live in self.collections.values():
            if live.org_id == org_id and live.collection_id == ref:
                return await self.get(live.collection_id, for_update=for_update)
        for live in self.collections.values():
            if live.org_id == org_id and live.name == ref:
                return await self.get(live.collection_id, for_update=for_update)
        return None

    async def of_org(self, org_id: str) -> list[LiveCollection]:
        return sorted(
            (self._with_count(c) for c in self.collections.values() if c.org_id == org_id), key=lambda c: c.name
        )

    async def name_taken(self, org_id: str, name: str, *, other_than: str | None = None) -> bool:
        return any(
            c.org_id == org_id and c.name == name and c.collection_id != other_than for c in self.collections.values()
        )

    async def records(self, collection_id: str, offset: int, limit: int) -> list[RecordOut]:
        rows = self.rows[collection_id][offset : offset + limit]
        return [RecordOut(record_id=offset + i + 1, values=r) for i, r in enumerate(rows)]

    async def counts(self, collection_id: str, plan: ColumnPlan | None) -> RecordCounts:
        rows = self.rows[collection_id]

        def present(row: dict[str, Any], name: str) -> bool:
            return row.get(name) is not None

        names = {c.name for c in self.collections[collection_id].columns}
        unconvertible, kept = {}, {}
        for old, _, _, to in plan.retyped if plan else ():
            staying = [r[old] for r in rows if present(r, old) and not convert(r[old], to)[0]]
            unconvertible[(old, to)] = len(staying)
            kept[(old, to)] = tuple(dict.fromkeys(staying))[:3]
        duplicates = {}
        for old, _ in plan.now_unique if plan else ():
            if old is not None:
                values = [r[old] for r in rows if present(r, old)]
                duplicates[old] = sum(1 for v in values if values.count(v) > 1)
        return RecordCounts(
            total=len(rows),
            present={n: sum(1 for r in rows if present(r, n)) for n in names},
            unconvertible=unconvertible,
            missing={n: sum(1 for r in rows if not present(r, n)) for n in names},
            duplicates=duplicates,
            kept=kept,
        )

    async def create(
        self,
        org_id: str,
        name: str,
        purpose: str,
        scope: str,
        guild_id: str | None,
        columns: Any,
        access: Any,
        *,
        actor: str,
    ) -> str | None:
        if await self.name_taken(org_id, name):
            return None
        cid = f"col_{uuid.uuid4().hex[:8]}"
        self.collections[cid] = LiveCollection(
            cid, org_id, name, purpose, scope, guild_id, tuple(columns), tuple(access), 1, self.tick()
        )
        self.rows[cid] = []
        return cid

    async def update(self, collection_id: str, name: str, purpose: str, columns: Any, *, actor: str) -> None:
        live = self.collections[collection_id]
        self.collections[collection_id] = replace(
            live, name=name, purpose=purpose, columns=tuple(columns), version=live.version + 1, updated_at=self.tick()
        )

    async def transform(self, collection_id: str, plan: ColumnPlan, *, actor: str) -> int:
        changed = 0
        moved = {old: (new, None) for old, new in plan.renamed} | {o: (n, to) for o, n, _, to in plan.retyped}
        for row in self.rows[collection_id]:
            if not any(k in row for k in (*plan.removed, *moved)):
                continue
            changed += 1
            old_row = dict(row)
            for key in (*plan.removed, *moved):
                row.pop(key, None)
            for old, (new, to) in moved.items():
                if old_row.get(old) is not None:
                    row[new] = old_row[old] if to is None else convert(old_row[old], to)[1]
        return changed

    async def delete(self, collection_id: str) -> int:
        del self.collections[collection_id]
        return len(self.rows.pop(collection_id))

    async def set_access(
        self, collection_id: str, kind: str, subject_id: str, mode: str | None, *, touch: bool = True
    ) -> None:
        live = self.collections[collection_id]
        rows = [r for r in live.access if (r.kind, r.subject_id) != (kind, subject_id)]
        if mode is not None:
            rows.append(AccessRow(kind, subject_id, mode))
        self.collections[collection_id] = replace(live, access=tuple(rows), updated_at=self.tick())

    async def log(
        self, collection_id: str, org_id: str, change: str, detail: Logged, *, origin: WriteOrigin, **more: Any
    ) -> None:
        entry = {"collection_id": collection_id, "change": change, "detail": detail.model_dump(mode="json")}
        self.log_entries.append({**entry, **asdict(origin), **more})


@dataclass
class World:
    kit: OwnerKit
    uow: FakeUnitOfWork
    repo: FakeCollectionsRepository

    async def call(self, arguments: dict[str, Any], seq: int, tool: str = "studio_edit_collection") -> ToolResult:
        before = len(self.uow.messages(ToolResult))
        await self.kit.on_tool_call(
            ToolCall(
                session_id=SESSION,
                seq=seq,
                turn_id="turn1",
                step=1,
                tool_call_id=f"call_{seq}",
                tool=tool,
                arguments={"reason": "r", **arguments} if tool == "studio_edit_collection" else arguments,
                session=CONTEXT,
            ),
            self.uow,
        )
        results = self.uow.messages(ToolResult, TOOL_RESULTS.name)[before:]
        assert len(results) == 1, results
        return results[0]

    async def decide(self, result: ToolResult, decision: str = "apply") -> ProposalOutcome:
        assert result.widget is not None
        before = len(self.uow.emitted)
        await self.kit.on_decision(
            DecisionMade(
                decision_id=uuid.uuid4().hex,
                proposal_id=result.widget.proposal_id,
                session_id=SESSION,
                seq=result.seq,
                kind="collection",
                decision=decision,
                actor=OPERATOR,
            ),
            self.uow,
        )
        (emitted,) = self.uow.emitted[before:]
        topic, _, outcome = emitted
        assert topic == PROPOSALS_OUTCOMES.name and isinstance(outcome, ProposalOutcome)
        return outcome


async def new_world() -> World:
    workspace = FakeWorkspace(
        orgs={ORG: "Acme"},
        guilds=[Guild(GUILD, ORG, "Support", "", "", 1), Guild("sales", ORG, "Sales", "", "", 1)],
        agents=[
            Agent("a1", ORG, GUILD, "Ada", task="Write to refunds."),
            Agent("a2", ORG, GUILD, "Bo"),
            Agent("out", ORG, "sales", "Cy"),
        ],
    )
    repo = FakeCollectionsRepository()
    uow = FakeUnitOfWork(workspace=workspace, stores={CollectionsRepository: repo})
    await uow.sessions.ensure(SESSION, CONTEXT)
    return World(OwnerKit("edits", [CollectionKind()]), uow, repo)


COLUMNS = (
    ColumnSpec(name="order_id", type="text", required=True, unique=True),
    ColumnSpec(name="amount", type="text"),
    ColumnSpec(name="note", type="text"),
)
ROWS = [
    {"order_id": "A1", "amount": "12", "note": "x"},
    {"order_id": "A2", "amount": "n/a"},
    {"order_id": "A3"},
]


async def test_an_edit_binds_the_hash_writes_nothing_until_applied_then_changes_the_records_and_logs_the_request() -> (
    None
):
    world = await new_world()
    cid = world.repo.place("refunds", COLUMNS, ROWS)
    read = await world.call({"collection": "refunds", "limit": 2}, seq=1, tool="studio_read_collection")
    assert read.ok and read.output is not None
    assert [r["values"] for r in read.output["page"]["records"]] == ROWS[:2] and read.output["page"]["total"] == 3
    result = await world.call(
        {
            "action": "edit",
            "collection": cid,
            "base_updated_at": read.output["updated_at"],
            "name": "returns",
            "columns": [
                {"name": "order_id", "type": "text", "required": True, "unique": True},
                {"name": "amount", "type": "integer"},
            ],
            "access": {"agents": [{"agent_id": "a2", "mode": "read"}]},
        },
        seq=2,
    )
    assert result.ok and result.widget is not None, result.error
    assert (result.widget.kind, result.widget.action, result.widget.target.ref) == ("collection", "edit", cid)
    assert result.widget.base.hash == read.output["hash"]
    (proposed,) = world.uow.messages(ProposalProposed, PROPOSALS_PROPOSED.name)
    assert proposed.card.apply_label == "Apply edit"
    assert proposed.card.effects == (
        "Column note leaves: its values in 1 record are deleted",
        'Column amount becomes integer (was text): 1 record converts; 1 stored value stays as it is: "n/a"',
        "Renamed from refunds: the Task of Ada still names refunds",
        "Access of Bo: no row → read",
        "No one outside the guild reaches it",
    )
    assert world.repo.rows[cid] == ROWS and world.repo.log_entries == []

    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status, outcome.effects["records_changed"]) == ("applied", 200, 2)
    assert world.repo.rows[cid] == [
        {"order_id": "A1", "amount": 12},
        {"order_id": "A2", "amount": "n/a"},
        {"order_id": "A3"},
    ]
    live = world.repo.collections[cid]
    assert live.name == "returns" and AccessRow("agent", "a2", "read") in live.access
    assert cid in world.repo.locked
    assert [(e["change"], e.get("kind"), e["studio_session_id"], e["studio_seq"]) for e in world.repo.log_entries] == [
        ("update", None, SESSION, 2),
        ("access", "agent", SESSION, 2),
    ]
    again = await world.decide(result)
    assert (again.outcome, again.status) == ("refused", 422)


async def test_a_moved_hash_is_stale_and_writes_nothing() -> None:
    world = await new_world()
    cid = world.repo.place("refunds", COLUMNS, ROWS)
    live = world.repo.collections[cid]
    result = await world.call(
        {"action": "delete", "collection": cid},
        seq=1,
    )
    assert result.ok, result.error
    await world.repo.set_access(cid, "guild", GUILD, "read")
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status) == ("stale", 409)
    assert cid in world.repo.collections and world.repo.log_entries == []
    # Another guild's row is not bound: with the source guild's row back, the delete applies.
    await world.repo.set_access(cid, "guild", GUILD, "write")
    await world.repo.set_access(cid, "guild", "sales", "read")
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.effects["records_changed"]) == ("applied", 3)
    assert cid not in world.repo.collections and live.name == "refunds"


async def test_a_create_starts_at_its_scopes_row_and_is_stale_when_the_name_was_taken_meanwhile() -> None:
    world = await new_world()
    args = {
        "action": "create",
        "name": "catalog",
        "purpose": "Products",
        "columns": [{"name": "sku", "type": "text"}],
        "scope": "org",
        "access": {"guild": "write"},
    }
    first = await world.call(args, seq=1)
    second = await world.call(args, seq=2)
    assert first.ok and second.ok and first.widget is not None and first.widget.target.ref is None
    applied = await world.decide(first)
    assert applied.outcome == "applied"
    live = world.repo.collections[applied.effects["collection_id"]]
    assert (live.scope, live.guild_id, set(live.access)) == (
        "org",
        None,
        {AccessRow("org", ORG, "read"), AccessRow("guild", GUILD, "write")},
    )
    assert [(e["change"], e.get("kind")) for e in world.repo.log_entries] == [("create", None), ("access", "guild")]
    stale = await world.decide(second)
    assert (stale.outcome, stale.status) == ("stale", 409)
    refused = await world.call(args, seq=3)
    assert refused.error is not None and refused.error.code == "name_taken"


async def test_the_list_holds_the_source_guilds_and_the_organisations_tables_only() -> None:
    world = await new_world()
    world.repo.place("refunds", COLUMNS, ROWS)
    world.repo.place("leads", COLUMNS, [], guild_id="sales")
    world.repo.place("catalog", COLUMNS, [], scope="org", guild_id=None, access=(AccessRow("org", ORG, "read"),))
    listed = await world.call({}, seq=1, tool="studio_list_collections")
    assert listed.output is not None
    assert [(c["name"], c["records"]) for c in listed.output["collections"]] == [("catalog", 0), ("refunds", 3)]
    assert all(c["updated_at"] and c["hash"] for c in listed.output["collections"])
    unknown = await world.call({"collection": "leads"}, seq=2, tool="studio_read_collection")
    assert unknown.error is not None and (unknown.error.status, unknown.error.code) == (422, "unknown_table")


async def test_a_rename_to_a_name_taken_meanwhile_is_stale() -> None:
    world = await new_world()
    cid = world.repo.place("refunds", COLUMNS, ROWS)
    live = world.repo.collections[cid]
    result = await world.call(
        {"action": "edit", "collection": cid, "base_updated_at": live.updated_at.isoformat(), "name": "payouts"}, seq=1
    )
    assert result.ok, result.error
    world.repo.place("payouts", COLUMNS, [])
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status) == ("stale", 409)
    assert world.repo.collections[cid].name == "refunds" and world.repo.log_entries == []


# --- line counts: the tray's are the card's -----------------------------------------------------------------

CREATE = {
    "action": "create",
    "name": "catalog",
    "purpose": "Products",
    "columns": [{"name": "sku", "type": "text"}],
    "scope": "guild",
}
EDIT = {
    "action": "edit",
    "collection": "refunds",
    "name": "returns",
    "columns": [
        {"name": "order_id", "type": "text", "required": True, "unique": True},
        {"name": "amount", "type": "text"},
        {"name": "note", "type": "text"},
        {"name": "memo", "type": "text"},
    ],
}


@pytest.mark.parametrize(
    ("arguments", "label", "tray"),
    [
        (CREATE, "table catalog", (4, 0)),  # the table's four lines, from nothing
        (EDIT, "table refunds", (2, 1)),  # the name's line changed, a column's line added
        ({"action": "delete", "collection": "refunds"}, "table refunds", (0, 6)),
    ],
    ids=["create", "edit", "delete"],
)
async def test_the_tray_counts_the_lines_the_card_shows(
    arguments: dict[str, Any], label: str, tray: tuple[int, int]
) -> None:
    world = await new_world()
    world.repo.place("refunds", COLUMNS, ROWS)
    read = await world.call({"collection": "refunds"}, seq=1, tool="studio_read_collection")
    assert read.output is not None
    bound = {"base_updated_at": read.output["updated_at"]} if arguments["action"] == "edit" else {}
    result = await world.call({**arguments, **bound}, seq=2)
    assert result.widget is not None, result.error
    shown = await shown_line_counts(world.kit, world.uow, result.widget.proposal_id)
    assert (shown.tray, shown.card) == (tray, [(label, *tray)])
    assert shown.tray == shown.card_total
