"""What the edits service knows of its own targets."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LiveMemory:
    agent_id: str
    content: str
    version: int
    hash: str
