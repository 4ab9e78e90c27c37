"""What an owner knows of a studio session and of the workspace it works on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Refusal:
    """Why a tool call (or a decision) is refused; ``status`` follows HTTP (404 unknown, 409 moved, 422)."""

    status: int
    code: str
    message: str


@dataclass(frozen=True)
class Session:
    session_id: str
    org_id: str
    source_guild_id: str
    operator_user_id: str
    closed: bool = False
    source_guild_snapshot: dict[str, Any] | None = None


@dataclass(frozen=True)
class Guild:
    guild_id: str
    org_id: str
    name: str
    about: str = ""
    description: str = ""
    revision: int = 1


@dataclass(frozen=True)
class Agent:
    agent_id: str
    org_id: str
    guild_id: str | None
    name: str
    live: bool = True
    task: str = ""
    revision: int = 1
    owners: tuple[str, ...] = ()
    """Users who own the agent: they may change it (its Memory, its requests) whatever their organisation role."""
    editors: tuple[str, ...] = ()
    """Users who may edit the agent, like its owners."""
