"""The deployer's topics: its tool calls, its decisions, and what it did to agents' source."""

from assent.topics import Topic, decisions, tool_calls

from .messages import (
    BuildFinished,
    BuildProgressed,
    BuildStarted,
    DeployFailed,
    DeployLive,
    DeployPromoted,
    DeployStarted,
    IssueFixLinked,
    SourceCommitted,
)
from .source import OWNER

TOOL_CALLS = tool_calls(OWNER, key="agent_id")
"""Keyed by the agent: the calls on one agent's source stay in order, whichever session makes them."""
DECISIONS = decisions(OWNER)
DEPLOYS_EVENTS = Topic(
    "deploys.events",
    "agent_id",
    (OWNER,),
    (),
    (
        SourceCommitted,
        BuildStarted,
        BuildProgressed,
        BuildFinished,
        DeployStarted,
        DeployFailed,
        DeployPromoted,
        DeployLive,
        IssueFixLinked,
    ),
)
"""What the deployer did to an agent's source: commits of approved proposals, builds and their progress, deploys
(started, failed, promoted, live) and fixes linked to issues."""
