"""The operator's desk, as rules with no I/O: how a pending item shows in the header tray, which open requests
Apply all takes and why it leaves one, what Decline all sends, and what the answer says.

Everything kind-specific comes from the kind registry (:data:`assent.kinds.KINDS`: section, labels, decisions,
endpoint, ``decided_alone``) and from the request itself (``widens``, as its owner judged it when proposing), so a
kind added later shows up here with no change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assent.kinds import KINDS, SECTIONS, KindSpec

AGENT_SECTION = "Agents"
"""The section whose requests land on one agent's tab (its Memory, Routines or Draft tab); an item of another
section lands on a section's own view (State, Tools, the overview, the Logins popover) even when it names an agent."""


def apply_decision(spec: KindSpec) -> str:
    """The decision the kind's apply button sends: its first decision that is not its ``decline``."""
    return next(decision for decision in spec.decisions if decision != spec.decline)


def decision_words(spec: KindSpec) -> dict[str, str]:
    """The decision words a client sends for the kind's two buttons."""
    return {"apply": apply_decision(spec), "decline": spec.decline}


def agent_tab(item: Mapping[str, Any]) -> str | None:
    """The agent whose tab holds the item (it carries the tab's dot), or None when it lands elsewhere."""
    return item.get("agent_id") if item["section"] == AGENT_SECTION else None


def skip_reason(item: Mapping[str, Any]) -> str | None:
    """Why Apply all leaves this open request to its own apply, or None when it takes it.

    A kind the registry marks ``decided_alone`` (a login grant) is never applied by Apply all, nor is a request that
    widens what an agent can do (an access change that gives back a tool): each needs its own apply.
    """
    spec = KINDS[item["kind"]]
    label = item["target"].get("label") or item["kind"]
    if spec.decided_alone:
        return f"{label}: a {spec.name} request is decided on its own ({spec.actions.get(item['action'], 'apply')})"
    if item["widens"]:
        return f"{label}: it widens what the agent can do, so it is decided on its own"
    return None


@dataclass(frozen=True)
class Step:
    """One decision Apply all or Decline all sends, in turn."""

    item: Mapping[str, Any]
    decision: str


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    skipped: tuple[dict[str, Any], ...]
    """``{"seq", "kind", "reason"}`` of each request left to its own apply."""


def plan_apply_all(items: Sequence[Mapping[str, Any]]) -> Plan:
    """What Apply all does with a session's open requests: in seq order, each kind's apply decision on every one it
    may take, and the rest left with the reason."""
    steps, skipped = [], []
    for item in sorted(items, key=lambda i: i["seq"]):
        reason = skip_reason(item)
        if reason is None:
            steps.append(Step(item, apply_decision(KINDS[item["kind"]])))
        else:
            skipped.append({"seq": item["seq"], "kind": item["kind"], "reason": reason})
    return Plan(tuple(steps), tuple(skipped))


def plan_decline_all(items: Sequence[Mapping[str, Any]]) -> Plan:
    """What Decline all does: in seq order, each kind's ``decline`` decision (a draft discarded, a login declined)
    on every open request; it leaves none."""
    return Plan(tuple(Step(item, KINDS[item["kind"]].decline) for item in sorted(items, key=lambda i: i["seq"])), ())


def counts(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The tray's counts: every section of the registry (zero included, in the registry's order), each agent with
    an open request, and the chat header's line ("Waiting on N decisions")."""
    by_section = Counter(item["section"] for item in items)
    n = len(items)
    return {
        "waiting_on": n,
        "summary": f"Waiting on {n} decision{'s' if n != 1 else ''}",
        "sections": {section: by_section.get(section, 0) for section in SECTIONS},
        "agents": dict(Counter(item["agent_id"] for item in items if item.get("agent_id"))),
    }


DecisionPath = Callable[[Mapping[str, Any]], str]


def item_view(item: Mapping[str, Any], decision_path: DecisionPath) -> dict[str, Any]:
    """A pending item as the tray shows it: the projected request with its kind's labels, the decision words of
    its two buttons, where to send them (``decision_path``), whether Apply all leaves it, and its agent tab."""
    spec = KINDS[item["kind"]]
    return {
        **item,
        "apply_label": item.get("apply_label") or spec.actions.get(item["action"], ""),
        "decline_label": spec.decline_label,
        "decisions": decision_words(spec),
        "decision_path": decision_path(item),
        "decided_alone": spec.decided_alone or bool(item["widens"]),
        "agent_tab": agent_tab(item),
    }


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def summary(verb: str, resolved: int, skipped: int, stopped: Mapping[str, Any] | None, left: int) -> str:
    """What Apply all or Decline all says: how many it resolved, how many it left and why."""
    parts = [f"{verb} {_n(resolved, 'request')}"]
    if skipped:
        parts.append(f"left {_n(skipped, 'request')} to be decided on {'its' if skipped == 1 else 'their'} own")
    if stopped is not None:
        parts.append(f"stopped at seq {stopped['seq']} ({stopped['status']}: {stopped['detail']})")
    parts.append(f"{_n(left, 'request')} still open")
    return "; ".join(parts) + "."
