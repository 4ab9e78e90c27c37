"""Who may do what: the roles of a person in their organisation, as plain rules.

| role | read studio and workspace | decide a Studio request | write the workspace directly |
| --- | --- | --- | --- |
| admin | yes | yes | yes |
| developer | yes | yes | yes |
| reviewer | yes | no | no |
| viewer | yes | no | no |

Another organisation's sessions, agents, guilds and notes answer 404 whatever the role: their existence does not
leak. A role that may not do something in one's own organisation answers 403.
"""

from __future__ import annotations

from dataclasses import dataclass

ORG_ROLES: tuple[str, ...] = ("admin", "developer", "reviewer", "viewer")
CHANGERS = frozenset({"admin", "developer"})
"""The roles that may change live targets: decide requests, write the workspace."""


@dataclass(frozen=True)
class Identity:
    """A person as their token says: who, in which organisation, with which roles."""

    user_id: str
    org_id: str
    roles: frozenset[str]

    def may_read(self) -> bool:
        return bool(self.roles & set(ORG_ROLES))

    def may_decide(self, kind: str) -> bool:
        """Deciding a request needs a role that may change its target (every kind's target, for now)."""
        return bool(self.roles & CHANGERS)

    def may_write_workspace(self) -> bool:
        return bool(self.roles & CHANGERS)
