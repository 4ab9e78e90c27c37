"""A proposal as the gateway's projection holds it: what a coach asked for, as its owner announced it
(``ProposalProposed``), and where it stands now (pending or resolved, stale, by whom and when)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from assent.contracts import Card, LineCounts, ProposalBase, ProposalTarget
from assent.policy import Proposed


class Proposal(BaseModel):
    """One row of the projection (``gateway.projected_proposals``), and, where the read joins them, its agent's
    ``owners`` and ``editors`` as the workspace copy holds them (none: empty)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    seq: int
    proposal_id: str
    tool_call_id: str
    turn_id: str
    step: int
    tool: str
    kind: str
    action: str
    section: str
    agent_id: str | None
    target: ProposalTarget
    base: ProposalBase
    proposed_hash: str
    lines: LineCounts
    widens: bool
    reason: str
    card: Card
    trace: dict[str, str]
    """The trace context it was proposed in, which its decision continues."""
    status: str
    """``pending``, or the outcome that resolved it."""
    stale: bool
    resolved_by: str | None
    resolved_at: datetime | None
    proposed_at: datetime
    owners: tuple[str, ...] = ()
    editors: tuple[str, ...] = ()
    org_id: str | None = None
    """Where the read joins them: its session's organisation, the session's operator, the guild a policy's rules
    match (its agent's, else the session's source guild), and the version of the organisation's policy in force when
    it was proposed (None: none was)."""
    operator: str | None = None
    guild_id: str | None = None
    policy_version: int | None = None
    coach_channel: str | None = None
    """The channel and model of its session's coach, where its ``SessionOpened`` named them (the policy's ``coach``
    matcher reads them; unknown: the ``studio`` channel and no model)."""
    coach_model: str | None = None


def proposed(proposal: Proposal) -> Proposed:
    """What a policy's rules read of ``proposal`` (as the rule worker reads it from the projection)."""
    return Proposed(
        kind=proposal.kind,
        action=proposal.action,
        agent_id=proposal.agent_id,
        guild_id=proposal.guild_id,
        label=proposal.target.label,
        path=proposal.target.path,
        lines=proposal.lines.added + proposal.lines.removed,
        widens=proposal.widens,
        channel=proposal.coach_channel or "studio",
        model=proposal.coach_model,
        proposed_at=proposal.proposed_at,
    )


class Located(Protocol):
    """What names a proposal at one address or another (:data:`gateway.decisions.ADDRESSES`): a projected
    proposal, a pending item, an entry of the activity feed."""

    @property
    def kind(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def agent_id(self) -> str | None: ...
    @property
    def proposal_id(self) -> str: ...
