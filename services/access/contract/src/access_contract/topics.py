"""The access service's topics: its tool calls and its decisions."""

from assent.topics import decisions, tool_calls

from .routes import OWNER

TOOL_CALLS = tool_calls(OWNER)
DECISIONS = decisions(OWNER)
