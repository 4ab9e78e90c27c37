"""Assent's message contracts: one module per topic family, all frozen pydantic v2 models."""

from .envelope import Id, MalformedMessage, Message, Seq, Text, parse_message, upcaster
from .proposals import Card, DecisionMade, ProposalOutcome, ProposalProposed
from .sessions import SessionClosed, SessionOpened
from .tool_calls import ToolCall
from .tool_results import EditBase, EditTarget, LineCounts, StudioEditRequest, ToolError, ToolResult
from .turns import DecisionSummary, StepEnded, TurnContinuation

__all__ = [
    "Card",
    "DecisionMade",
    "DecisionSummary",
    "EditBase",
    "EditTarget",
    "Id",
    "LineCounts",
    "MalformedMessage",
    "Message",
    "ProposalOutcome",
    "ProposalProposed",
    "Seq",
    "SessionClosed",
    "SessionOpened",
    "StepEnded",
    "StudioEditRequest",
    "Text",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "TurnContinuation",
    "parse_message",
    "upcaster",
]
