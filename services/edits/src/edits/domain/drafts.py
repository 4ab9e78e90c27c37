"""Task drafts: ``studio_create_task_draft``, ``studio_read_task`` and ``studio_list_task_drafts``.

An agent's Task is never a proposal: the coach drafts a whole new Task text, and the operator publishes the
draft (the Task becomes its text), edits it first (each edit is a new version of the same draft, so the request
at the coach's message follows the newest version and keeps its ``created_message_seq``), or discards it.

A draft binds the hash of the Task it was drafted against (``base_hash``, from ``studio_read_task``): publishing
refuses with 409 when the Task changed since. Publishing also refuses (409 ``note_not_created``) while the newest
version embeds a note that does not exist yet (``{{note:<display_path>}}``, the embed rule of
:mod:`edits.domain.notes`), so a note proposed in the same turn is applied first. A new draft of the same agent
in the same turn replaces the waiting one, which then needs no answer (the registry's ``supersedes="turn"``).

These are the rules alone, without a broker or a database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints

from assent.contracts import Id, Text
from assent.domain import Agent, Refusal, Session, check_live_member
from assent.hashing import content_hash

from .notes import embedded_paths

Rationale = Annotated[Text, StringConstraints(min_length=1, max_length=4000, strip_whitespace=True)]
Hash = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
Status = Literal["pending", "published", "discarded", "superseded"]
RESOLVED: tuple[str, ...] = ("published", "discarded", "superseded")
TASK_FIELD = "task.md"
"""The card's one field: the agent's Task (an agent's ``task.md``)."""


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CreateTaskDraft(_Args):
    """``studio_create_task_draft(agent_id, content, base_hash, rationale)``: ``content`` is the whole new Task;
    ``base_hash`` the Task's ``hash`` as ``studio_read_task`` answered it."""

    agent_id: Id
    content: Text
    base_hash: Hash
    rationale: Rationale


class ReadTask(_Args):
    """``studio_read_task(agent_id)``: the agent's Task and the hash a draft of it binds."""

    agent_id: Id


class ListTaskDrafts(_Args):
    """``studio_list_task_drafts(agent_id)``: the agent's drafts, newest first, each at its newest version."""

    agent_id: Id


@dataclass(frozen=True)
class DraftVersion:
    version: int
    content: str
    hash: str
    author: str
    """Who wrote this version: ``coach`` for the drafted one, the operator's user id for an edit."""
    created_at: datetime | None = None


@dataclass(frozen=True)
class Draft:
    """A Task draft as stored, with its newest version."""

    draft_id: str
    org_id: str
    agent_id: str
    session_id: str
    created_message_seq: int
    turn_id: str
    proposal_id: str
    tool_call_id: str
    base_hash: str
    rationale: str
    status: str
    newest: DraftVersion
    replaced_by: str | None = None
    published_by_user_id: str | None = None
    discarded_by_user_id: str | None = None
    published_version: int | None = None
    resolved_at: datetime | None = None
    created_at: datetime | None = None


@dataclass(frozen=True)
class DraftProposal:
    """A reviewed, acceptable draft: what it binds and what its card shows."""

    agent_id: str
    agent_name: str
    guild_id: str | None
    base_version: int
    base_hash: str
    proposed_hash: str
    before: str
    after: str
    rationale: str


def task_hash(task: str) -> str:
    """The hash a draft binds: the Task's text's."""
    return content_hash(task)


def check_byte_cap(content: str, max_bytes: int, what: str = "the drafted Task") -> Refusal | None:
    size = len(content.encode())
    if size > max_bytes:
        return Refusal(422, "content_too_large", f"{what} is {size} bytes; the cap is {max_bytes} bytes")
    return None


def review_create(
    session: Session, args: CreateTaskDraft, agent: Agent | None, max_bytes: int
) -> DraftProposal | Refusal:
    """A live member of the source guild, the byte cap, the Task read (``base_hash``), and a change."""
    refusal = check_live_member(session, agent, args.agent_id) or check_byte_cap(args.content, max_bytes)
    if refusal is not None:
        return refusal
    assert agent is not None
    live_hash = task_hash(agent.task)
    if args.base_hash != live_hash:
        return Refusal(
            409,
            "stale_base_hash",
            f"base_hash {args.base_hash!r} is not the hash of {agent.name}'s Task now ({live_hash}); read it again "
            "with studio_read_task and draft against the live text",
        )
    if args.content == agent.task:
        return Refusal(422, "no_change", f"the draft is the same as {agent.name}'s Task")
    return DraftProposal(
        agent_id=agent.agent_id,
        agent_name=agent.name,
        guild_id=agent.guild_id,
        base_version=agent.revision,
        base_hash=live_hash,
        proposed_hash=content_hash(args.content),
        before=agent.task,
        after=args.content,
        rationale=args.rationale,
    )


def replaced(waiting: Iterable[Draft], turn_id: str) -> Draft | None:
    """The waiting draft a new one of the same agent replaces: the newest one drafted in the same turn (``waiting``:
    the agent's pending drafts of the session)."""
    same_turn = [d for d in waiting if d.status == "pending" and d.turn_id == turn_id]
    return max(same_turn, key=lambda d: d.created_message_seq, default=None)


def missing_notes(content: str, existing: Iterable[str]) -> list[str]:
    """The display paths ``content`` embeds that name no live note, sorted."""
    return sorted(embedded_paths(content) - set(existing))


def missing_notes_refusal(missing: list[str]) -> Refusal | None:
    """Publishing is refused (409) while the draft embeds a note not yet created."""
    if not missing:
        return None
    listed = ", ".join(repr(p) for p in missing)
    return Refusal(
        409,
        "note_not_created",
        f"the draft embeds {listed}, which {'is' if len(missing) == 1 else 'are'} not created yet; apply the note "
        "request first (or edit the draft), then publish",
    )


def missing_notes_line(missing: list[str]) -> str | None:
    """The card's line while the draft embeds notes not yet created."""
    if not missing:
        return None
    return f"Embeds notes not created yet: {', '.join(missing)}; publishing fails until they exist"


def check_editable(draft: Draft) -> Refusal | None:
    """Only a waiting draft takes a new version."""
    if draft.status != "pending":
        return Refusal(409, "draft_resolved", f"draft {draft.draft_id} was {draft.status}; it takes no more edits")
    return None


def review_edit(draft: Draft, content: str, expected_version: int | None, max_bytes: int) -> Refusal | None:
    """An edit of the operator: a waiting draft, at ``expected_version`` when given, within the cap, a change."""
    refusal = check_editable(draft) or check_byte_cap(content, max_bytes, "the draft")
    if refusal is not None:
        return refusal
    if expected_version is not None and expected_version != draft.newest.version:
        return Refusal(
            409,
            "stale_version",
            f"draft {draft.draft_id} is at version {draft.newest.version}, not {expected_version}",
        )
    if content == draft.newest.content:
        return Refusal(422, "no_change", f"the edit is the same as version {draft.newest.version} of the draft")
    return None


def moved(draft: Draft, live_task: str) -> bool:
    """Whether the Task changed since the draft was drafted against it."""
    return task_hash(live_task) != draft.base_hash
