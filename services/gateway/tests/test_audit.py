"""The chain's rules, on entries made in memory: an entry's hash covers every field but itself, the chain links
each entry to the one before, and a check names the first entry that does not fit (edited, missing, relinked)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest

from gateway.domain.audit import GENESIS, Entry, canonical, entry_hash, first_break, link, timestamp

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def chain(n: int, org: str = "org_a") -> list[Entry]:
    entries: list[Entry] = []
    prev = GENESIS
    for i in range(n):
        entry = link(org, i, prev, {"at": AT + timedelta(seconds=i), "type": "proposed", "actor": "coach", "seq": i})
        entries.append(entry)
        prev = entry.hash
    return entries


def test_the_canonical_encoding_is_sorted_json_without_spaces_and_utc_microseconds() -> None:
    entry = chain(1)[0]
    encoded = canonical(entry.model_dump())
    values = json.loads(encoded)
    assert list(values) == sorted(values) and "hash" not in values
    assert b" " not in encoded and values["at"] == "2026-12-03T08:00:00.000000Z"
    assert entry.hash == hashlib.sha256(encoded).hexdigest() == entry_hash(entry.model_dump())
    # An entry read back from its JSON (as an export gives it) hashes the same.
    assert entry_hash(json.loads(entry.model_dump_json())) == entry.hash
    assert timestamp(datetime(2026, 12, 3, 9, 0, 0, 5, tzinfo=UTC).astimezone()) == "2026-12-03T09:00:00.000005Z"


def test_each_entry_names_the_hash_of_the_one_before() -> None:
    entries = chain(3)
    assert entries[0].prev_hash == GENESIS
    assert [e.prev_hash for e in entries[1:]] == [e.hash for e in entries[:-1]]
    assert first_break(entries, GENESIS, 0) == (None, 3, entries[-1].hash)


def edited(entries: list[Entry]) -> list[Entry]:
    return [entries[0], entries[1].model_copy(update={"actor": "someone else"}), entries[2]]


def rehashed(entries: list[Entry]) -> list[Entry]:
    # Edited and hashed again: its own hash fits, the entry after it no longer names it.
    changed = link("org_a", 1, entries[0].hash, {"at": AT, "type": "proposed", "actor": "someone else", "seq": 1})
    return [entries[0], changed, entries[2]]


@pytest.mark.parametrize(
    ("tamper", "position", "reason", "checked"),
    [
        (edited, 1, "edited", 1),
        (lambda entries: [entries[0], entries[2]], 1, "gap", 1),
        (rehashed, 2, "unlinked", 2),
        (lambda entries: entries[1:], 0, "gap", 0),
        (lambda entries: [entries[1], entries[0], entries[2]], 0, "gap", 0),
    ],
    ids=["an edited entry", "a deleted entry", "an entry edited and hashed again", "the first removed", "reordered"],
)
def test_a_check_names_the_first_entry_that_does_not_fit(tamper, position, reason, checked) -> None:  # type: ignore[no-untyped-def]
    broken, n, _ = first_break(tamper(chain(3)), GENESIS, 0)
    assert broken is not None and (broken.position, broken.reason, n) == (position, reason, checked)


def test_a_chain_checked_from_the_middle_goes_on_from_the_hash_before_it() -> None:
    entries = chain(5)
    assert first_break(entries[2:], entries[1].hash, 2)[0] is None
    broken, _, _ = first_break(entries[2:], GENESIS, 2)
    assert broken is not None and broken.reason == "unlinked"
