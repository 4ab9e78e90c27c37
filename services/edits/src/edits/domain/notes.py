"""Note requests: ``studio_edit_note`` (create, edit, delete), ``studio_list_notes`` and ``studio_read_note``.

A note is a Markdown file that agents read. It lives at one of three levels, and its *display path* says
which, and is its name within the organisation:

- ``agent/<agent_id>/<key>``: read by that one agent;
- ``guild/<guild_id>/<key>``: read by the guild's agents;
- ``org/<key>``: read by every agent of the organisation.

``key`` is a ``.md`` file name with no folders. An agent's ``task.md`` and ``memory.md`` are not notes:
the Task changes through drafts, Memory through its own tool, so an agent note cannot take those names.

A session reaches the notes of its source guild, of that guild's live members and of the organisation.
Reviewing a request writes nothing; applying re-reads the live note and refuses when it moved since. These
are the rules alone, without a broker or a database.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints

from assent.contracts import Id, Text
from assent.domain import Agent, Refusal, Session, check_live_member
from assent.hashing import content_hash

Level = Literal["agent", "guild", "org"]
Reason = Annotated[Text, StringConstraints(min_length=1, max_length=4000, strip_whitespace=True)]
Title = Annotated[Text, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
Key = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
Path = Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$")]
Version = Annotated[int, Field(ge=0, le=2_147_483_647)]

RESERVED_AGENT_KEYS = frozenset({"task.md", "memory.md"})
"""An agent's own files, which are not notes (the Task changes through drafts, Memory through its tool)."""

EMBED = re.compile(r"\{\{note:([^{}\s]+)\}\}")
"""How a Task embeds a note: ``{{note:<display_path>}}`` anywhere in the agent's Task text.

The agent then reads the note's text where the marker stands, so a note that a Task embeds cannot be
deleted (deleting it is refused with 409 ``note_embedded`` until no Task of the organisation embeds it).
Example: a Task line ``Follow {{note:guild/g1/refunds.md}} for refunds.`` embeds ``guild/g1/refunds.md``.
"""


def embedded_paths(task: str) -> set[str]:
    """Every display path a Task embeds with ``{{note:<display_path>}}``."""
    return set(EMBED.findall(task))


def embeds(task: str, display_path: str) -> bool:
    """Whether a Task embeds the note at ``display_path``."""
    return display_path in embedded_paths(task)


def embedding_agents(agents: Iterable[Agent], display_path: str) -> list[Agent]:
    """The agents whose Task embeds the note at ``display_path``, by name."""
    return sorted((a for a in agents if embeds(a.task, display_path)), key=lambda a: (a.name, a.agent_id))


# --- arguments -----------------------------------------------------------------------------------------


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CreateNote(_Args):
    """``studio_edit_note(action: "create", level, agent_id?, key, title?, content, reason)``."""

    action: Literal["create"]
    level: Level
    agent_id: Id | None = None
    key: Key
    title: Title | None = None
    content: Text
    reason: Reason


class EditNote(_Args):
    """``studio_edit_note(action: "edit", display_path, content, base_version, reason)``."""

    action: Literal["edit"]
    display_path: Path
    content: Text
    base_version: Version
    reason: Reason


class DeleteNote(_Args):
    """``studio_edit_note(action: "delete", display_path, base_version, reason)``."""

    action: Literal["delete"]
    display_path: Path
    base_version: Version
    reason: Reason


class NoteRequest(RootModel[Annotated[CreateNote | EditNote | DeleteNote, Field(discriminator="action")]]):
    """Arguments of ``studio_edit_note``: one of the three actions, told apart by ``action``."""


class ListNotes(_Args):
    """Arguments of ``studio_list_notes()``."""


class ReadNote(_Args):
    """Arguments of ``studio_read_note(display_path)``."""

    display_path: Path


# --- paths ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NotePath:
    level: str
    scope_id: str | None
    key: str

    @property
    def display_path(self) -> str:
        return display_path(self.level, self.scope_id, self.key)


def display_path(level: str, scope_id: str | None, key: str) -> str:
    """``agent/<agent_id>/<key>``, ``guild/<guild_id>/<key>`` or ``org/<key>``."""
    return f"org/{key}" if level == "org" else f"{level}/{scope_id}/{key}"


def check_key(key: str, level: str) -> Refusal | None:
    """A key is a ``.md`` file name with no folders; an agent note cannot take ``task.md`` or ``memory.md``."""
    if "/" in key or "\\" in key or ".." in key:
        return Refusal(422, "invalid_key", f"note key {key!r} must be a file name with no folders")
    if not key.endswith(".md") or key == ".md" or key != key.strip():
        return Refusal(422, "invalid_key", f"note key {key!r} must be a .md file name")
    if level == "agent" and key.lower() in RESERVED_AGENT_KEYS:
        return Refusal(
            422,
            "not_a_note",
            f"{key!r} of an agent is not a note (the Task changes through drafts, Memory through studio_edit_memory)",
        )
    return None


def parse_display_path(path: str) -> NotePath | Refusal:
    """The note a display path names, or why it names none (a Task, a script, a record, ...)."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "org":
        parsed = NotePath("org", None, parts[1])
    elif len(parts) == 3 and parts[0] in ("agent", "guild") and parts[1]:
        parsed = NotePath(parts[0], parts[1], parts[2])
    else:
        return Refusal(
            422,
            "not_a_note",
            f"{path!r} is not a note: studio_edit_note takes notes only (agent/<agent_id>/<key>.md, "
            "guild/<guild_id>/<key>.md, org/<key>.md); Tasks, scripts, objects and records are not proposals",
        )
    refusal = check_key(parsed.key, parsed.level)
    return parsed if refusal is None else Refusal(refusal.status, "not_a_note", f"{path!r}: {refusal.message}")


def check_reach(session: Session, path: NotePath, agent: Agent | None) -> Refusal | None:
    """Notes of the source guild, of its live members and of the organisation are within reach.

    ``agent`` is the agent an agent note belongs to (None if unknown); an unknown agent's note is unknown.
    """
    if path.level == "guild" and path.scope_id != session.source_guild_id:
        return Refusal(
            422,
            "note_out_of_reach",
            f"{path.display_path!r} belongs to another guild than the session's source guild "
            f"{session.source_guild_id!r}",
        )
    if path.level == "agent":
        if agent is None or agent.org_id != session.org_id:
            return Refusal(404, "unknown_note", f"there is no note {path.display_path!r} in this organisation")
        if agent.guild_id != session.source_guild_id or not agent.live:
            return Refusal(
                422,
                "note_out_of_reach",
                f"{path.display_path!r} belongs to an agent that is not a live member of the session's source "
                f"guild {session.source_guild_id!r}",
            )
    return None


def within_reach(session: Session, path: NotePath, agents: dict[str, Agent]) -> bool:
    """Whether a note is within reach, given the organisation's agents by id (for listing)."""
    return check_reach(session, path, agents.get(path.scope_id or "")) is None


# --- live notes and proposals --------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveNote:
    note_id: str
    org_id: str
    level: str
    scope_id: str | None
    key: str
    title: str
    display_path: str
    content: str
    version: int
    hash: str


@dataclass(frozen=True)
class NoteProposal:
    """A reviewed, acceptable note request: what it binds and what its card shows."""

    action: str
    level: str
    scope_id: str | None
    key: str
    title: str
    display_path: str
    agent_id: str | None
    base_version: int | None
    base_hash: str | None
    proposed_hash: str
    before: str
    after: str
    reason: str
    notes: tuple[str, ...] = ()


def check_byte_cap(content: str, max_bytes: int, what: str = "the proposed note") -> Refusal | None:
    size = len(content.encode())
    if size > max_bytes:
        return Refusal(422, "content_too_large", f"{what} is {size} bytes; the cap is {max_bytes} bytes")
    return None


def readers_line(level: str, agent: Agent | None, guild_members: Iterable[Agent]) -> str:
    """Who reads a note: the one agent, the guild's agents, or the organisation's."""
    if level == "agent":
        return f"Read by {agent.name if agent else 'its agent'}"
    if level == "guild":
        names = sorted(a.name for a in guild_members if a.live)
        return "Read by the guild's agents: " + (", ".join(names) if names else "none yet")
    return "Read by every agent of the organisation"


def embedded_line(embedders: Iterable[Agent]) -> str | None:
    """The line a delete card shows while Tasks embed the note; None when none does."""
    names = [a.name for a in embedders]
    if not names:
        return None
    return f"Embedded in the Task of: {'; '.join(names)}; applying fails until none does"


def default_title(key: str) -> str:
    return key.removesuffix(".md")


def review_create(
    session: Session,
    args: CreateNote,
    agent: Agent | None,
    live: LiveNote | None,
    guild_members: Iterable[Agent],
    max_bytes: int,
) -> NoteProposal | Refusal:
    """Check the level's reach, the key and the byte cap, and that no note is live at the path."""
    if args.level == "agent":
        if args.agent_id is None:
            return Refusal(422, "invalid_arguments", "studio_edit_note: an agent note needs agent_id")
        refusal = check_live_member(session, agent, args.agent_id)
        if refusal is not None:
            return refusal
        scope_id: str | None = args.agent_id
    elif args.agent_id is not None:
        return Refusal(422, "invalid_arguments", f"studio_edit_note: a {args.level} note takes no agent_id")
    else:
        scope_id = session.source_guild_id if args.level == "guild" else None
    refusal = check_key(args.key, args.level) or check_byte_cap(args.content, max_bytes)
    if refusal is not None:
        return refusal
    path = display_path(args.level, scope_id, args.key)
    if live is not None:
        return Refusal(
            409,
            "note_exists",
            f"a note is already live at {path!r} (version {live.version}); propose a change to it with "
            f'studio_edit_note(action: "edit", display_path: "{path}", base_version: {live.version}, ...)',
        )
    return NoteProposal(
        action="create",
        level=args.level,
        scope_id=scope_id,
        key=args.key,
        title=args.title or default_title(args.key),
        display_path=path,
        agent_id=scope_id if args.level == "agent" else None,
        base_version=None,
        base_hash=None,
        proposed_hash=content_hash(args.content),
        before="",
        after=args.content,
        reason=args.reason,
        notes=(readers_line(args.level, agent, guild_members),),
    )


def _reached(session: Session, path: NotePath | Refusal, agent: Agent | None, live: LiveNote | None) -> Refusal | None:
    if isinstance(path, Refusal):
        return path
    refusal = check_reach(session, path, agent)
    if refusal is not None:
        return refusal
    if live is None:
        return Refusal(404, "unknown_note", f"there is no note {path.display_path!r} in this organisation")
    return None


def _stale_base(live: LiveNote, base_version: int) -> Refusal | None:
    if base_version != live.version:
        return Refusal(
            409,
            "stale_base_version",
            f"base_version {base_version} is not the live version {live.version} of {live.display_path!r}; read "
            "it again and propose against the live text",
        )
    return None


def review_edit(
    session: Session, args: EditNote, agent: Agent | None, live: LiveNote | None, max_bytes: int
) -> NoteProposal | Refusal:
    """Check reach, the byte cap, the base version and that the text changes; write nothing."""
    refusal = _reached(session, parse_display_path(args.display_path), agent, live)
    if refusal is not None:
        return refusal
    assert live is not None
    refusal = check_byte_cap(args.content, max_bytes) or _stale_base(live, args.base_version)
    if refusal is not None:
        return refusal
    if args.content == live.content:
        return Refusal(422, "no_change", "the proposed note is the same as the live note")
    return _of_live(live, "edit", args.content, args.reason)


def review_delete(
    session: Session, args: DeleteNote, agent: Agent | None, live: LiveNote | None, embedders: Iterable[Agent]
) -> NoteProposal | Refusal:
    """Check reach and the base version; the card names the agents whose Task embeds the note."""
    refusal = _reached(session, parse_display_path(args.display_path), agent, live)
    if refusal is not None:
        return refusal
    assert live is not None
    refusal = _stale_base(live, args.base_version)
    if refusal is not None:
        return refusal
    line = embedded_line(embedders)
    return _of_live(live, "delete", "", args.reason, () if line is None else (line,))


def _of_live(live: LiveNote, action: str, after: str, reason: str, notes: tuple[str, ...] = ()) -> NoteProposal:
    return NoteProposal(
        action=action,
        level=live.level,
        scope_id=live.scope_id,
        key=live.key,
        title=live.title,
        display_path=live.display_path,
        agent_id=live.scope_id if live.level == "agent" else None,
        base_version=live.version,
        base_hash=live.hash,
        proposed_hash=content_hash(after),
        before=live.content,
        after=after,
        reason=reason,
        notes=notes,
    )


def moved(base_hash: str | None, live: LiveNote | None) -> bool:
    """Whether the note changed since the proposal read it: a create binds that none is live (hash None)."""
    return (None if live is None else live.hash) != base_hash


def embedded_refusal(display_path: str, embedders: Iterable[Agent]) -> Refusal | None:
    """A delete is refused (409) while any Task of the organisation embeds the note."""
    names = [a.name for a in embedders]
    if not names:
        return None
    return Refusal(
        409,
        "note_embedded",
        f"{display_path!r} is embedded in the Task of {', '.join(names)}; remove {{{{note:{display_path}}}}} "
        "from those Tasks first",
    )
