"""What became of a proposal once it left the pending items, as the projection keeps it: the outcome that resolved it,
every decision taken on it, and what its coach was told when its turn continued."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from assent.contracts import DecisionSummary


class DecisionTaken(BaseModel):
    """One decision taken on a proposal (a row of ``gateway.decisions``): its word, who took it, where, when, and its
    outcome with the owner's reason once the owner answered (None before; a stale or refused attempt keeps its
    own outcome, and the proposal stays pending after it)."""

    model_config = ConfigDict(frozen=True)

    decision: str
    actor: str
    via: str
    decided_at: datetime
    outcome: str | None = None
    detail: str | None = None


class Told(BaseModel):
    """What the coach was told of a proposal: its line of the continuation of the turn that held it, the
    continuation's whole text, and when the turn was continued."""

    model_config = ConfigDict(frozen=True)

    line: DecisionSummary
    text: str
    continued_at: datetime


class History(BaseModel):
    """A proposal's history besides its row: the reason of the outcome that resolved it (None while it is pending),
    its decisions, oldest first, and what its coach was told (None until its turn continued). A proposal resolved
    without a decision (superseded) has none."""

    model_config = ConfigDict(frozen=True)

    detail: str | None = None
    decisions: tuple[DecisionTaken, ...] = ()
    told: Told | None = None
