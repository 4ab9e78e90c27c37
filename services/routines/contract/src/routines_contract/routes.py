"""Routines on the public API, owned by the routines service: an agent's routines (list, create, change, delete)
and a guild's routines switch.

A routine's timing is a cron expression or a window (``services/routines/src/routines/domain/timing.py`` documents
both), in an IANA ``timezone``; a request passes at most one. Changing routines needs permission to change the agent
(admin or developer, or its owner or editor); the guild switch needs the admin or developer role. Another
organisation's agent, routine or guild answers 404.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from assent.api.declare import PublicRoute, RequestModel
from assent.api.roles import Permission
from assent.http import NoNul, Omissible, OneLine

OWNER = "routines"
TAG = "routines"

Line = Annotated[str, StringConstraints(min_length=1, max_length=200), OneLine]
Description = Annotated[str, StringConstraints(min_length=1, max_length=500), OneLine]
Instruction = Annotated[str, StringConstraints(min_length=1, max_length=8000), NoNul]
Zone = Annotated[str, StringConstraints(min_length=1, max_length=64), OneLine]

TIMING_RULE = (
    "a cron expression or a window, not both (a create needs one); a cron of five fields, a window such as "
    "'every 2 hours between 09:00 and 17:00 on weekdays'; an IANA time zone"
)


class RoutineIn(RequestModel):
    """A new routine of the agent: ``cron`` or ``window`` in ``timezone`` (default ``UTC``); ``paused`` starts it
    paused."""

    description: Description
    instruction: Instruction
    cron: Omissible[Line] = None
    window: Omissible[Line] = None
    timezone: Omissible[Zone] = None
    paused: Omissible[bool] = None


class RoutinePatch(RequestModel):
    """Change a routine: a field left out keeps its live value; a ``cron`` or ``window`` replaces the timing.
    ``expected_version``: 409 when the routine is at another."""

    description: Omissible[Description] = None
    instruction: Omissible[Instruction] = None
    cron: Omissible[Line] = None
    window: Omissible[Line] = None
    timezone: Omissible[Zone] = None
    paused: Omissible[bool] = None
    expected_version: Omissible[Annotated[int, Field(ge=1, le=2_147_483_647)]] = None


class SwitchIn(RequestModel):
    routines_on: bool


class Answer(BaseModel):
    """An answer of the routines routes: a value, built once and never changed."""

    model_config = ConfigDict(frozen=True)


class Routine(Answer):
    schedule_id: str
    agent_id: str
    guild_id: str
    description: str
    instruction: str
    cron: str | None
    window: str | None
    timezone: str
    timing: str
    """The timing in words, with its time zone."""
    paused: bool
    next_wake_at: str | None
    """The planned next wake-up (ISO 8601); None while paused."""
    version: int
    next_wakes: list[str] = []
    """The next three wake-ups in words, in the routine's time zone (none while paused or off)."""


class Routines(Answer):
    routines: list[Routine]
    routines_on: bool
    """Whether the agent's guild has its routines on."""


class GuildRoutines(Answer):
    guild_id: str
    routines_on: bool
    routines: list[Routine]


AGENT_404 = {404: "No such agent in the caller's organisation"}
ROUTINE_404 = {404: "No such routine of this agent in the caller's organisation"}


def _route(method: str, path: str, name: str, summary: str, permission: Permission, **more: object) -> PublicRoute:
    return PublicRoute(OWNER, method, path, name, summary, permission, TAG, **more)  # type: ignore[arg-type]


ROUTES = (
    _route(
        "GET",
        "/agents/{agent_id}/routines",
        "list_routines",
        "The agent's routines",
        Permission.READ,
        response=Routines,
        errors=AGENT_404,
    ),
    _route(
        "POST",
        "/agents/{agent_id}/routines",
        "create_routine",
        "Create a routine of the agent",
        Permission.CHANGE_AGENT,
        body=RoutineIn,
        response=Routine,
        status=201,
        errors={**AGENT_404, 409: "The agent is in no guild"},
        rules=TIMING_RULE,
    ),
    _route(
        "GET",
        "/agents/{agent_id}/routines/{schedule_id}",
        "read_routine",
        "A routine",
        Permission.READ,
        response=Routine,
        errors=ROUTINE_404,
    ),
    _route(
        "PATCH",
        "/agents/{agent_id}/routines/{schedule_id}",
        "change_routine",
        "Change a routine",
        Permission.CHANGE_AGENT,
        body=RoutinePatch,
        response=Routine,
        errors={**ROUTINE_404, 409: "expected_version is not the routine's version"},
        rules=TIMING_RULE + "; a change that changes nothing",
    ),
    _route(
        "DELETE",
        "/agents/{agent_id}/routines/{schedule_id}",
        "delete_routine",
        "Delete a routine",
        Permission.CHANGE_AGENT,
        response=Routine,
        errors=ROUTINE_404,
    ),
    _route(
        "GET",
        "/guilds/{guild_id}/routines",
        "guild_routines",
        "The guild's routines and its switch",
        Permission.READ,
        response=GuildRoutines,
        errors={404: "No such guild in the caller's organisation"},
    ),
    _route(
        "PUT",
        "/guilds/{guild_id}/routines-switch",
        "set_routines_switch",
        "Turn the guild's routines on or off (on again: each one's next wake-up is planned from now)",
        Permission.CHANGE_WORKSPACE,
        body=SwitchIn,
        response=GuildRoutines,
        errors={404: "No such guild in the caller's organisation"},
    ),
)
