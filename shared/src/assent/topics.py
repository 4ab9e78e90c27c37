"""The topic registry: the only place topic names are written down.

Each topic is data: its name, what keys it, who produces and consumes it, and the messages it carries.
Deployments may prefix every name (``ASSENT_TOPIC_PREFIX``) so that several systems, or several test runs,
share one cluster without seeing each other's traffic. Every topic has a dead-letter twin ``<name>.dlq``
that receives messages its consumers could not read.
"""

from __future__ import annotations

from dataclasses import dataclass

from .contracts import (
    DecisionMade,
    Message,
    ProposalOutcome,
    ProposalProposed,
    SessionClosed,
    SessionOpened,
    StepEnded,
    ToolCall,
    ToolResult,
    TurnContinuation,
)

DLQ_SUFFIX = ".dlq"


@dataclass(frozen=True)
class Topic:
    name: str
    key: str
    producers: tuple[str, ...]
    consumers: tuple[str, ...]
    messages: tuple[type[Message], ...]
    partitions: int = 3

    def full_name(self, prefix: str = "") -> str:
        return f"{prefix}{self.name}"

    def dlq_name(self, prefix: str = "") -> str:
        return f"{prefix}{self.name}{DLQ_SUFFIX}"


STUDIO_SESSIONS = Topic(
    "studio.sessions",
    "session_id",
    ("coach", "gateway"),
    ("edits", "gateway"),
    (SessionOpened, SessionClosed),
)
EDITS_TOOL_CALLS = Topic("edits.tool-calls", "session_id", ("coach",), ("edits",), (ToolCall,))
ACCESS_TOOL_CALLS = Topic("access.tool-calls", "session_id", ("coach",), ("access",), (ToolCall,))
ROUTINES_TOOL_CALLS = Topic("routines.tool-calls", "session_id", ("coach",), ("routines",), (ToolCall,))
CONNECTIONS_TOOL_CALLS = Topic("connections.tool-calls", "session_id", ("coach",), ("connections",), (ToolCall,))
DEPLOYER_TOOL_CALLS = Topic("deployer.tool-calls", "agent_id", ("coach",), ("deployer",), (ToolCall,))
STUDIO_TURNS = Topic("studio.turns", "session_id", ("coach",), ("gateway",), (StepEnded,))
TOOL_RESULTS = Topic(
    "studio.tool-results",
    "session_id",
    ("edits", "access", "routines", "connections", "deployer"),
    ("coach", "gateway"),
    (ToolResult,),
)
PROPOSALS_PROPOSED = Topic(
    "proposals.proposed",
    "session_id",
    ("edits", "access", "routines", "connections", "deployer"),
    ("gateway",),
    (ProposalProposed,),
)
PROPOSALS_DECIDED = Topic(
    "proposals.decided",
    "session_id",
    ("gateway",),
    ("edits", "access", "routines", "connections", "deployer"),
    (DecisionMade,),
)
PROPOSALS_APPLIED = Topic(
    "proposals.applied",
    "session_id",
    ("edits", "access", "routines", "connections", "deployer"),
    ("gateway", "coach"),
    (ProposalOutcome,),
)
STUDIO_CONTINUATIONS = Topic("studio.continuations", "session_id", ("gateway",), ("coach",), (TurnContinuation,))

REGISTRY: tuple[Topic, ...] = (
    STUDIO_SESSIONS,
    EDITS_TOOL_CALLS,
    ACCESS_TOOL_CALLS,
    ROUTINES_TOOL_CALLS,
    CONNECTIONS_TOOL_CALLS,
    DEPLOYER_TOOL_CALLS,
    STUDIO_TURNS,
    TOOL_RESULTS,
    PROPOSALS_PROPOSED,
    PROPOSALS_DECIDED,
    PROPOSALS_APPLIED,
    STUDIO_CONTINUATIONS,
)

TOOL_ROUTES: dict[str, Topic] = {
    # edits: memory, notes, guild text, collections, task drafts
    "studio_read_memory": EDITS_TOOL_CALLS,
    "studio_edit_memory": EDITS_TOOL_CALLS,
    "studio_edit_note": EDITS_TOOL_CALLS,
    "studio_edit_guild": EDITS_TOOL_CALLS,
    "studio_edit_collection": EDITS_TOOL_CALLS,
    "studio_create_task_draft": EDITS_TOOL_CALLS,
    # access
    "studio_edit_access": ACCESS_TOOL_CALLS,
    # routines
    "studio_list_routines": ROUTINES_TOOL_CALLS,
    "studio_edit_routine": ROUTINES_TOOL_CALLS,
    # logins
    "studio_request_connection_access": CONNECTIONS_TOOL_CALLS,
    "studio_call_connection_tool": CONNECTIONS_TOOL_CALLS,
    # source repositories
    "list_repo_files": DEPLOYER_TOOL_CALLS,
    "read_repo_file": DEPLOYER_TOOL_CALLS,
    "propose_source_change": DEPLOYER_TOOL_CALLS,
}
"""Which topic carries a call of each tool, so the coach can route without knowing the services."""


def route(tool: str) -> Topic:
    """The topic for ``tool``; ``KeyError`` when no service owns it."""
    return TOOL_ROUTES[tool]


def by_name(name: str) -> Topic:
    for topic in REGISTRY:
        if topic.name == name:
            return topic
    raise KeyError(name)
