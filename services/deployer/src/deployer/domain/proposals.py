"""Source proposals as plain data: the files of a proposal, who asked, the read budget, and how a new
proposal of a chat takes over its waiting predecessor."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from assent.contracts import Requester
from assent.hashing import content_hash

READ_BUDGET = 160_000
"""Characters of source the builder chat reads at once; files that do not fit are listed by path only."""
MAX_FILE_CHARS = READ_BUDGET
"""A file larger than this (or not UTF-8 text) cannot be read, so a proposal can neither change nor delete it."""

FileAction = Literal["create", "edit", "delete"]


@dataclass(frozen=True)
class FileChange:
    """One file of a proposal: its text when read (None: absent) and the proposed text (None: deleted)."""

    path: str
    before: str | None
    after: str | None

    @property
    def action(self) -> FileAction:
        return "create" if self.before is None else "delete" if self.after is None else "edit"

    @property
    def base_hash(self) -> str | None:
        return None if self.before is None else content_hash(self.before)

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "before": self.before, "after": self.after, "base_hash": self.base_hash}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FileChange:
        return cls(data["path"], data["before"], data["after"])


def files_hash(hashes: Mapping[str, str | None]) -> str:
    """One hash over several files' hashes (None: absent), independent of their order."""
    return content_hash(json.dumps(dict(sorted(hashes.items())), separators=(",", ":")))


def text_hash(text: str | None) -> str | None:
    return None if text is None else content_hash(text)


def who_asked(requester: Requester | None, operator_user_id: str, session_org: str) -> str | None:
    """What a proposal shows as its requester: the user's email, their user id when they are outside the
    organisation, nothing when the chat ran on a token minted with an API key."""
    if requester is None:
        return operator_user_id
    if requester.user_id is None:
        return None
    if requester.org_id is not None and requester.org_id != session_org:
        return requester.user_id
    return requester.email or requester.user_id


def drop_unchanged(changes: Iterable[FileChange]) -> list[FileChange]:
    """Files whose proposed text differs from the text read (a delete of an absent file changes nothing)."""
    return [change for change in changes if change.before != change.after]


def carry_over(
    previous: Sequence[FileChange], proposed: Iterable[str], head_hashes: Mapping[str, str | None]
) -> tuple[list[FileChange], list[str]]:
    """The files of a chat's waiting proposal that the next one keeps: every file it does not name again,
    unless the repository's text of it changed since (then it is left out; returned second)."""
    named = set(proposed)
    kept: list[FileChange] = []
    left_out: list[str] = []
    for change in previous:
        if change.path in named:
            continue
        if head_hashes.get(change.path) != change.base_hash:
            left_out.append(change.path)
        else:
            kept.append(change)
    return kept, left_out


def moved_files(changes: Iterable[FileChange], head_hashes: Mapping[str, str | None]) -> list[str]:
    """Files whose repository text is no longer the text that was read."""
    return [change.path for change in changes if head_hashes.get(change.path) != change.base_hash]


def fit_budget(sizes: Sequence[tuple[str, int]], budget: int = READ_BUDGET) -> tuple[list[str], list[str]]:
    """Which files (in path order) the builder reads whole within ``budget`` characters, and which it lists only."""
    read: list[str] = []
    listed: list[str] = []
    used = 0
    for path, size in sorted(sizes):
        if used + size <= budget:
            read.append(path)
            used += size
        else:
            listed.append(path)
    return read, listed
