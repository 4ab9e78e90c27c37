"""Who may do what: the roles of a person in their organisation and on one agent, as plain rules.

| role | read | decide a Studio request | write the workspace | set an agent's owners and editors | set the policy |
| --- | --- | --- | --- | --- | --- |
| admin | yes | yes | yes | yes | yes |
| developer | yes | yes | yes | no | no |
| reviewer | yes | no | no | no | no |
| viewer | yes | no | no | no | no |
| owner or editor of an agent | yes | that agent's requests | that agent and its Memory | no | no |

Source proposals follow the same table: approving one (which commits to the agent's source, and deploys) needs an
admin or developer, or the agent's owner or editor; discarding one needs permission to review feedback, which
reviewers hold besides those roles. Viewers only read.

Each row is a :class:`Permission`; every public route declares the one it needs (:mod:`assent.api`).
Another organisation's sessions, agents, guilds and notes answer 404 whatever the role: their existence does not
leak. A role that may not do something in one's own organisation answers 403.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

ORG_ROLES: tuple[str, ...] = ("admin", "developer", "reviewer", "viewer")
CHANGERS = frozenset({"admin", "developer"})
"""The roles that may change live targets: decide requests, write the workspace."""
FEEDBACK_REVIEWERS = frozenset({"admin", "developer", "reviewer"})
"""The roles that may review feedback: discard a source proposal, file and change an agent's issues."""


class Permission(StrEnum):
    """What a caller must be allowed to do: the rows and columns of the roles table, a closed set."""

    READ = "read"
    """Any role of the organisation."""
    CHANGE_WORKSPACE = "change the workspace"
    """Admin or developer."""
    CHANGE_AGENT = "change this agent"
    """Admin or developer, or the agent's owner or editor."""
    SET_AGENT_ROLES = "name an agent's owners and editors"
    """Admin."""
    APPROVE_SOURCE = "approve source"
    """Edit an agent's source and manage its deploys: as :attr:`CHANGE_AGENT`."""
    SET_POLICY = "set the organisation's policy"
    """Admin."""
    REVIEW_FEEDBACK = "review feedback"
    """Admin, developer or reviewer, or the agent's owner or editor."""
    SIGNED = "signed by the provider"
    """No person's token: the owner checks the request's signature (a provider's push webhook)."""

    @property
    def on_agent(self) -> bool:
        """Whether the agent's owners and editors hold it too (so the agent must be known to decide)."""
        return self in (Permission.CHANGE_AGENT, Permission.APPROVE_SOURCE, Permission.REVIEW_FEEDBACK)

    @property
    def refusal(self) -> str:
        """The 403's words for a person who lacks it."""
        return _REFUSALS[self]


_REFUSALS = {
    Permission.READ: "the token carries no role in its organisation",
    Permission.CHANGE_WORKSPACE: "changing the workspace needs the admin or developer role",
    Permission.CHANGE_AGENT: "changing this agent needs the admin or developer role, or to own or edit it",
    Permission.SET_AGENT_ROLES: "setting an agent's owners and editors needs the admin role",
    Permission.APPROVE_SOURCE: "approving needs permission to edit source and manage deploys: admin or developer, "
    "or to own or edit the agent",
    Permission.SET_POLICY: "setting the organisation's policy needs the admin role",
    Permission.REVIEW_FEEDBACK: "this needs permission to review feedback: a reviewer, developer or admin role",
    Permission.SIGNED: "the request's signature does not fit",
}


@dataclass(frozen=True)
class Identity:
    """A person as their token says: who, in which organisation, with which roles."""

    user_id: str
    org_id: str
    roles: frozenset[str]

    def may(self, permission: Permission, owners: tuple[str, ...] = (), editors: tuple[str, ...] = ()) -> bool:
        """Whether the person holds ``permission``; on an agent, with its ``owners`` and ``editors``."""
        if permission is Permission.READ:
            return self.may_read()
        if permission is Permission.CHANGE_WORKSPACE:
            return self.may_write_workspace()
        if permission in (Permission.SET_AGENT_ROLES, Permission.SET_POLICY):
            return "admin" in self.roles
        if permission is Permission.REVIEW_FEEDBACK:
            return self.may_review_feedback(owners, editors)
        if permission.on_agent:
            return self.may_change_agent(owners, editors)
        return False

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
