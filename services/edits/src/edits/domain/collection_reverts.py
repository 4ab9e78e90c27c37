"""What undoes an applied collection request, from the collection's change log alone (pure: no I/O).

The change log (``collection_changes``) holds every write of a collection with the request behind it: a ``create``
with the collection as made, an ``update`` with its name, purpose and columns after (and the columns it removed,
renamed and retyped), a ``delete``, and each access row written. Replaying the entries before a request's first one
gives the collection as it was before the request (:func:`replay`); the inverse is then a call of
``studio_edit_collection`` that proposes that state over the collection as it is now (:func:`inverse`):

- a **create** is undone by deleting the table (its records, added since, go with it: the card counts them);
- an **edit** is undone by an edit back: the name and purpose it had, its columns as they were (a column the request
  renamed is renamed back, so its values stay; one it removed comes back empty, one it added goes with its values;
  one it retyped gets its type back), and each access row it wrote set to what it was;
- a **delete** is undone by creating the table again, with the name, purpose, scope, columns and access rows it had
  and no records (the deleted records are not kept).

Each is proposed bound to the collection as it is now (an edit carries its current ``updated_at``), so a change made
since the request is shown on the card, never overwritten unseen. Refused (409): the log holds nothing of the
request (``before_unknown``), the collection already reads as before (``already_reverted``), or an edit's table was
deleted since (``deleted_since``: revert the delete first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assent.domain import Refusal
from edits_contract.collections import CollectionChange, CreateLogged, UpdateLogged

from .collections import AccessRow, ColumnSpec, LiveCollection


@dataclass(frozen=True)
class State:
    """A collection as the log says it was at some point: what an edit or a create can propose again."""

    name: str
    purpose: str
    scope: str
    columns: tuple[ColumnSpec, ...]
    access: tuple[AccessRow, ...]


def _columns(detail: CreateLogged | UpdateLogged) -> tuple[ColumnSpec, ...]:
    return tuple(ColumnSpec(name=c.name, type=c.type, required=c.required, unique=c.unique) for c in detail.columns)


def replay(changes: Sequence[CollectionChange]) -> State | None:
    """The collection after ``changes`` (its log's entries, oldest first); None before its create or after its
    delete."""
    state: State | None = None
    rows: dict[tuple[str, str], str] = {}
    for entry in changes:
        detail = entry.detail
        if entry.change == "create" and isinstance(detail, CreateLogged):
            rows = {(kind, subject): mode for kind, subject, mode in detail.access}
            state = State(detail.name, detail.purpose, detail.scope, _columns(detail), ())
        elif entry.change == "update" and isinstance(detail, UpdateLogged) and state is not None:
            state = State(detail.name, detail.purpose, state.scope, _columns(detail), ())
        elif entry.change == "delete":
            state, rows = None, {}
        elif entry.change == "access" and entry.kind is not None and entry.subject_id is not None:
            if entry.mode is None:
                rows.pop((entry.kind, entry.subject_id), None)
            else:
                rows[(entry.kind, entry.subject_id)] = entry.mode
    if state is None:
        return None
    access = tuple(AccessRow(kind, subject, mode) for (kind, subject), mode in sorted(rows.items()))
    return State(state.name, state.purpose, state.scope, state.columns, access)


def _renamed(entries: Sequence[CollectionChange]) -> dict[str, str]:
    """The columns the request renamed: each old name to its new one."""
    renamed: dict[str, str] = {}
    for entry in entries:
        if entry.change == "update" and isinstance(entry.detail, UpdateLogged):
            renamed.update({old: new for old, new in entry.detail.renamed})
    return renamed


def _column_args(column: ColumnSpec, rename_from: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"name": column.name, "type": column.type}
    if column.required:
        args["required"] = True
    if column.unique:
        args["unique"] = True
    if rename_from is not None:
        args["rename_from"] = rename_from
    return args


def _access_back(
    before: State, live_rows: Sequence[AccessRow], entries: Sequence[CollectionChange], source_guild_id: str
) -> dict[str, Any] | None:
    """The ``access`` argument that sets each row the request wrote back to what it was (None: all already are).
    Only the source guild's row and its agents' rows can be asked for, as the request itself could."""
    was = {(r.kind, r.subject_id): r.mode for r in before.access}
    now = {(r.kind, r.subject_id): r.mode for r in live_rows}
    guild: str | None = None
    agents: list[dict[str, str]] = []
    written = [(e.kind, e.subject_id) for e in entries if e.change == "access" and e.kind and e.subject_id]
    for kind, subject in dict.fromkeys(written):
        assert kind is not None and subject is not None  # as filtered above
        key = (kind, subject)
        if was.get(key) == now.get(key):
            continue
        if kind == "guild" and subject == source_guild_id:
            guild = was.get(key) or "none"
        elif kind == "agent":
            agents.append({"agent_id": subject, "mode": was.get(key) or "inherit"})
    if guild is None and not agents:
        return None
    access: dict[str, Any] = {"agents": agents}
    if guild is not None:
        access["guild"] = guild
    return access


def _access_as_made(state: State, source_guild_id: str) -> dict[str, Any] | None:
    """The ``access`` argument of a create that gives back the rows ``state`` had beyond those a create starts with
    (the guild's at write, or the organisation's at read)."""
    rows = {(r.kind, r.subject_id): r.mode for r in state.access}
    access: dict[str, Any] = {}
    guild_mode = rows.get(("guild", source_guild_id))
    starts = "write" if state.scope == "guild" else None
    if guild_mode != starts:
        access["guild"] = guild_mode or "none"
    agents = [{"agent_id": subject, "mode": mode} for (kind, subject), mode in sorted(rows.items()) if kind == "agent"]
    if agents:
        access["agents"] = agents
    return access or None


def inverse(
    action: str,
    changes: Sequence[CollectionChange],
    session_id: str,
    seq: int,
    live: LiveCollection | None,
    source_guild_id: str,
) -> dict[str, Any] | Refusal:
    """The arguments of ``studio_edit_collection`` (without ``reason``) that undo applied request ``seq`` of session
    ``session_id`` (an ``action`` of create, edit or delete), given the collection's log ``changes`` (oldest first)
    and the collection as it is now (``live``; None: it does not exist)."""
    first = next(
        (i for i, c in enumerate(changes) if c.studio_session_id == session_id and c.studio_seq == seq),
        None,
    )
    if first is None:
        return Refusal(409, "before_unknown", "the table's change log holds nothing of this request")
    mine = [c for c in changes[first:] if c.studio_session_id == session_id and c.studio_seq == seq]
    before = replay(changes[:first])
    if action == "create":
        if live is None:
            return Refusal(409, "already_reverted", "the table it created does not exist any more")
        return {"action": "delete", "collection": live.collection_id}
    if before is None:
        return Refusal(409, "before_unknown", "what the table was before this request is not in its change log")
    if action == "delete":
        made: dict[str, Any] = {
            "action": "create",
            "name": before.name,
            "purpose": before.purpose,
            "scope": before.scope,
            "columns": [_column_args(c) for c in before.columns],
        }
        access = _access_as_made(before, source_guild_id)
        if access is not None:
            made["access"] = access
        return made
    if live is None:
        return Refusal(409, "deleted_since", "the table was deleted since this request; revert its delete first")
    edit: dict[str, Any] = {
        "action": "edit",
        "collection": live.collection_id,
        "base_updated_at": live.updated_at.isoformat(),
    }
    if live.name != before.name:
        edit["name"] = before.name
    if live.purpose != before.purpose:
        edit["purpose"] = before.purpose
    live_names = {c.name for c in live.columns}
    renamed = _renamed(mine)
    back = {old: new for old, new in renamed.items() if old not in live_names and new in live_names}
    columns = [_column_args(c, back.get(c.name)) for c in before.columns]
    if tuple(before.columns) != tuple(live.columns):
        edit["columns"] = columns
    access = _access_back(before, live.access, mine, source_guild_id)
    if access is not None:
        edit["access"] = access
    if len(edit) == 3:
        return Refusal(409, "already_reverted", f"table {live.name!r} already reads as it did before this request")
    return edit
