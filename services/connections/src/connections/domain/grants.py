"""A session's grant of a login, and whether it holds at a moment: a grant lasts until it is revoked, until the
session closes (its rows go then), or, granted with a lifetime, until ``expires_at``: past it the grant has lapsed, and
the session's calls through the login are refused until it is granted again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

GrantState = Literal["held", "revoked", "lapsed"]


def expiry(granted_at: datetime, lifetime: timedelta | None) -> datetime | None:
    """When a grant given at ``granted_at`` for ``lifetime`` lapses (None: no lifetime, it lasts until the session
    closes)."""
    return None if lifetime is None else granted_at + lifetime


def lapsed(expires_at: datetime | None, now: datetime) -> bool:
    """Whether a grant that lapses at ``expires_at`` has lapsed at ``now`` (at that very moment it has)."""
    return expires_at is not None and now >= expires_at


@dataclass(frozen=True)
class Grant:
    """A session's grant of one login; ``revoked_at`` set: revoked; ``expires_at`` set: it lapses then."""

    login_id: str
    granted_by: str
    granted_at: datetime
    via: str
    seq: int | None = None
    revoked_by: str | None = None
    revoked_at: datetime | None = None
    expires_at: datetime | None = None

    @property
    def active(self) -> bool:
        """Not revoked (it may have lapsed: :meth:`held`)."""
        return self.revoked_at is None

    def state(self, now: datetime) -> GrantState:
        """``revoked`` (a revoke is told first), ``lapsed`` once past ``expires_at``, else ``held``."""
        if not self.active:
            return "revoked"
        if lapsed(self.expires_at, now):
            return "lapsed"
        return "held"

    def held(self, now: datetime) -> bool:
        """Whether the session reads through the login at ``now`` by this grant."""
        return self.state(now) == "held"
