"""Assent's message contracts that every service shares: one module per topic family, all frozen pydantic v2
models. An owner's own messages are in its contract package (:mod:`assent.owners`)."""

from .envelope import Id, MalformedMessage, Message, Seq, Text, parse_message, upcaster
from .proposals import Card, CardField, DecisionMade, ProposalOutcome, ProposalProposed, lines_of
from .sessions import CoachInfo, SessionClosed, SessionOpened
from .tool_calls import Channel, Requester, SessionContext, ToolCall
from .tool_results import (
    LineCounts,
    ProposalBase,
    ProposalTarget,
    ProposalWidget,
    ToolError,
    ToolResult,
)
from .turns import DecisionSummary, StepEnded, TurnContinuation
from .workspace import AgentChanged, GuildChanged, OrgChanged
from .writes import WorkspaceWritten

__all__ = [
    "AgentChanged",
    "Card",
    "CardField",
    "Channel",
    "CoachInfo",
    "DecisionMade",
    "DecisionSummary",
    "GuildChanged",
    "Id",
    "LineCounts",
    "MalformedMessage",
    "Message",
    "OrgChanged",
    "ProposalBase",
    "ProposalOutcome",
    "ProposalProposed",
    "ProposalTarget",
    "ProposalWidget",
    "Requester",
    "Seq",
    "SessionClosed",
    "SessionContext",
    "SessionOpened",
    "StepEnded",
    "Text",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "TurnContinuation",
    "WorkspaceWritten",
    "lines_of",
    "parse_message",
    "upcaster",
]
