"""The history as an audit log that proves itself: each organisation's entries form a hash chain.

An entry's hash is SHA-256 over its canonical encoding (:func:`canonical`): a JSON object of every field of
:class:`Entry` but ``hash`` (its organisation, position, time, what happened, and ``prev_hash``, the hash of the entry
before it), keys sorted, no whitespace, UTF-8, times in UTC as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``. The first entry of an
organisation carries :data:`GENESIS` as ``prev_hash``. So an edited entry no longer matches its hash, a removed one
leaves a gap in the positions or a ``prev_hash`` that names no entry, and an entry moved elsewhere no longer fits the
hash of the entry after it. The docs (explanation/history.md) specify the encoding for a verifier outside Assent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_serializer

GENESIS = "0" * 64
"""The ``prev_hash`` of an organisation's first entry."""

EntryType = Literal["proposed", "decided", "approved", "outcome", "continued", "written"]


class Entry(BaseModel):
    """One entry of an organisation's history.

    ``type`` says what happened: ``proposed`` (a coach proposed; ``actor`` is ``coach``, ``via`` the tool),
    ``decided`` (a decision was taken: ``decision`` is its word, ``actor`` who took it, ``via`` where), ``outcome``
    (what a decision did, or how a proposal was resolved without one: ``outcome`` and its reason in ``detail``),
    ``continued`` (a paused turn continued: ``detail`` is what the coach was told, ``target`` the turn and step) and
    ``written`` (a direct write of the workspace, outside any proposal). ``hash_before`` and ``hash_after`` are the
    target's content hashes before and after (what the proposal was bound to and would leave, what the write
    changed)."""

    model_config = ConfigDict(frozen=True)

    org_id: str
    position: int
    at: datetime
    type: EntryType
    guild_id: str | None = None
    session_id: str | None = None
    seq: int | None = None
    proposal_id: str | None = None
    kind: str | None = None
    action: str | None = None
    agent_id: str | None = None
    target: str | None = None
    actor: str
    via: str | None = None
    decision: str | None = None
    outcome: str | None = None
    detail: str | None = None
    hash_before: str | None = None
    hash_after: str | None = None
    prev_hash: str
    hash: str

    @field_serializer("at", when_used="json")
    def _canonical_time(self, at: datetime) -> str:
        # In JSON as the canonical encoding writes it: an exported entry's hash is computed over its fields as read.
        return timestamp(at)


HASHED_FIELDS = tuple(name for name in Entry.model_fields if name != "hash")
"""The fields an entry's hash covers: all but ``hash`` itself."""


def timestamp(at: datetime) -> str:
    """A time as the canonical encoding writes it: UTC, microseconds, ``Z``."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical(fields: dict[str, object]) -> bytes:
    """The canonical encoding of an entry's :data:`HASHED_FIELDS` (a mapping that holds each of them)."""
    values = {name: fields[name] for name in HASHED_FIELDS}
    at = values["at"]
    if isinstance(at, datetime):
        values["at"] = timestamp(at)
    return json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entry_hash(fields: dict[str, object]) -> str:
    """The hash of an entry with these fields (``hash``, if there, is not read): hex SHA-256 of :func:`canonical`."""
    return hashlib.sha256(canonical(fields)).hexdigest()


def link(org_id: str, position: int, prev_hash: str, fields: dict[str, object]) -> Entry:
    """The entry at ``position`` of ``org_id``'s chain after the entry whose hash is ``prev_hash``, from the fields
    of what happened (``at``, ``type``, ``actor`` and any of the optional fields)."""
    values: dict[str, object] = {name: None for name in HASHED_FIELDS}
    values.update({key: value for key, value in fields.items() if key in values})
    values.update(org_id=org_id, position=position, prev_hash=prev_hash)
    return Entry.model_validate({**values, "hash": entry_hash(values)})


class Break(BaseModel):
    """The first entry of a range that does not fit the chain, and why: ``gap`` (the positions skip: entries were
    removed before ``position``), ``edited`` (the entry no longer matches its hash), ``unlinked`` (its
    ``prev_hash`` is not the hash of the entry before it) or ``checkpoint`` (a signed checkpoint does not hold:
    the entry at its position is not the one it names, the chain ends before it, or its signature fails)."""

    model_config = ConfigDict(frozen=True)

    position: int
    reason: Literal["gap", "edited", "unlinked", "checkpoint"]
    detail: str


def first_break(entries: Iterable[Entry], prev_hash: str, position: int) -> tuple[Break | None, int, str]:
    """Check ``entries`` (in position order) as the chain that goes on from the entry at ``position - 1`` whose hash
    is ``prev_hash``. Answers the first :class:`Break` (None if all fit), how many entries were checked, and the
    hash of the last entry that fit."""
    checked = 0
    for entry in entries:
        if entry.position != position:
            return (
                Break(
                    position=position,
                    reason="gap",
                    detail=f"entry {position} is missing: the next entry is at {entry.position}",
                ),
                checked,
                prev_hash,
            )
        if entry_hash(entry.model_dump()) != entry.hash:
            return (
                Break(position=position, reason="edited", detail=f"entry {position} does not match its hash"),
                checked,
                prev_hash,
            )
        if entry.prev_hash != prev_hash:
            return (
                Break(
                    position=position,
                    reason="unlinked",
                    detail=f"entry {position} names {entry.prev_hash[:12]}… as the entry before it, which is"
                    f" {prev_hash[:12]}…",
                ),
                checked,
                prev_hash,
            )
        checked += 1
        prev_hash = entry.hash
        position += 1
    return None, checked, prev_hash
