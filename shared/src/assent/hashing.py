"""Content hashes, line counts and diffs shared by every owner of text targets and by the gateway."""

from __future__ import annotations

import difflib
import hashlib


def content_hash(text: str) -> str:
    """A stable hash of text content: ``sha256:<hex>`` of its UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def line_counts(before: str, after: str) -> tuple[int, int]:
    """Lines added and removed going from ``before`` to ``after``."""
    added = removed = 0
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


def unified_diff(before: str, after: str, name: str) -> str:
    """A unified diff from the live text to the proposal, as ``diff -u`` would print it."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )
