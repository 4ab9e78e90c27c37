"""What became of a proposal once it left the pending items, as the projection keeps it: the outcome that resolved it,
every decision taken on it, and what its coach was told when its turn continued."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from assent.api.resolution import DecisionTaken, Told

__all__ = ["DecisionTaken", "History", "Told"]


class History(BaseModel):
    """A proposal's history besides its row: the reason of the outcome that resolved it (None while it is pending),
    its decisions, oldest first, and what its coach was told (None until its turn continued). A proposal resolved
    without a decision (superseded) has none."""

    model_config = ConfigDict(frozen=True)

    detail: str | None = None
    decisions: tuple[DecisionTaken, ...] = ()
    told: Told | None = None
