"""The routines service's topics: its tool calls, its decisions, its routines' changes and their wake-ups."""

from assent.topics import Topic, decisions, tool_calls

from .messages import RoutinesChanged, RoutineWokeUp
from .routes import OWNER

TOOL_CALLS = tool_calls(OWNER)
DECISIONS = decisions(OWNER)
AGENT_ROUTINES_CHANGED = Topic("agent.routines.changed", "guild_id", (OWNER,), (), (RoutinesChanged,))
"""A guild's routines changed (created, edited, deleted; the guild's switch), on the guild's stream."""
ROUTINES_WAKEUPS = Topic("routines.wakeups", "agent_id", (OWNER,), ("coach",), (RoutineWokeUp,))
"""A routine woke its agent: once per due time, with the instruction in force; agents' runtimes read it through
the coach client (:func:`routines_contract.wakeups`)."""
