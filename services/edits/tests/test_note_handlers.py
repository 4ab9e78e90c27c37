"""The edits service's handlers over the note kind (OwnerKit + NoteKind) on an in-memory unit of work."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pytest

from assent.contracts import DecisionMade, ProposalOutcome, ProposalProposed, SessionContext, ToolCall, ToolResult
from assent.domain import Agent, Guild, Refusal
from assent.hashing import content_hash
from assent.runtime import OwnerKit, Reverted, RevertRequest
from assent.testing import FakeUnitOfWork, FakeWorkspace, shown_line_counts
from assent.topics import PROPOSALS_OUTCOMES, PROPOSALS_PROPOSED, TOOL_RESULTS
from edits.adapters.notes import NotesRepository, Prior
from edits.domain.model import WriteOrigin
from edits.domain.notes import LiveNote, NotePath
from edits.kinds.note import NoteKind

ORG, GUILD, SESSION, OPERATOR = "org", "guild", "s1", "operator@example.com"
CONTEXT = SessionContext(org_id=ORG, source_guild_id=GUILD, operator_user_id=OPERATOR)
REFUNDS = f"guild/{GUILD}/refunds.md"


@dataclass
class FakeNotesRepository:
    """The NotesRepository methods the note kind calls, in memory; every write is recorded with its provenance.

    ``before_write`` runs at the start of ``write_note``/``delete_note`` (a concurrent writer slipping in
    between the locked read and the write).
    """

    workspace: FakeWorkspace
    notes: dict[tuple[str, str], LiveNote] = field(default_factory=dict)
    writes: list[dict[str, Any]] = field(default_factory=list)
    locked_reads: list[str] = field(default_factory=list)
    agent_locks: list[bool] = field(default_factory=list)
    before_write: Callable[[], None] | None = None
    placed: dict[str, LiveNote] = field(default_factory=dict)
    """The note placed at each path before any request wrote there."""

    def place(self, display_path: str, content: str, version: int = 1, title: str = "placed") -> LiveNote:
        """A note written directly (not through a request): not recorded in ``writes``."""
        level, _, rest = display_path.partition("/")
        scope_id, key = (None, rest) if level == "org" else tuple(rest.split("/", 1))
        note = LiveNote(
            f"note_{uuid.uuid4().hex}",
            ORG,
            level,
            scope_id,
            key,
            title,
            display_path,
            content,
            version,
            content_hash(content),
        )
        self.notes[(ORG, display_path)] = note
        if not any(w["display_path"] == display_path for w in self.writes):
            self.placed[display_path] = note
        return note

    async def prior(self, org_id: str, display_path: str, tool_call_id: str) -> Prior | None:
        """What lived at the path before the write of ``tool_call_id``: the write before it there, else the note
        placed there first."""
        at = [w for w in self.writes if w["display_path"] == display_path]
        index = next((i for i, w in enumerate(at) if w["tool_call_id"] == tool_call_id), None)
        if index is None:
            return None
        if index == 0:
            placed = self.placed.get(display_path)
            return Prior(None, None) if placed is None else Prior(placed.title, placed.content)
        before = at[index - 1]
        return Prior(None, None) if before["change"] == "delete" else Prior(before["title"], before["content"])

    async def note(self, org_id: str, display_path: str, *, for_update: bool = False) -> LiveNote | None:
        if for_update:
            self.locked_reads.append(display_path)
        return self.notes.get((org_id, display_path))

    async def notes_of_org(self, org_id: str) -> list[LiveNote]:
        return sorted((n for (o, _), n in self.notes.items() if o == org_id), key=lambda n: n.display_path)

    async def agents_of_org(self, org_id: str, *, lock: bool = False) -> list[Agent]:
        self.agent_locks.append(lock)
        return await self.workspace.agents_of_org(org_id)

    async def write_note(
        self,
        org_id: str,
        path: NotePath,
        content: str,
        *,
        title: str,
        expected_version: int | None,
        origin: WriteOrigin,
    ) -> int | None:
        if self.before_write is not None:
            self.before_write()
        live = self.notes.get((org_id, path.display_path))
        if (None if live is None else live.version) != expected_version:
            return None
        version = 1 if live is None else live.version + 1
        self.notes[(org_id, path.display_path)] = LiveNote(
            live.note_id if live is not None else f"note_{uuid.uuid4().hex}",
            org_id,
            path.level,
            path.scope_id,
            path.key,
            title,
            path.display_path,
            content,
            version,
            content_hash(content),
        )
        self.writes.append(
            {
                "change": "create" if live is None else "update",
                "display_path": path.display_path,
                "content": content,
                "title": title,
                "version": version,
                **asdict(origin),
            }
        )
        return version

    async def delete_note(
        self,
        org_id: str,
        path: NotePath,
        *,
        expected_version: int,
        origin: WriteOrigin,
    ) -> int | None:
        if self.before_write is not None:
            self.before_write()
        live = self.notes.get((org_id, path.display_path))
        if live is None or live.version != expected_version:
            return None
        del self.notes[(org_id, path.display_path)]
        self.writes.append(
            {
                "change": "delete",
                "display_path": path.display_path,
                "content": None,
                "title": live.title,
                "version": live.version + 1,
                **asdict(origin),
            }
        )
        return live.version + 1


@dataclass
class World:
    kit: OwnerKit
    uow: FakeUnitOfWork
    repo: FakeNotesRepository

    async def call(self, arguments: dict[str, Any], seq: int, *, tool_call_id: str | None = None) -> ToolResult:
        """Send one ``studio_edit_note`` call; return the one ToolResult it emitted."""
        before = len(self.uow.messages(ToolResult))
        await self.kit.on_tool_call(
            ToolCall(
                session_id=SESSION,
                seq=seq,
                turn_id="turn1",
                step=1,
                tool_call_id=tool_call_id or f"call_{seq}",
                tool="studio_edit_note",
                arguments=arguments,
                session=CONTEXT,
            ),
            self.uow,
        )
        results = self.uow.messages(ToolResult, TOOL_RESULTS.name)[before:]
        assert len(results) == 1, results
        return results[0]

    async def decide(self, result: ToolResult, decision: str = "apply") -> ProposalOutcome:
        """Decide the request ``result`` made; return the one ProposalOutcome (and assert nothing else)."""
        assert result.widget is not None
        before = len(self.uow.emitted)
        await self.kit.on_decision(
            DecisionMade(
                decision_id=uuid.uuid4().hex,
                proposal_id=result.widget.proposal_id,
                session_id=SESSION,
                seq=result.seq,
                kind="note",
                decision=decision,
                actor=OPERATOR,
            ),
            self.uow,
        )
        emitted = self.uow.emitted[before:]
        assert len(emitted) == 1, emitted
        topic, key, outcome = emitted[0]
        assert topic == PROPOSALS_OUTCOMES.name and key == SESSION and isinstance(outcome, ProposalOutcome)
        return outcome

    async def status(self, result: ToolResult) -> tuple[str, bool]:
        assert result.widget is not None
        stored = await self.uow.proposals.get(result.widget.proposal_id)
        assert stored is not None
        return stored.status, stored.stale


async def new_world() -> World:
    workspace = FakeWorkspace(
        orgs={ORG: "Acme"},
        guilds=[Guild(GUILD, ORG, "Support", "", "", 1), Guild("sales", ORG, "Sales", "", "", 1)],
        agents=[
            Agent("a1", ORG, GUILD, "Ada"),
            Agent("a2", ORG, GUILD, "Bo"),
            Agent("a3", ORG, GUILD, "Dee", live=False),
            Agent("out", ORG, "sales", "Cy"),
        ],
    )
    repo = FakeNotesRepository(workspace)
    uow = FakeUnitOfWork(workspace=workspace, stores={NotesRepository: repo})
    await uow.sessions.ensure(SESSION, CONTEXT)
    return World(OwnerKit("edits", [NoteKind(1024)]), uow, repo)


def create(key: str = "refunds.md", content: str = "Cite the order.\n", **overrides: Any) -> dict[str, Any]:
    return {"action": "create", "level": "guild", "key": key, "content": content, "reason": "mixups", **overrides}


def edit(content: str = "Two.\n", base_version: int = 1, path: str = REFUNDS) -> dict[str, Any]:
    return {"action": "edit", "display_path": path, "content": content, "base_version": base_version, "reason": "r"}


def delete(base_version: int = 1, path: str = REFUNDS) -> dict[str, Any]:
    return {"action": "delete", "display_path": path, "base_version": base_version, "reason": "unused"}


def provenance(seq: int, tool_call_id: str | None = None) -> dict[str, Any]:
    return {
        "actor": OPERATOR,
        "tool_call_id": tool_call_id or f"call_{seq}",
        "tool_name": "studio_edit_note",
        "studio_session_id": SESSION,
        "studio_seq": seq,
    }


# --- create --------------------------------------------------------------------------------------------


async def test_create_proposes_against_no_note_with_one_widget_and_one_request_naming_its_readers() -> None:
    world = await new_world()
    result = await world.call(create(), seq=3)
    assert result.ok and result.error is None and result.widget is not None
    widget = result.widget
    assert (widget.kind, widget.action, widget.target.path, widget.target.guild_id) == (
        "note",
        "create",
        REFUNDS,
        GUILD,
    )
    assert (widget.base.version, widget.base.hash) == (None, None)
    assert widget.proposed_hash == content_hash("Cite the order.\n")
    assert (widget.lines.added, widget.lines.removed) == (1, 0)

    assert [(t, type(m).__name__) for t, _, m in world.uow.emitted] == [
        (PROPOSALS_PROPOSED.name, "ProposalProposed"),
        (TOOL_RESULTS.name, "ToolResult"),
    ]
    (proposed,) = world.uow.messages(ProposalProposed)
    assert proposed.proposal_id == widget.proposal_id and (proposed.kind, proposed.action) == ("note", "create")
    assert proposed.section == "State" and proposed.card.apply_label == "Create note"
    assert proposed.card.title == f"Note {REFUNDS}"
    assert proposed.card.notes == ("Read by the guild's agents: Ada, Bo",)  # not Dee (not live), not Cy (sales)
    assert [(f.name, f.before, f.after) for f in proposed.card.fields] == [(REFUNDS, None, "Cite the order.\n")]

    stored = await world.uow.proposals.get(widget.proposal_id)
    assert stored is not None and (stored.status, stored.stale, stored.seq) == ("pending", False, 3)
    assert (stored.base["version"], stored.base["hash"]) == (None, None)
    assert world.repo.writes == [] and world.repo.notes == {}


async def test_agent_and_org_creates_name_their_one_reader_or_everyone() -> None:
    world = await new_world()
    agent_note = await world.call(create(level="agent", agent_id="a1", key="style.md"), seq=3)
    org_note = await world.call(create(level="org", key="policy.md"), seq=4)
    assert agent_note.widget is not None and agent_note.widget.target.path == "agent/a1/style.md"
    assert org_note.widget is not None and org_note.widget.target.path == "org/policy.md"
    assert [p.card.notes for p in world.uow.messages(ProposalProposed)] == [
        ("Read by Ada",),
        ("Read by every agent of the organisation",),
    ]


async def test_create_where_a_note_is_live_is_refused_409_and_points_to_edit() -> None:
    world = await new_world()
    world.repo.place(REFUNDS, "Live.\n", version=4)
    result = await world.call(create(), seq=3)
    assert not result.ok and result.widget is None and result.error is not None
    assert (result.error.status, result.error.code) == (409, "note_exists")
    assert '"edit"' in result.error.message and REFUNDS in result.error.message
    assert "base_version: 4" in result.error.message
    assert [type(m).__name__ for _, _, m in world.uow.emitted] == ["ToolResult"]
    assert world.uow.proposals.proposals == {} and world.repo.writes == []


async def test_apply_of_a_create_writes_the_note_once_with_its_provenance() -> None:
    world = await new_world()
    result = await world.call(create(), seq=3)
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status, outcome.resolved_by) == ("applied", 200, OPERATOR)
    assert outcome.effects == {"version": 1, "hash": content_hash("Cite the order.\n")}
    assert world.uow.locked_sessions == [SESSION] and world.repo.locked_reads == [REFUNDS]
    assert world.repo.writes == [
        {
            "change": "create",
            "display_path": REFUNDS,
            "content": "Cite the order.\n",
            "title": "refunds",
            "version": 1,
            **provenance(3),
        }
    ]
    note = world.repo.notes[(ORG, REFUNDS)]
    assert (note.content, note.version, note.hash) == ("Cite the order.\n", 1, content_hash("Cite the order.\n"))
    assert await world.status(result) == ("applied", False)


async def test_a_note_written_meanwhile_makes_the_create_stale_and_writes_nothing() -> None:
    world = await new_world()
    result = await world.call(create(), seq=3)
    world.repo.place(REFUNDS, "Someone else's.\n")
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status) == ("stale", 409)
    assert outcome.resolved_by is None
    assert outcome.effects == {"live_version": 1, "live_hash": content_hash("Someone else's.\n")}
    assert "no note was live there" in outcome.detail
    assert world.repo.writes == []
    assert world.repo.notes[(ORG, REFUNDS)].content == "Someone else's.\n"
    assert await world.status(result) == ("pending", True)


async def test_a_create_that_loses_the_insert_to_a_concurrent_one_is_stale_and_writes_nothing() -> None:
    world = await new_world()
    result = await world.call(create(), seq=3)

    def concurrent_create() -> None:
        world.repo.place(REFUNDS, "Raced.\n")

    world.repo.before_write = concurrent_create
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status) == ("stale", 409) and "meanwhile" in outcome.detail
    assert world.repo.writes == [] and world.repo.notes[(ORG, REFUNDS)].content == "Raced.\n"
    assert await world.status(result) == ("pending", True)


# --- edit ----------------------------------------------------------------------------------------------


async def test_edit_apply_writes_once_keeping_the_title() -> None:
    world = await new_world()
    world.repo.place(REFUNDS, "One.\n", title="Refunds")
    result = await world.call(edit("One.\nTwo.\n"), seq=5)
    assert result.widget is not None
    assert (result.widget.base.version, result.widget.base.hash) == (1, content_hash("One.\n"))
    (proposed,) = world.uow.messages(ProposalProposed)
    assert proposed.card.notes == () and proposed.card.apply_label == "Apply edit"
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status) == ("applied", 200) and outcome.effects["version"] == 2
    assert world.repo.writes == [
        {
            "change": "update",
            "display_path": REFUNDS,
            "content": "One.\nTwo.\n",
            "title": "Refunds",
            "version": 2,
            **provenance(5),
        }
    ]
    assert await world.status(result) == ("applied", False)


async def test_a_direct_write_meanwhile_makes_an_edit_stale_and_writes_nothing() -> None:
    world = await new_world()
    world.repo.place(REFUNDS, "One.\n")
    result = await world.call(edit("Mine.\n"), seq=5)
    world.repo.place(REFUNDS, "Behind its back.\n", version=2)
    card = await world.kit.live_card(result.widget.proposal_id, world.uow)  # type: ignore[union-attr]
    assert card is not None and card.stale
    assert (card.live_version, card.live_hash) == (2, content_hash("Behind its back.\n"))
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status) == ("stale", 409) and "base version 1" in outcome.detail
    assert outcome.effects == {"live_version": 2, "live_hash": content_hash("Behind its back.\n")}
    assert world.repo.writes == [] and world.repo.notes[(ORG, REFUNDS)].content == "Behind its back.\n"
    assert await world.status(result) == ("pending", True)


# --- delete --------------------------------------------------------------------------------------------


async def test_delete_is_refused_while_a_task_embeds_the_note_then_applies_once_none_does() -> None:
    world = await new_world()
    world.repo.place(REFUNDS, "Refund within 30 days.\n")
    workspace = world.uow.workspace
    workspace.agents["out"] = replace(workspace.agents["out"], task=f"Sell.\n{{{{note:{REFUNDS}}}}}\n")
    result = await world.call(delete(), seq=7)
    assert result.ok and result.widget is not None and result.widget.action == "delete"
    (proposed,) = world.uow.messages(ProposalProposed)
    assert proposed.card.apply_label == "Delete note"
    assert proposed.card.notes == ("Embedded in the Task of: Cy; applying fails until none does",)

    refused = await world.decide(result)
    assert (refused.outcome, refused.status, refused.effects) == ("refused", 409, {"code": "note_embedded"})
    assert "Cy" in refused.detail and f"{{{{note:{REFUNDS}}}}}" in refused.detail
    assert refused.resolved_by is None and refused.effects == {"code": "note_embedded"}
    assert world.repo.agent_locks[-1] is True, "apply reads the Tasks without locking them"
    assert world.repo.writes == [] and (ORG, REFUNDS) in world.repo.notes
    assert await world.status(result) == ("pending", False)
    card = await world.kit.live_card(result.widget.proposal_id, world.uow)
    assert card is not None and card.notes == ("Embedded in the Task of: Cy; applying fails until none does",)

    workspace.agents["out"] = replace(workspace.agents["out"], task="Sell.\n")
    card = await world.kit.live_card(result.widget.proposal_id, world.uow)
    assert card is not None and card.notes == () and not card.stale
    applied = await world.decide(result)
    assert (applied.outcome, applied.status, applied.resolved_by) == ("applied", 200, OPERATOR)
    assert applied.effects == {"version": 2, "hash": None}
    assert world.repo.writes == [
        {
            "change": "delete",
            "display_path": REFUNDS,
            "content": None,
            "title": "placed",
            "version": 2,
            **provenance(7),
        }
    ]
    assert (ORG, REFUNDS) not in world.repo.notes
    assert await world.status(result) == ("applied", False)


# --- the kit's guarantees, through the note kind -------------------------------------------------------


async def test_a_second_decision_is_422_and_writes_nothing_more() -> None:
    world = await new_world()
    result = await world.call(create(), seq=3)
    assert (await world.decide(result)).outcome == "applied"
    for second in ("apply", "decline"):
        again = await world.decide(result, second)
        assert (again.outcome, again.status) == ("refused", 422) and f"already applied by {OPERATOR}" in again.detail
    assert len(world.repo.writes) == 1
    assert await world.status(result) == ("applied", False)


async def test_a_resent_call_replays_its_first_result_and_records_nothing_new() -> None:
    world = await new_world()
    first = await world.call(create(), seq=3, tool_call_id="tc1")
    world.uow.clear()
    again = await world.call(create(content="Something else.\n"), seq=3, tool_call_id="tc1")
    assert again == first and again.id == first.id
    assert [type(m).__name__ for _, _, m in world.uow.emitted] == ["ToolResult"]
    assert len(world.uow.proposals.proposals) == 1 and world.repo.writes == []


async def test_the_live_card_of_a_create_is_fresh_while_absent_and_stale_once_a_note_appears() -> None:
    world = await new_world()
    result = await world.call(create(), seq=3)
    assert result.widget is not None
    card = await world.kit.live_card(result.widget.proposal_id, world.uow)
    assert card is not None
    assert (card.kind, card.action, card.status, card.stale) == ("note", "create", "pending", False)
    assert (card.live_hash, card.live_version) == (None, None)
    assert [(f.name, f.before, f.after) for f in card.fields] == [(REFUNDS, None, "Cite the order.\n")]
    assert card.notes == ("Read by the guild's agents: Ada, Bo",)

    world.repo.place(REFUNDS, "Appeared.\n")
    card = await world.kit.live_card(result.widget.proposal_id, world.uow)
    assert card is not None and card.stale and card.status == "pending"
    assert (card.live_hash, card.live_version) == (content_hash("Appeared.\n"), 1)
    assert [(f.name, f.before, f.after) for f in card.fields] == [(REFUNDS, "Appeared.\n", "Cite the order.\n")]
    assert world.repo.writes == []


# --- line counts: the tray's are the card's -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("live", "arguments", "tray"),
    [
        (None, create(content="Cite the order.\nAnd the date.\n"), (2, 0)),
        ("One.\nTwo.\n", edit("One.\nThree.\nFour.\n"), (2, 1)),
        ("One.\nTwo.\n", delete(), (0, 2)),
    ],
    ids=["create", "edit", "delete"],
)
async def test_the_tray_counts_the_lines_the_card_shows(
    live: str | None, arguments: dict[str, Any], tray: tuple[int, int]
) -> None:
    world = await new_world()
    if live is not None:
        world.repo.place(REFUNDS, live)
    result = await world.call(arguments, seq=3)
    assert result.widget is not None, result.error
    shown = await shown_line_counts(world.kit, world.uow, result.widget.proposal_id)
    assert (shown.tray, shown.card) == (tray, [(REFUNDS, *tray)])
    assert shown.tray == shown.card_total


# --- reverting -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "requests", "since", "inverse"),
    [
        ("a create is deleted", [create()], None, {"action": "delete", "base_version": 1}),
        ("an edit gets its text back", [edit()], None, {"action": "edit", "content": "One.\n", "base_version": 2}),
        (
            "an edit changed since is edited back from the text now",
            [edit()],
            "Three.\n",
            {"action": "edit", "content": "One.\n", "base_version": 3},
        ),
        (
            "a delete is created again, with its title",
            [delete()],
            None,
            {"action": "create", "level": "guild", "key": "refunds.md", "title": "placed", "content": "One.\n"},
        ),
        (
            "a delete written there since is edited back",
            [delete()],
            "Other.\n",
            {"action": "edit", "content": "One.\n", "base_version": 1},
        ),
        ("a create deleted since: nothing to do", [create()], "gone", 409),
        ("an edit set back since: nothing to do", [edit()], "One.\n", 409),
    ],
)
async def test_a_note_request_reverts_to_what_lived_at_its_path_before_it(
    case: str, requests: list[dict[str, Any]], since: str | None, inverse: dict[str, Any] | int
) -> None:
    world = await new_world()
    if requests[0]["action"] != "create":
        world.repo.place(REFUNDS, "One.\n")
    result = await world.call(requests[0], seq=3)
    assert (await world.decide(result)).outcome == "applied", case
    live = world.repo.notes.get((ORG, REFUNDS))
    if since == "gone":
        del world.repo.notes[(ORG, REFUNDS)]
    elif since is not None:
        world.repo.place(REFUNDS, since, version=1 if live is None else live.version + 1)
    assert result.widget is not None
    request = RevertRequest(session_id="rev", seq=1)
    filed = await world.kit.revert(result.widget.proposal_id, request, org=ORG, actor=OPERATOR, uow=world.uow)
    if isinstance(inverse, int):
        assert isinstance(filed, Refusal) and (filed.status, filed.code) == (inverse, "already_reverted"), filed
        return
    assert isinstance(filed, Reverted), filed
    proposed = world.uow.messages(ProposalProposed)[-1]
    assert (proposed.session_id, proposed.seq, proposed.action) == ("rev", 1, inverse["action"])
    assert proposed.reason == f"Revert of request #3 of session {SESSION}"
    stored = await world.uow.proposals.get(filed.proposal_id)
    assert stored is not None and stored.tool == "studio_edit_note"
    expected_content = inverse.get("content")
    assert proposed.card.after == (expected_content or ""), case
    if "base_version" in inverse:
        assert proposed.base.version == inverse["base_version"], case
    if inverse["action"] == "create":
        assert stored.payload["title"] == inverse["title"] and stored.payload["key"] == inverse["key"]
