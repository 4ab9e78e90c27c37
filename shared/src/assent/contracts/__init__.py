"""Assent's message contracts: one module per topic family, all frozen pydantic v2 models."""

from .connections import CatalogTool, ConnectionCatalog
from .deploys import (
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
from .envelope import Id, MalformedMessage, Message, Seq, Text, parse_message, upcaster
from .proposals import Card, CardField, DecisionMade, ProposalOutcome, ProposalProposed, lines_of
from .routines import RoutinesChanged, RoutineWokeUp
from .sessions import SessionClosed, SessionOpened
from .tool_calls import Channel, Requester, SessionContext, ToolCall
from .tool_results import (
    AccessChange,
    AccessEdit,
    AgentRef,
    LineCounts,
    ProposalBase,
    ProposalTarget,
    ProposalWidget,
    ToolError,
    ToolResult,
)
from .turns import DecisionSummary, StepEnded, TurnContinuation
from .workspace import AgentChanged, GuildChanged, OrgChanged

__all__ = [
    "AccessChange",
    "AccessEdit",
    "AgentChanged",
    "AgentRef",
    "BuildFinished",
    "BuildProgressed",
    "BuildStarted",
    "Card",
    "CardField",
    "CatalogTool",
    "Channel",
    "ConnectionCatalog",
    "DecisionMade",
    "DecisionSummary",
    "DeployFailed",
    "DeployLive",
    "DeployPromoted",
    "DeployStarted",
    "GuildChanged",
    "Id",
    "IssueFixLinked",
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
    "RoutineWokeUp",
    "RoutinesChanged",
    "Seq",
    "SessionClosed",
    "SessionContext",
    "SessionOpened",
    "SourceCommitted",
    "StepEnded",
    "Text",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "TurnContinuation",
    "lines_of",
    "parse_message",
    "upcaster",
]
