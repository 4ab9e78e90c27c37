"""Assent's message contracts: one module per topic family, all frozen pydantic v2 models."""

from .deploys import SourceCommitted
from .envelope import Id, MalformedMessage, Message, Seq, Text, parse_message, upcaster
from .proposals import Card, CardField, DecisionMade, ProposalOutcome, ProposalProposed
from .sessions import SessionClosed, SessionOpened
from .tool_calls import Channel, Requester, SessionContext, ToolCall
from .tool_results import EditBase, EditTarget, LineCounts, StudioEditRequest, ToolError, ToolResult
from .turns import DecisionSummary, StepEnded, TurnContinuation
from .workspace import AgentChanged, GuildChanged, OrgChanged

__all__ = [
    "AgentChanged",
    "Card",
    "CardField",
    "Channel",
    "DecisionMade",
    "DecisionSummary",
    "EditBase",
    "EditTarget",
    "GuildChanged",
    "Id",
    "LineCounts",
    "MalformedMessage",
    "Message",
    "OrgChanged",
    "ProposalOutcome",
    "ProposalProposed",
    "Requester",
    "Seq",
    "SessionClosed",
    "SessionContext",
    "SessionOpened",
    "SourceCommitted",
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
