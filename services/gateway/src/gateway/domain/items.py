"""The pending-items view: every open request of a session, counted by section and by agent."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any


def summarize(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts for the header ("N to approve"), the section bar and the agent tabs."""
    sections = Counter(item["section"] for item in items)
    agents = Counter(item["agent_id"] for item in items if item.get("agent_id"))
    n = len(items)
    return {
        "waiting_on": n,
        "summary": f"Waiting on {n} decision{'s' if n != 1 else ''}",
        "sections": dict(sections),
        "agents": dict(agents),
    }
