"""Who may do what: the roles of a person in their organisation and on one agent, as plain rules.

| role | read | decide a Studio request | write the workspace | set an agent's owners and editors |
| --- | --- | --- | --- | --- |
| admin | yes | yes | yes | yes |
| developer | yes | yes | yes | no |
| reviewer | yes | no | no | no |
| viewer | yes | no | no | no |
| owner or editor of an agent | yes | that agent's requests | that agent and its Memory | no |

Source proposals follow the same table: approving one (which commits to the agent's source, and deploys) needs an
admin or developer, or the agent's owner or editor; discarding one needs permission to review feedback, which
reviewers hold besides those roles. Viewers only read.

Another organisation's sessions, agents, guilds and notes answer 404 whatever the role: their existence does not
leak. A role that may not do something in one's own organisation answers 403.
"""

from __future__ import annotations

from dataclasses import dataclass

ORG_ROLES: tuple[str, ...] = ("admin", "developer", "reviewer", "viewer")
CHANGERS = frozenset({"admin", "developer"})
"""The roles that may change live targets: decide requests, write the workspace."""
FEEDBACK_REVIEWERS = frozenset({"admin", "developer", "reviewer"})
"""The roles that may review feedback: discard a source proposal, file and change an agent's issues."""


@dataclass(frozen=True)
class Identity:
    """A person as their token says: who, in which organisation, with which roles."""

    user_id: str
    org_id: str
    roles: frozenset[str]

    def may_read(self) -> bool:
        return bool(self.roles & set(ORG_ROLES))

    def may_change_agent(self, owners: tuple[str, ...] = (), editors: tuple[str, ...] = ()) -> bool:
        """Admins and developers may change an agent (its Memory, its requests); so may its owners and editors."""
        return bool(self.roles & CHANGERS) or self.user_id in owners or self.user_id in editors

    def may_decide(self, owners: tuple[str, ...] = (), editors: tuple[str, ...] = ()) -> bool:
        """Deciding a request needs a role that may change its target: on an agent, :meth:`may_change_agent`."""
        return self.may_change_agent(owners, editors)

    def may_review_feedback(self, owners: tuple[str, ...] = (), editors: tuple[str, ...] = ()) -> bool:
        """Reviewing feedback (discarding a source proposal, an agent's issues): reviewers and above, and the
        agent's owners and editors."""
        return bool(self.roles & FEEDBACK_REVIEWERS) or self.user_id in owners or self.user_id in editors

    def may_write_workspace(self) -> bool:
        return bool(self.roles & CHANGERS)

    def may_set_agent_roles(self) -> bool:
        return "admin" in self.roles
