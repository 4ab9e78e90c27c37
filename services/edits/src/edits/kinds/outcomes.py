"""What a decision on an edits kind says besides its detail (a ``ProposalOutcome``'s ``effects``), when more than one
kind says it alike: where the target is when a request turned stale, and what an applied one wrote."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Moved(BaseModel):
    """A stale request's target as it is now: its version and its hash."""

    model_config = ConfigDict(frozen=True)

    live_version: int
    live_hash: str


class MovedTo(BaseModel):
    """A stale request's target as it is now, by its version alone (None: there is none)."""

    model_config = ConfigDict(frozen=True)

    live_version: int | None


class Written(BaseModel):
    """What an applied request wrote: the hash of the target's new text (None: it deleted it)."""

    model_config = ConfigDict(frozen=True)

    hash: str | None
