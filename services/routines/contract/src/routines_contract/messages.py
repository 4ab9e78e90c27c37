"""Messages of the routines service: ``agent.routines.changed`` (a routine or a guild's switch changed, on the
guild's stream) and ``routines.wakeups`` (a routine woke its agent)."""

from typing import Literal

from assent.contracts import Id, Message, Seq, Text


class RoutinesChanged(Message):
    """A guild's routines changed: one was created, edited or deleted (``schedule_id``, ``agent_id``), or the guild's
    switch turned them on or off. ``studio_session_id`` and ``studio_seq`` name the proposal that did it, if one
    did; ``next_wake_at`` is the routine's planned wake-up after the change (None: paused, deleted or off)."""

    type: Literal["RoutinesChanged"] = "RoutinesChanged"
    v: Literal[1] = 1
    org_id: Id
    guild_id: Id
    change: Literal["created", "edited", "deleted", "routines_on", "routines_off"]
    agent_id: Id | None = None
    schedule_id: Id | None = None
    version: int | None = None
    next_wake_at: str | None = None
    actor: Id
    studio_session_id: Id | None = None
    studio_seq: Seq | None = None


class RoutineWokeUp(Message):
    """A routine woke its agent, once for its due time ``due_at`` (ISO 8601, UTC): the agent's runtime acts on
    ``instruction``, the one in force when it fired. Keyed by ``agent_id``."""

    type: Literal["RoutineWokeUp"] = "RoutineWokeUp"
    v: Literal[1] = 1
    org_id: Id
    guild_id: Id
    agent_id: Id
    schedule_id: Id
    description: Text
    instruction: Text
    due_at: str
    fired_at: str
    next_wake_at: str | None = None
