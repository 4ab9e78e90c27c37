"""The operator's desk, as rules with no I/O: how a pending item shows in the header tray, which open proposals
Apply all takes and why it leaves one, what Decline all sends, and what the answer says.

Everything kind-specific comes from the kind registry (:data:`assent.kinds.KINDS`: section, labels, decisions,
endpoint, ``decided_alone``) and from the proposal itself (``widens``, as its owner judged it when proposing), so a
kind added later shows up here with no change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from assent.contracts import CoachInfo, LineCounts, ProposalBase, ProposalTarget
from assent.kinds import KINDS, SECTIONS, KindSpec
from assent.policy import Require, waiting_for

from .proposals import Proposal

AGENT_SECTION = "Agents"
"""The section whose proposals land on one agent's tab (its Memory, Routines or Draft tab); an item of another
section lands on a section's own view (State, Tools, the overview, the Logins popover) even when it names an agent."""


ABOUT_LENGTH = 80
"""How many characters of its first request a session's ``about`` keeps (a line of a table, a page's heading)."""


def about(label: str | None, reason: str | None, length: int = ABOUT_LENGTH) -> str | None:
    """What a session is about, as people name it: its first request's target label and reason ("label: reason"),
    on one line, cut at a word to at most ``length`` characters with an ellipsis; None when it has asked nothing."""
    parts = [" ".join(part.split()) for part in (label, reason) if part and part.strip()]
    if not parts:
        return None
    text = ": ".join(parts)
    if len(text) <= length:
        return text
    cut = text[: length - 1]
    if " " in cut[length // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" :,;.-") + "…"


class SessionNames(BaseModel):
    """The names people know a session by: the agents its proposals name, its coach (where its ``SessionOpened``
    named one) and what its first request is about."""

    model_config = ConfigDict(frozen=True)

    agents: list[str] = []
    coach: CoachInfo | None = None
    about: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> SessionNames:
        """From a row with ``agents``, ``coach_name``, ``coach_channel``, ``coach_model``, ``first_label`` and
        ``first_reason``."""
        coach = None
        if row["coach_name"] is not None:
            coach = CoachInfo(name=row["coach_name"], channel=row["coach_channel"], model=row["coach_model"])
        return cls(agents=list(row["agents"] or []), coach=coach, about=about(row["first_label"], row["first_reason"]))


class SessionRow(SessionNames):
    """A session as the desk lists it: who runs it, where, whether it is open, and how many decisions it waits on,
    and the names people know it by."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    operator_id: str
    source_guild_id: str
    state: Literal["open", "closed"]
    waiting_on: int
    opened_at: datetime
    closed_at: datetime | None


class Item(BaseModel):
    """A pending proposal as the desk reads it from the projection (the columns the tray shows)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    seq: int
    proposal_id: str
    turn_id: str
    kind: str
    action: str
    section: str
    agent_id: str | None
    target: ProposalTarget
    base: ProposalBase
    lines: LineCounts
    widens: bool
    stale: bool
    apply_label: str | None
    """Its card's label for the apply button (None: its kind's for its action)."""
    reason: str
    proposed_at: datetime
    require: Require | None = None
    """What the organisation's policy requires before it is applied (None: one person's decision; or not judged
    yet), and the approvals counted so far."""
    approvals: int = 0
    expires_at: datetime | None = None
    """When an ``expire_after`` rule ends it (None: never)."""
    escalation_rule: str | None = None
    """The ``escalate`` rule that told others it waits, once it did, and the roles it told."""
    escalated_to: list[str] | None = None


class DecisionWords(BaseModel):
    """The decisions a client sends for a kind's two buttons."""

    model_config = ConfigDict(frozen=True)

    apply: str
    decline: str


class TrayItem(BaseModel):
    """An open proposal as the tray shows it: its target, its kind's labels and decision words, where to send them,
    whether Apply all leaves it to its own apply (``decided_alone``), and the agent tab that holds it."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    seq: int
    proposal_id: str
    turn_id: str
    kind: str
    action: str
    section: str
    agent_id: str | None
    agent_tab: str | None
    target: ProposalTarget
    base: ProposalBase
    lines: LineCounts
    widens: bool
    decided_alone: bool
    stale: bool
    apply_label: str
    decline_label: str
    decisions: DecisionWords
    decision_path: str
    reason: str
    proposed_at: datetime
    waiting_for: str | None = None
    """Why it still waits beside a person's decision, where the organisation's policy says so: ``1 of 2 approvals:
    needs one more admin``."""
    approvals: int = 0
    approvals_required: int | None = None
    expires_at: datetime | None = None
    """When the policy ends it as ``expired`` if nobody decides it (None: never)."""
    escalated_by: str | None = None
    """The ``escalate`` rule that told others it waits (None: none did), and the roles it told (``admin``: the
    organisation's admins find it with ``GET /api/studio/pending?escalated_to_me=true``)."""
    escalated_to: list[str] = []


class Counts(BaseModel):
    """The tray's counts: every section of the registry (zero included, in the registry's order), each agent with an
    open proposal, and the chat header's line ("Waiting on N decisions")."""

    model_config = ConfigDict(frozen=True)

    waiting_on: int
    summary: str
    sections: dict[str, int]
    agents: dict[str, int]


class Skipped(BaseModel):
    """A proposal Apply all left to its own apply, and why."""

    model_config = ConfigDict(frozen=True)

    seq: int
    kind: str
    reason: str


class Stopped(BaseModel):
    """The decision that stopped the rest: its status (409 stale, 422 refused, 502 failed, 504 late) and why."""

    model_config = ConfigDict(frozen=True)

    seq: int
    kind: str
    status: int
    detail: str
    decision_id: str | None = None


def apply_decision(spec: KindSpec) -> str:
    """The decision the kind's apply button sends: its first decision that is not its ``decline``."""
    return next(decision for decision in spec.decisions if decision != spec.decline)


def decision_words(spec: KindSpec) -> DecisionWords:
    """The decision words a client sends for the kind's two buttons."""
    return DecisionWords(apply=apply_decision(spec), decline=spec.decline)


def agent_tab(item: Item) -> str | None:
    """The agent whose tab holds the item (it carries the tab's dot), or None when it lands elsewhere."""
    return item.agent_id if item.section == AGENT_SECTION else None


def skip_reason(proposal: Proposal) -> str | None:
    """Why Apply all leaves this open proposal to its own apply, or None when it takes it.

    A kind the registry marks ``decided_alone`` (a login grant) is never applied by Apply all, nor is a proposal that
    widens what an agent can do (an access change that gives back a tool): each needs its own apply.
    """
    spec = KINDS[proposal.kind]
    label = proposal.target.label or proposal.kind
    if spec.decided_alone:
        return f"{label}: a {spec.name} request is decided on its own ({spec.actions.get(proposal.action, 'apply')})"
    if proposal.widens:
        return f"{label}: it widens what the agent can do, so it is decided on its own"
    return None


@dataclass(frozen=True)
class Step:
    """One decision Apply all or Decline all sends, in turn."""

    proposal: Proposal
    decision: str


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    skipped: tuple[Skipped, ...]
    """Each proposal left to its own apply."""


def plan_apply_all(proposals: Sequence[Proposal]) -> Plan:
    """What Apply all does with a session's open proposals: in seq order, each kind's apply decision on every one it
    may take, and the rest left with the reason."""
    steps, skipped = [], []
    for proposal in sorted(proposals, key=lambda p: p.seq):
        reason = skip_reason(proposal)
        if reason is None:
            steps.append(Step(proposal, apply_decision(KINDS[proposal.kind])))
        else:
            skipped.append(Skipped(seq=proposal.seq, kind=proposal.kind, reason=reason))
    return Plan(tuple(steps), tuple(skipped))


def plan_decline_all(proposals: Sequence[Proposal]) -> Plan:
    """What Decline all does: in seq order, each kind's ``decline`` decision (a draft discarded, a login declined)
    on every open proposal; it leaves none."""
    ordered = sorted(proposals, key=lambda p: p.seq)
    return Plan(tuple(Step(proposal, KINDS[proposal.kind].decline) for proposal in ordered), ())


def preview(plan: Plan, items: Sequence[TrayItem]) -> tuple[list[Step], list[Skipped]]:
    """What a plan would do, written nowhere: its steps, less those the organisation's policy would hold back (a
    request that needs more approvals than the caller's one more), which join the plan's skipped with what they
    wait for, in seq order. ``items`` are the session's tray items (their ``approvals`` and ``approvals_required``)."""
    by_seq = {item.seq: item for item in items}
    steps: list[Step] = []
    held: list[Skipped] = []
    for step in plan.steps:
        item = by_seq.get(step.proposal.seq)
        required = None if item is None else item.approvals_required
        if item is not None and required is not None and required - item.approvals > 1:
            waits = item.waiting_for or f"{item.approvals} of {required} approvals"
            reason = f"needs more approvals under the organisation's policy: your approval would count; {waits}"
            held.append(Skipped(seq=step.proposal.seq, kind=step.proposal.kind, reason=reason))
        else:
            steps.append(step)
    return steps, sorted([*plan.skipped, *held], key=lambda s: s.seq)


def counts(items: Sequence[TrayItem]) -> Counts:
    """The tray's counts of ``items``."""
    by_section = Counter(item.section for item in items)
    n = len(items)
    return Counts(
        waiting_on=n,
        summary=f"Waiting on {n} decision{'s' if n != 1 else ''}",
        sections={section: by_section.get(section, 0) for section in SECTIONS},
        agents=dict(Counter(item.agent_id for item in items if item.agent_id)),
    )


DecisionPath = Callable[[Item], str]


def item_view(item: Item, decision_path: DecisionPath) -> TrayItem:
    """A pending item as the tray shows it: the projected proposal with its kind's labels, the decision words of
    its two buttons, where to send them (``decision_path``), whether Apply all leaves it, and its agent tab."""
    spec = KINDS[item.kind]
    return TrayItem(
        session_id=item.session_id,
        seq=item.seq,
        proposal_id=item.proposal_id,
        turn_id=item.turn_id,
        kind=item.kind,
        action=item.action,
        section=item.section,
        agent_id=item.agent_id,
        agent_tab=agent_tab(item),
        target=item.target,
        base=item.base,
        lines=item.lines,
        widens=item.widens,
        decided_alone=spec.decided_alone or item.widens,
        stale=item.stale,
        apply_label=item.apply_label or spec.actions.get(item.action, ""),
        decline_label=spec.decline_label,
        decisions=decision_words(spec),
        decision_path=decision_path(item),
        reason=item.reason,
        proposed_at=item.proposed_at,
        waiting_for=None if item.require is None else waiting_for(item.require, item.approvals),
        approvals=item.approvals,
        approvals_required=None if item.require is None else item.require.approvals,
        expires_at=item.expires_at,
        escalated_by=item.escalation_rule,
        escalated_to=list(item.escalated_to or ()),
    )


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def summary(verb: str, resolved: int, skipped: int, stopped: Stopped | None, left: int) -> str:
    """What Apply all or Decline all says: how many it resolved, how many it left and why."""
    parts = [f"{verb} {_n(resolved, 'request')}"]
    if skipped:
        parts.append(f"left {_n(skipped, 'request')} to be decided on {'its' if skipped == 1 else 'their'} own")
    if stopped is not None:
        parts.append(f"stopped at seq {stopped.seq} ({stopped.status}: {stopped.detail})")
    parts.append(f"{_n(left, 'request')} still open")
    return "; ".join(parts) + "."


def preview_summary(verb: str, would: int, skipped: int) -> str:
    """What a preview of Apply all or Decline all says: ``Would apply 2 requests; would leave 1 to be decided on its
    own.`` (``verb`` in the infinitive: ``apply``, ``decline``)."""
    parts = [f"Would {verb} {_n(would, 'request')}"]
    if skipped:
        parts.append(f"would leave {_n(skipped, 'request')} to be decided on {'its' if skipped == 1 else 'their'} own")
    return "; ".join(parts) + "."
