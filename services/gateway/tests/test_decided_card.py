"""A proposal that is no longer pending is read from the projection alone: its card as it was proposed (the text its
base bound beside the proposed one, never stale), and its resolution: the outcome and its reason, every decision taken
on it oldest first (a stale or refused attempt too), and what its coach was told. The rows of the history's statement
become that history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI

from assent.api import ROUTES, Identity
from assent.contracts import Card, CardField, DecisionSummary, ProposalBase, ProposalTarget, lines_of
from assent.kinds import KINDS
from gateway import api, decisions, handlers
from gateway.adapters.projection import read_history
from gateway.api import decided_card
from gateway.domain.history import DecisionTaken, History, Told
from gateway.domain.proposals import Proposal

AT = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
OPERATOR = "olga@acme.example"
FIELD = CardField(name="MEMORY.md", before="Short answers.\n", after="Short answers.\nQuote the order.\n")


def proposal(status: str, resolved_by: str | None = OPERATOR, kind: str = "memory") -> Proposal:
    return Proposal(
        session_id="s1",
        seq=3,
        proposal_id="p1",
        tool_call_id="c1",
        turn_id="t1",
        step=1,
        tool="studio_edit_memory",
        kind=kind,
        action="edit",
        section="Agents",
        agent_id="ada",
        target=ProposalTarget(kind="memory", agent_id="ada", label="Memory of Ada"),
        base=ProposalBase(version=4, hash="h4"),
        proposed_hash="h5",
        lines=lines_of((FIELD,)),
        widens=False,
        reason="orders get mixed up",
        card=Card(
            title="Memory of Ada",
            apply_label="Apply edit",
            before=FIELD.before or "",
            after=FIELD.after or "",
            fields=(FIELD,),
            effects=("Ada reads it from her next reply",),
        ),
        trace={},
        status=status,
        stale=False,
        resolved_by=resolved_by,
        resolved_at=None if status == "pending" else AT + timedelta(seconds=2),
        proposed_at=AT - timedelta(minutes=1),
    )


def taken(decision: str, outcome: str | None, detail: str | None, after: int = 0) -> DecisionTaken:
    return DecisionTaken(
        decision=decision,
        actor=OPERATOR,
        via="card",
        decided_at=AT + timedelta(seconds=after),
        outcome=outcome,
        detail=detail,
    )


def told(outcome: str, resolved_by: str | None = OPERATOR) -> Told:
    line = DecisionSummary(
        tool_call_id="c1",
        seq=3,
        proposal_id="p1",
        kind="memory",
        target="Memory of Ada",
        outcome=outcome,
        resolved_by=resolved_by,
    )
    return Told(line=line, text=f"Memory of Ada: {outcome}.", continued_at=AT + timedelta(seconds=3))


APPLIED = "applied as version 5"
STALE = "the Memory changed since the coach read it; the request stays pending"

CASES: list[tuple[str, str, str | None, History]] = [
    (
        "applied",
        "applied",
        OPERATOR,
        History(detail=APPLIED, decisions=(taken("apply", "applied", APPLIED),), told=told("applied")),
    ),
    (
        "declined",
        "declined",
        OPERATOR,
        History(
            detail="declined; nothing was written",
            decisions=(taken("decline", "declined", "declined; nothing was written"),),
            told=told("declined"),
        ),
    ),
    (
        "stale, then applied",
        "applied",
        OPERATOR,
        History(
            detail=APPLIED,
            decisions=(taken("apply", "stale", STALE), taken("apply", "applied", APPLIED, after=1)),
            told=None,  # the turn waits on another proposal still
        ),
    ),
    (
        "superseded",
        "superseded",
        None,
        History(detail="replaced by a newer proposal of the same chat", decisions=(), told=told("superseded", None)),
    ),
    (
        "refused, then declined",
        "declined",
        OPERATOR,
        History(
            detail="declined; nothing was written",
            decisions=(
                taken("apply", "refused", "a note it embeds does not exist yet"),
                taken("decline", "declined", "declined; nothing was written", after=1),
            ),
            told=told("declined"),
        ),
    ),
]


@pytest.mark.parametrize(("case", "status", "by", "history"), CASES, ids=[c[0] for c in CASES])
def test_a_decided_proposal_shows_its_card_as_proposed_and_its_resolution(
    case: str, status: str, by: str | None, history: History
) -> None:
    view = decided_card(proposal(status, by), history)
    # The card as proposed: the text the base bound beside the proposal, not the target now; never stale.
    assert (view.status, view.stale) == (status, False)
    assert (view.live.text, view.live.version, view.live.hash) == ("Short answers.\n", 4, "h4")
    assert (view.proposal.text, view.proposal.hash) == ("Short answers.\nQuote the order.\n", "h5")
    assert [(f.name, f.live, f.proposal, f.lines) for f in view.fields] == [
        ("MEMORY.md", FIELD.before, FIELD.after, FIELD.lines)
    ]
    assert view.fields[0].diff.splitlines()[2:] == ["@@ -1 +1,2 @@", " Short answers.", "+Quote the order."]
    assert "+Quote the order." in view.diff
    assert (view.apply_label, view.decline_label, view.effects) == (
        "Apply edit",
        "Decline",
        ["Ada reads it from her next reply"],
    )
    # Its resolution: as the pending card's was, and what became of it.
    resolution = view.resolution
    assert resolution is not None
    assert (resolution.status, resolution.resolved_by, resolution.resolved_at) == (
        status,
        by,
        AT + timedelta(seconds=2),
    )
    assert (resolution.detail, resolution.decisions, resolution.told) == (
        history.detail,
        history.decisions,
        history.told,
    )
    shown = view.model_dump(mode="json")["resolution"]
    assert list(shown) == ["status", "resolved_by", "resolved_at", "detail", "decisions", "told"]
    assert [d["decision"] for d in shown["decisions"]] == [d.decision for d in history.decisions]


def test_a_created_target_had_no_text_when_proposed() -> None:
    created = proposal("applied").model_copy(update={"base": ProposalBase()})
    assert decided_card(created, History()).live.text is None


def row(**values: Any) -> dict[str, Any]:
    """A row of the history's statement: the proposal's columns, and one decision's (none: all None)."""
    empty = dict.fromkeys(("decision", "actor", "via", "decided_at", "outcome", "outcome_detail"))
    return {"detail": None, "continued_at": None, "told": None, "line": None, **empty, **values}


def test_the_rows_of_the_history_statement_are_the_history() -> None:
    line = told("applied").line.model_dump(mode="json")
    continued = {"continued_at": AT, "told": "Memory of Ada: applied.", "line": line, "detail": APPLIED}
    rows = [
        row(**continued, decision="apply", actor=OPERATOR, via="card", decided_at=AT, outcome="stale",
            outcome_detail=STALE),
        row(**continued, decision="apply", actor=OPERATOR, via="tray", decided_at=AT, outcome="applied",
            outcome_detail=APPLIED),
    ]  # fmt: skip
    history = read_history(rows)  # type: ignore[arg-type]  # mappings of the statement's columns
    assert history.detail == APPLIED
    assert [(d.via, d.outcome, d.detail) for d in history.decisions] == [
        ("card", "stale", STALE),
        ("tray", "applied", APPLIED),
    ]
    assert history.told == Told(
        line=DecisionSummary.model_validate(line), text="Memory of Ada: applied.", continued_at=AT
    )
    # Superseded: no decision, the outcome's reason; a turn not continued yet tells nothing.
    assert read_history([row(detail="replaced")]) == History(detail="replaced")  # type: ignore[list-item]
    assert read_history([]) == History()


def test_the_gateway_reads_each_session_endpoint_that_no_owner_reads() -> None:
    """``…/drafts/{seq}`` is the edits service's own read; a source proposal is read on its agent's page."""
    served = {route.public_path for route in ROUTES if route.method == "GET"}
    by_session = {spec.endpoint for spec in KINDS.values() if spec.addressed_by == "session"}
    read = set(decisions.read_endpoints())
    assert read == {e for e in by_session if f"/api/studio/sessions/{{session_id}}/{e}/{{seq}}" not in served}
    assert read == {"edits", "logins"}


@pytest.fixture
def projected(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, str, str]]:
    """The proposal at any seq is a decided Memory edit; what the routes asked for is listed."""
    asked: list[tuple[str, int, str, str]] = []

    async def at(deps: Any, session_id: str, seq: int, org_id: str, endpoint: str) -> Proposal:
        asked.append((session_id, seq, org_id, endpoint))
        if KINDS["memory"].endpoint != endpoint:
            raise handlers.NotFound(f"session {session_id!r} has nothing at seq {seq} decided at …/{endpoint}/")
        return proposal("applied")

    async def history(deps: Any, found: Proposal) -> History:
        return CASES[0][3]

    monkeypatch.setattr(handlers, "proposal_at", at)
    monkeypatch.setattr(handlers, "history", history)
    return asked


async def test_a_decided_proposal_is_read_without_asking_its_owner(projected: list[Any]) -> None:
    app = FastAPI()
    person = Annotated[Identity, Depends(lambda: Identity(OPERATOR, "acme", frozenset({"viewer"})))]
    app.include_router(api.reads_router(None, None, person))  # type: ignore[arg-type]  # no owner to ask: None
    api.errors(app)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as http:
        read = await http.get("/api/studio/sessions/s1/edits/3")
        elsewhere = await http.get("/api/studio/sessions/s1/logins/3")
    assert read.status_code == 200, read.text
    assert read.json()["resolution"]["decisions"][0]["outcome"] == "applied"
    assert elsewhere.status_code == 404, elsewhere.text
    assert projected == [("s1", 3, "acme", "edits"), ("s1", 3, "acme", "logins")]
