"""How a proposal was resolved, as every read of a decided proposal shows it: the gateway's card at
``…/{endpoint}/{seq}`` and an owner's own read (a Task draft, a source proposal), whose answer model declares a
``resolution`` field that the gateway fills from its projection (:mod:`gateway.owner_routes`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from ..contracts import DecisionSummary


class DecisionTaken(BaseModel):
    """One decision taken on a proposal: its word, who took it (a person, a rule or a service), where, when, and its
    outcome with the owner's reason once the owner answered (None before; a stale or refused attempt keeps its own
    outcome, and the proposal stays pending after it)."""

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


class Resolution(BaseModel):
    """How a proposal was resolved: its outcome, by whom, when; the outcome's reason (``detail``), every decision
    taken on it, oldest first (a stale or refused attempt before the one that resolved it too; none for a proposal
    resolved without a decision, a superseded one), and what its coach was told (``told``: null until the turn that
    held it continued)."""

    model_config = ConfigDict(frozen=True)

    status: str
    resolved_by: str | None
    resolved_at: datetime | None
    detail: str | None
    decisions: tuple[DecisionTaken, ...]
    told: Told | None
