"""The edits service's topics: its tool calls and its decisions. (The workspace's events, which every service
reads, are :data:`assent.topics.WORKSPACE_EVENTS`.)"""

from assent.topics import decisions, tool_calls

from .kinds import OWNER

TOOL_CALLS = tool_calls(OWNER)
DECISIONS = decisions(OWNER)
