"""What the edits service knows of its own targets."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LiveMemory:
    agent_id: str
    content: str
    version: int
    hash: str


@dataclass(frozen=True)
class WriteOrigin:
    """Who made a write, and the request behind it: the tool call that proposed it, in which session at which seq
    (none of these for a person's own direct write)."""

    actor: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    studio_session_id: str | None = None
    studio_seq: int | None = None
