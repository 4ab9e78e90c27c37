"""The turn barrier: a paused turn continues once, after every proposal of its step is decided, or replaced by a
later proposal of its kind (superseded: it needs no answer)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from assent.contracts import DecisionSummary
from assent.kinds import EXPIRED, RESOLVED_OUTCOMES, SUPERSEDED

RESOLVED = frozenset(RESOLVED_OUTCOMES)


@dataclass(frozen=True)
class ProposalState:
    """What the gateway knows of one proposal of a turn."""

    tool_call_id: str
    seq: int
    proposal_id: str
    kind: str
    target: str
    status: str  # pending, or one of RESOLVED (superseded among them)
    resolved_by: str | None


@dataclass(frozen=True)
class RefusedCall:
    """A call named by the step whose result was an error: there is nothing to wait for."""

    tool_call_id: str
    seq: int
    code: str


def settle(
    waited: Sequence[str], proposals: Mapping[str, ProposalState], refused: Mapping[str, RefusedCall]
) -> list[DecisionSummary] | None:
    """The decisions of the turn, in the order the step named them, or None while any is still open.

    A proposal the gateway has not heard of yet counts as open: it may still be on its way. A call that is both a
    proposal and refused (a re-sent copy of the call got an error) is the proposal: only a call that proposed
    nothing at all is "refused when proposed".
    """
    decisions = [decision_of(call_id, proposals, refused) for call_id in waited]
    if any(decision is None for decision in decisions):
        return None
    return [decision for decision in decisions if decision is not None]


def decided_so_far(
    waited: Sequence[str], proposals: Mapping[str, ProposalState], refused: Mapping[str, RefusedCall]
) -> list[DecisionSummary]:
    """The decisions of the turn made so far, in the order the step named them: those of :func:`settle` while
    some are still open (the open ones left out)."""
    return [d for d in (decision_of(call_id, proposals, refused) for call_id in waited) if d is not None]


def decision_of(
    call_id: str, proposals: Mapping[str, ProposalState], refused: Mapping[str, RefusedCall]
) -> DecisionSummary | None:
    """What became of one awaited call, or None while it is open."""
    if call_id in refused and call_id not in proposals:
        call = refused[call_id]
        return DecisionSummary(
            tool_call_id=call_id, seq=call.seq, proposal_id=None, kind="refused", target="", outcome="refused"
        )
    proposal = proposals.get(call_id)
    if proposal is None or proposal.status not in RESOLVED:
        return None
    return DecisionSummary(
        tool_call_id=call_id,
        seq=proposal.seq,
        proposal_id=proposal.proposal_id,
        kind=proposal.kind,
        target=proposal.target,
        outcome=proposal.status,
        resolved_by=proposal.resolved_by,
    )


def continuation_text(decisions: Sequence[DecisionSummary]) -> str:
    """The one message that resumes the coach: a line per decision, and per proposal a later one replaced."""
    replaced = sum(d.outcome == SUPERSEDED for d in decisions)
    decided = len(decisions) - replaced
    head = f"The operator decided {decided} request{'s' if decided != 1 else ''}"
    if replaced:
        head += f"; {replaced} {'was' if replaced == 1 else 'were'} replaced by a later proposal"
    lines = [head + ":"]
    for d in decisions:
        if d.outcome == "refused":
            lines.append(f"- seq {d.seq}: refused when proposed; nothing to decide")
        elif d.outcome == SUPERSEDED:
            lines.append(f"- seq {d.seq}: {d.target}: replaced by a later proposal; it needs no answer")
        elif d.outcome == EXPIRED:
            by = f" by {d.resolved_by}" if d.resolved_by else ""
            lines.append(
                f"- seq {d.seq}: {d.target}: expired{by}: it waited too long; nothing was written, as if declined"
            )
        else:
            by = f" by {d.resolved_by}" if d.resolved_by else ""
            lines.append(f"- seq {d.seq}: {d.target}: {d.outcome}{by}")
    return "\n".join(lines)
