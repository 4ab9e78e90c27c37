"""What the edits service knows of the workspace and of the requests it reviews."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Session:
    session_id: str
    org_id: str
    source_guild_id: str
    operator_user_id: str
    closed: bool = False


@dataclass(frozen=True)
class Agent:
    agent_id: str
    org_id: str
    guild_id: str | None
    name: str
    live: bool


@dataclass(frozen=True)
class LiveMemory:
    agent_id: str
    content: str
    version: int
    hash: str


@dataclass(frozen=True)
class Refusal:
    """Why a tool call is refused; ``status`` follows HTTP."""

    status: int
    code: str
    message: str


@dataclass(frozen=True)
class Request:
    """A recorded proposal as the owner keeps it (the studio_messages tool row of the seed)."""

    proposal_id: str
    session_id: str
    seq: int
    tool_call_id: str
    tool: str
    kind: str
    agent_id: str | None
    base_version: int | None
    base_hash: str
    proposed_hash: str
    content: str
    edit_status: str  # pending | applied | declined
    stale: bool
    resolved_by_user_id: str | None
    edit_resolved_at: datetime | None
    edit_version: int | None
