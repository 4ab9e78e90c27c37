"""Source proposals as plain data: the files of a proposal, what a proposal holds, who asked, the read budget, and
how a new proposal of a chat takes over its waiting predecessor."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

from assent.contracts import Requester
from assent.hashing import content_hash

from .paths import Origin

READ_BUDGET = 160_000
"""Characters of source the builder chat reads at once; files that do not fit are listed by path only."""
MAX_FILE_CHARS = READ_BUDGET
"""A file larger than this (or not UTF-8 text) cannot be read, so a proposal can neither change nor delete it."""

FileAction = Literal["create", "edit", "delete"]


class FileChange(BaseModel):
    """One file of a proposal: its text when read (None: absent) and the proposed text (None: deleted). A proposal
    holds it with the hash of the text read (``base_hash``)."""

    model_config = ConfigDict(frozen=True)

    path: str
    before: str | None
    after: str | None

    @property
    def action(self) -> FileAction:
        return "create" if self.before is None else "delete" if self.after is None else "edit"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def base_hash(self) -> str | None:
        return None if self.before is None else content_hash(self.before)


class SourceChange(BaseModel):
    """What a source proposal holds (its ``payload``): where and by whom it was asked, the source version its files
    were read at, the files, and the chat's proposal it replaces with the files it left out."""

    model_config = ConfigDict(frozen=True)

    org_id: str
    agent_id: str
    origin: Origin
    source_version: str
    files: tuple[FileChange, ...]
    reason: str
    asked_by: str | None = None
    model: str | None = None
    issue_id: str | None = None
    chat: str | None = None
    """The agent's chat it was asked in; None from the builder chat."""
    replaces: str | None = None
    left_out: tuple[str, ...] = ()


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
