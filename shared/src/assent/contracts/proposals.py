"""Messages on ``proposals.proposed``, ``proposals.decided`` and ``proposals.outcomes``."""

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..hashing import line_counts
from .envelope import Id, Message, Seq
from .registered import Action, Decision, Kind, Origin, Outcome, Section
from .tool_results import LineCounts, ProposalBase, ProposalTarget


class CardField(BaseModel):
    """One field of a card: its text when proposed (None: absent) and the proposed text (None: removed)."""

    model_config = ConfigDict(frozen=True)

    name: str
    before: str | None
    after: str | None

    @property
    def lines(self) -> LineCounts:
        """The lines this field's diff adds and removes (an absent text has none): what a card shows beside it."""
        added, removed = line_counts(self.before or "", self.after or "")
        return LineCounts(added=added, removed=removed)


def lines_of(fields: Iterable[CardField]) -> LineCounts:
    """A request's line counts: the sum of its card's fields' (:attr:`CardField.lines`).

    The one count of a request. The owner announces it as ``ProposalProposed.lines`` (the tray's) from the fields it
    proposes, and the gateway's card shows each live field's, so the tray and the card agree while the target is as
    it was read. (Counting a whole-target text instead, a guild's fields rendered under headings, counted the blank
    line an empty field renders as a removed line.)
    """
    added = removed = 0
    for field in fields:
        counts = field.lines
        added, removed = added + counts.added, removed + counts.removed
    return LineCounts(added=added, removed=removed)


class Card(BaseModel):
    """What the operator's card shows: the live text when proposed, the proposal, and what applying does.

    ``before``/``after`` hold the whole target as text; ``fields`` splits it where a card shows one diff per
    field (a guild's short description and description). ``notes`` are lines such as who reads a new note, for
    people to read: what a program reads is a field of its own (``origin``).
    """

    model_config = ConfigDict(frozen=True)

    title: str
    apply_label: str
    before: str
    after: str
    effects: tuple[str, ...] = ()
    fields: tuple[CardField, ...] = ()
    notes: tuple[str, ...] = ()
    origin: Origin | None = None
    """Where the proposal was asked for, when its kind says (:attr:`assent.kinds.KindSpec.origins`): a source
    proposal's ``agent`` (an agent's web or API chat) or ``builder`` (the builder chat); None: its kind names none.
    Added within v1 (optional: a reader that does not know it ignores it, and a card without it names none)."""


class ProposalProposed(Message):
    """An owner recorded a request bound to the base it read; it waits for the operator."""

    type: Literal["ProposalProposed"] = "ProposalProposed"
    v: Literal[1] = 1
    proposal_id: Id
    session_id: Id
    seq: Seq
    turn_id: Id
    step: Seq
    tool_call_id: Id
    tool: Id
    kind: Kind
    action: Action = "edit"
    section: Section
    agent_id: str | None = None
    target: ProposalTarget
    base: ProposalBase
    proposed_hash: str
    lines: LineCounts
    widens: bool = False
    reason: str
    card: Card


class DecisionMade(Message):
    """A command to the owner of ``kind``: resolve one request.

    The owner answers with exactly one :class:`ProposalOutcome` per ``decision_id``.

    ``via`` says where it was decided (card, tray, apply_all, ...); ``options`` carries decision-specific
    choices (a branch for a source approval).
    """

    type: Literal["DecisionMade"] = "DecisionMade"
    v: Literal[1] = 1
    decision_id: Id
    proposal_id: Id
    session_id: Id
    seq: Seq
    kind: Kind
    decision: Decision
    actor: Id
    via: str = "card"
    options: dict[str, Any] = Field(default_factory=dict)


class ProposalOutcome(Message):
    """What a decision did. ``status`` is the HTTP status the deciding client gets.

    ``stale`` (409) leaves the request pending and marked stale; ``refused`` (422) means the request was
    already resolved or the decision does not fit it, and changed nothing. ``superseded`` answers no decision: a
    new proposal of a kind that supersedes (``KindSpec.supersedes``) replaced the waiting request, which needs no
    answer; ``decision_id`` is derived from the request, ``effects.replaced_by`` names its successor. (An allowed
    value added within v1: the shape is unchanged, and the reader, the gateway, ships with the writers.)
    """

    type: Literal["ProposalOutcome"] = "ProposalOutcome"
    v: Literal[1] = 1
    decision_id: Id
    proposal_id: Id
    session_id: Id
    seq: Seq
    kind: Kind
    outcome: Outcome
    status: int
    detail: str
    resolved_by: str | None = None
    resolved_at: datetime | None = None
    effects: dict[str, Any] = Field(default_factory=dict)
