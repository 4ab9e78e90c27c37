"""A routine's rules, with no I/O: its live state, its hash, what a ``studio_edit_routine`` asks, why it is
refused, and its card (the routine as text, and what applying does).

A routine belongs to one agent: a description, an instruction, a timing (:mod:`.timing`) and a pause flag, and its
planned next wake-up. The hash binds the agent, the timing, the description, the instruction and the pause, never
the planned wake-up: a fire moves that, and a waiting proposal stays fresh.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints

from assent.contracts import Id, Text
from assent.domain import Refusal
from assent.hashing import content_hash

from .timing import Timing, TimingError, wake_in_words

Reason = Annotated[Text, StringConstraints(min_length=1, max_length=4000, strip_whitespace=True)]
Description = Annotated[Text, StringConstraints(min_length=1, max_length=500, strip_whitespace=True)]
Instruction = Annotated[Text, StringConstraints(min_length=1, max_length=8000)]
TimingText = Annotated[Text, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
Zone = Annotated[Text, StringConstraints(min_length=1, max_length=64, strip_whitespace=True)]


@dataclass(frozen=True)
class Routine:
    """A routine as it is now."""

    schedule_id: str
    org_id: str
    guild_id: str
    agent_id: str
    description: str
    instruction: str
    timing: Timing
    paused: bool
    next_wake_at: datetime | None
    version: int = 1

    @property
    def hash(self) -> str:
        return routine_hash(self.agent_id, self.timing, self.description, self.instruction, self.paused)


@dataclass(frozen=True)
class Provenance:
    """Who writes a routine, and the request behind the write: its Studio session and seq (none for a person's own
    write)."""

    actor: str
    session_id: str | None = None
    seq: int | None = None


def routine_hash(agent_id: str, timing: Timing, description: str, instruction: str, paused: bool) -> str:
    """What a proposal binds: agent, timing, description, instruction and pause (not the planned wake-up)."""
    return content_hash(
        json.dumps(
            {
                "agent_id": agent_id,
                "cron": timing.cron,
                "window": timing.window,
                "timezone": timing.timezone,
                "description": description,
                "instruction": instruction,
                "paused": paused,
            },
            sort_keys=True,
        )
    )


class ListRoutines(BaseModel):
    """Arguments of ``studio_list_routines(agent_id?)``: the routines of the source guild's agents, or of one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: Id | None = None


class EditRoutine(BaseModel):
    """Arguments of ``studio_edit_routine``: ``create(agent_id, cron? | window?, timezone?, description,
    instruction, paused?, reason)``, ``edit(schedule_id, cron? | window?, timezone?, description?, instruction?,
    paused?, reason)`` or ``delete(schedule_id, reason)``. ``timezone`` (IANA, default ``UTC`` on a create) belongs
    to the timing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["create", "edit", "delete"]
    agent_id: Id | None = None
    schedule_id: Id | None = None
    cron: TimingText | None = None
    window: TimingText | None = None
    timezone: Zone | None = None
    description: Description | None = None
    instruction: Instruction | None = None
    paused: bool | None = None
    reason: Reason


@dataclass(frozen=True)
class Wanted:
    """The routine a proposal asks for (after a create or an edit)."""

    agent_id: str
    description: str
    instruction: str
    timing: Timing
    paused: bool

    @property
    def hash(self) -> str:
        return routine_hash(self.agent_id, self.timing, self.description, self.instruction, self.paused)


def refuse(code: str, message: str, status: int = 422) -> Refusal:
    return Refusal(status, code, message)


def timing_refusal(error: TimingError) -> Refusal:
    text = str(error)
    if text.startswith("bad cron"):
        return refuse("bad_cron", text)
    if text.startswith("bad window"):
        return refuse("bad_window", text)
    if text.startswith("bad timezone"):
        return refuse("bad_timezone", text)
    return refuse("bad_timing", text)


def wanted_routine(args: EditRoutine, live: Routine | None) -> Wanted | Refusal:
    """What ``args`` asks for over ``live`` (None on a create), or why it is refused: both timings, none on a
    create, a bad cron, window or time zone, a field a create lacks, a field a delete may not carry, a no-op edit."""
    if args.cron is not None and args.window is not None:
        return refuse("two_timings", "pass a cron expression or a window, not both")
    if args.action == "delete":
        extra = [
            name
            for name in ("agent_id", "cron", "window", "timezone", "description", "instruction", "paused")
            if getattr(args, name) is not None
        ]
        if extra:
            return refuse("invalid_arguments", f"a delete takes schedule_id and reason only, not {', '.join(extra)}")
        assert live is not None
        return Wanted(live.agent_id, live.description, live.instruction, live.timing, live.paused)
    if args.action == "create":
        if args.schedule_id is not None:
            return refuse("invalid_arguments", "a create names agent_id; a schedule_id is given when it is applied")
        if args.cron is None and args.window is None:
            return refuse("timing_required", "a create needs a timing: a cron expression or a window")
        missing = [name for name in ("description", "instruction") if getattr(args, name) is None]
        if missing:
            return refuse("missing_field", f"a create needs {' and '.join(missing)}")
        timing = Timing(args.cron, args.window, args.timezone or "UTC")
        assert args.agent_id is not None and args.description is not None and args.instruction is not None
        wanted = Wanted(args.agent_id, args.description, args.instruction, timing, bool(args.paused))
    else:
        assert live is not None
        if args.agent_id is not None and args.agent_id != live.agent_id:
            return refuse("invalid_arguments", "a routine stays with its agent; an edit names it by schedule_id")
        timing = live.timing
        if args.cron is not None or args.window is not None:
            timing = Timing(args.cron, args.window, args.timezone or live.timing.timezone)
        elif args.timezone is not None:
            timing = replace(live.timing, timezone=args.timezone)
        wanted = Wanted(
            live.agent_id,
            live.description if args.description is None else args.description,
            live.instruction if args.instruction is None else args.instruction,
            timing,
            live.paused if args.paused is None else args.paused,
        )
    try:
        wanted.timing.check()
    except TimingError as error:
        return timing_refusal(error)
    if live is not None and wanted.hash == live.hash:
        return refuse("no_change", "the edit changes nothing: every field it passes holds its live value")
    return wanted


def as_text(agent_name: str, agent_id: str, routine: Wanted | Routine | None) -> str:
    """The routine as a card shows it: agent, description, timing in words, paused, instruction."""
    if routine is None:
        return ""
    return (
        f"Agent: {agent_name} ({agent_id})\n"
        f"Description: {routine.description}\n"
        f"Timing: {routine.timing.in_words()}\n"
        f"Paused: {'yes' if routine.paused else 'no'}\n"
        f"Instruction:\n{routine.instruction}\n"
    )


def effects(
    action: str, agent_name: str, live: Routine | None, wanted: Wanted, now: datetime, routines_on: bool
) -> tuple[str, ...]:
    """What applying does, line by line: when the agent wakes (the next three wake-ups in the routine's zone), a new
    instruction reaching later wake-ups only, a pause or resume, the next wake-up planned again from the apply, the
    guild's routines being off."""
    if action == "delete":
        lines = [f"Deletes the routine: {agent_name} no longer wakes for it."]
        return (*lines, *_off(routines_on, agent_name, deleting=True))
    lines = []
    if wanted.paused:
        lines.append(f"{agent_name} does not wake for it while it is paused.")
    else:
        wakes = wanted.timing.next_wakes(now, 3)
        lines.append(f"{agent_name} wakes {wanted.timing.in_words()}: next " + "; ".join(map(wake_in_words, wakes)))
    if live is not None:
        if wanted.instruction != live.instruction:
            lines.append("The new instruction reaches later wake-ups only: a wake-up already sent keeps its own.")
        if wanted.paused and not live.paused:
            lines.append("Pauses the routine.")
        if live.paused and not wanted.paused:
            lines.append("Resumes the routine.")
    if not wanted.paused and (live is None or live.timing != wanted.timing or live.paused):
        lines.append("The next wake-up is planned again from the moment the change is applied.")
    return (*lines, *_off(routines_on, agent_name))


def _off(routines_on: bool, agent_name: str, *, deleting: bool = False) -> tuple[str, ...]:
    if routines_on or deleting:
        return ()
    return (f"The guild's routines are off: {agent_name} does not wake for any of them until they are turned on.",)
