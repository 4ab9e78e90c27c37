"""Collections: ``studio_edit_collection`` (create, edit, delete), ``studio_list_collections`` and
``studio_read_collection``, as rules alone (no broker, no database).

A collection is a table of records that agents read and write: a name, a purpose, a scope, an ordered list of
columns, its records, and an access list.

**The column dialect.** ``columns`` is an ordered list of objects:

- ``name``: ``^[a-z][a-z0-9_]{0,62}$``, unique within the collection;
- ``type``: one of ``text``, ``integer`` (a whole number, at most 18 digits), ``number`` (any JSON number),
  ``boolean``, ``date`` (a text ``YYYY-MM-DD``, month 01-12, day 01-31);
- ``required`` (default false): every record written from now on must carry a value;
- ``unique`` (default false): no two records written from now on may carry the same value;
- ``rename_from`` (an edit only): the current column this one was; its values move to the new name.

A record is a JSON object from column names to values of the column's type; a missing key (or null) is no value.
On an edit, ``columns`` is the complete new list: a current column that no entry names (by ``name`` or
``rename_from``) leaves, and its values are deleted from every record. A column whose type changes is converted
record by record (:func:`convert`): a value that converts is stored converted, and one that does not stays as it
is. Becoming required or unique holds for records written from then on; the card says how many records do not
satisfy it now. Applying renames, removals and retypes changes every record in one transaction.

**Scope and access.** A guild collection belongs to its guild, whose row starts at ``write``; an organisation
collection belongs to the organisation, whose row starts at ``read``. The access list has at most one row per
subject: the organisation's, a guild's, an agent's (``read``, ``write``; an agent's row may also say ``none``).
A request changes only the rows of the session's source guild (``read``, ``write``, or ``none``, which removes the
row) and of its live members (``read``, ``write``, ``none``, or ``inherit``, which removes the agent's own row).
A guild collection of another guild is out of reach, answered as an unknown table; on an organisation collection an
edit keeps the name, the purpose and every current column unchanged and in order, and may add columns and change
access; anything else there, and a delete, is refused with 422.

**Binding.** A request binds a hash of the name, purpose, scope, columns and the source guild's access rows
(:func:`definition_hash`); applying reads the collection again by id and refuses with 409 when it moved. An edit
carries the ``updated_at`` the coach read, and must change something.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints

from assent.contracts import Id, Text
from assent.domain import Agent, Refusal, Session
from assent.hashing import content_hash
from edits_contract.collections import (
    AccessLogged,
    AccessRowOut,
    Collection,
    ColumnOut,
    CreateLogged,
    DeleteLogged,
    RecordOut,
    UpdateLogged,
)

COLUMN_TYPES = ("text", "integer", "number", "boolean", "date")
ColumnType = Literal["text", "integer", "number", "boolean", "date"]
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,62}$"
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Purpose = Annotated[Text, StringConstraints(min_length=1, max_length=2000, strip_whitespace=True)]
Reason = Annotated[Text, StringConstraints(min_length=1, max_length=4000, strip_whitespace=True)]
Ref = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
MAX_COLUMNS = 100
GuildMode = Literal["read", "write", "none"]
AgentMode = Literal["read", "write", "none", "inherit"]
Mode = Literal["read", "write", "none"]

DATE = re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$")
WHOLE = re.compile(r"^-?[0-9]{1,18}$")
DECIMAL = re.compile(r"^-?[0-9]{1,18}(\.[0-9]{1,18})?$")
"""The texts that convert to ``integer`` and ``number``; the same patterns are PostgreSQL's in the adapter."""


# --- arguments -----------------------------------------------------------------------------------------


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Column(_Args):
    """One column of the dialect (see the module's docstring)."""

    name: Name
    type: ColumnType
    required: bool = False
    unique: bool = False
    rename_from: Name | None = None


Columns = Annotated[list[Column], Field(min_length=1, max_length=MAX_COLUMNS)]


class AgentAccess(_Args):
    agent_id: Id
    mode: AgentMode


class AccessChange(_Args):
    """The rows a request changes: the source guild's (``guild``) and its live members' (``agents``)."""

    guild: GuildMode | None = None
    agents: Annotated[list[AgentAccess], Field(max_length=200)] = Field(default_factory=list)


class CreateCollection(_Args):
    """``studio_edit_collection(action: "create", name, purpose, columns, scope?, access?, reason)``."""

    action: Literal["create"]
    name: Name
    purpose: Purpose
    columns: Columns
    scope: Literal["guild", "org"] = "guild"
    access: AccessChange | None = None
    reason: Reason


class EditCollection(_Args):
    """``studio_edit_collection(action: "edit", collection, base_updated_at, name?, purpose?, columns?, access?,
    reason)``: ``collection`` is its id or its name; ``columns``, when given, is the complete new list."""

    action: Literal["edit"]
    collection: Ref
    base_updated_at: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    name: Name | None = None
    purpose: Purpose | None = None
    columns: Columns | None = None
    access: AccessChange | None = None
    reason: Reason


class DeleteCollection(_Args):
    """``studio_edit_collection(action: "delete", collection, reason)``."""

    action: Literal["delete"]
    collection: Ref
    reason: Reason


class CollectionRequest(
    RootModel[Annotated[CreateCollection | EditCollection | DeleteCollection, Field(discriminator="action")]]
):
    """Arguments of ``studio_edit_collection``: one of the three actions, told apart by ``action``."""


class ListCollections(_Args):
    """Arguments of ``studio_list_collections()``."""


class ReadCollection(_Args):
    """Arguments of ``studio_read_collection(collection, offset?, limit?)``: a page of its records."""

    collection: Ref
    offset: Annotated[int, Field(ge=0, le=10_000_000)] = 0
    limit: Annotated[int, Field(ge=1, le=200)] = 50


# --- live state ----------------------------------------------------------------------------------------


class ColumnSpec(BaseModel):
    """A column as a collection holds it (and stores it, and hashes it: :meth:`model_dump`)."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: str
    required: bool = False
    unique: bool = False

    @staticmethod
    def of(data: Mapping[str, Any]) -> ColumnSpec:
        return ColumnSpec(
            name=data["name"], type=data["type"], required=bool(data.get("required")), unique=bool(data.get("unique"))
        )


@dataclass(frozen=True)
class AccessRow:
    """One row of an access list: ``kind`` org, guild or agent; ``subject_id`` the org's, guild's or agent's id."""

    kind: str
    subject_id: str
    mode: str


@dataclass(frozen=True)
class LiveCollection:
    collection_id: str
    org_id: str
    name: str
    purpose: str
    scope: str
    guild_id: str | None
    columns: tuple[ColumnSpec, ...]
    access: tuple[AccessRow, ...]
    version: int
    updated_at: datetime
    records: int = 0


@dataclass(frozen=True)
class Directory:
    """What the card names: guilds and agents of the organisation by id, and the source guild's live members."""

    guild_names: Mapping[str, str]
    agents: Mapping[str, Agent]
    source_guild_id: str

    @property
    def members(self) -> tuple[Agent, ...]:
        return tuple(
            sorted(
                (a for a in self.agents.values() if a.guild_id == self.source_guild_id and a.live),
                key=lambda a: (a.name, a.agent_id),
            )
        )

    def guild(self, guild_id: str) -> str:
        return self.guild_names.get(guild_id, guild_id)

    def agent(self, agent_id: str) -> str:
        agent = self.agents.get(agent_id)
        return agent.name if agent is not None else agent_id


# --- the column dialect --------------------------------------------------------------------------------


def refuse(code: str, message: str, status: int = 422) -> Refusal:
    return Refusal(status, code, message)


def convert(value: Any, to_type: str) -> tuple[bool, Any]:
    """Whether a stored value converts to ``to_type``, and what it becomes (the value itself when it does not).

    text: a text stays, a number becomes its JSON text, a boolean ``true``/``false``; integer: a whole number (at
    most 18 digits) or a text of one; number: a number, or a text ``-12.5``; boolean: a boolean, or the text
    ``true``/``false``; date: a text ``YYYY-MM-DD``. None (no value) converts to None.
    """
    if value is None:
        return True, None
    if to_type == "text":
        if isinstance(value, str):
            return True, value
        if isinstance(value, bool | int | float):
            return True, json.dumps(value)
        return False, value
    if to_type == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return (abs(value) < 10**18, value)
        if isinstance(value, float):
            return (
                (True, int(value))
                if math.isfinite(value) and value.is_integer() and abs(value) < 1e18
                else (False, value)
            )
        if isinstance(value, str) and WHOLE.fullmatch(value):
            return True, int(value)
        return False, value
    if to_type == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return True, value
        if isinstance(value, str) and DECIMAL.fullmatch(value):
            number = float(value)
            return True, int(number) if "." not in value else number
        return False, value
    if to_type == "boolean":
        if isinstance(value, bool):
            return True, value
        if value in ("true", "false"):
            return True, value == "true"
        return False, value
    if to_type == "date":
        return (True, value) if isinstance(value, str) and DATE.fullmatch(value) else (False, value)
    raise ValueError(f"unknown column type {to_type!r}")


def of_type(value: Any, type_: str) -> bool:
    """Whether a value written to a record is of the column's type as it is (a write is not converted)."""
    if type_ == "text":
        return isinstance(value, str)
    if type_ == "integer":
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**18
    if type_ == "number":
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if type_ == "boolean":
        return isinstance(value, bool)
    if type_ == "date":
        return isinstance(value, str) and DATE.fullmatch(value) is not None
    return False


def check_values(columns: Sequence[ColumnSpec], values: Mapping[str, Any], *, whole: bool) -> Refusal | None:
    """A record's values against the columns: each key a column, each value of its type (None: no value); with
    ``whole`` (a new record, or a record after a change) every required column holds a value."""
    by_name = {c.name: c for c in columns}
    for key, value in values.items():
        column = by_name.get(key)
        if column is None:
            return refuse("unknown_column", f"{key!r} is not a column of this collection")
        if value is not None and not of_type(value, column.type):
            return refuse("bad_value", f"{key!r} is a {column.type} column; {json.dumps(value)[:80]} is not one")
    if whole:
        missing = [c.name for c in columns if c.required and values.get(c.name) is None]
        if missing:
            return refuse("missing_value", f"required column(s) {', '.join(missing)} have no value")
    return None


@dataclass(frozen=True)
class ColumnPlan:
    """What a complete new column list does to the current one; names are the current ones unless said."""

    after: tuple[ColumnSpec, ...]
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    """(current name, new name)."""
    retyped: tuple[tuple[str, str, str, str], ...] = ()
    """(current name, new name, current type, new type)."""
    moved: tuple[tuple[str, int, int], ...] = ()
    """(new name, current position, new position), 1-based, for a column kept whose place changes."""
    now_required: tuple[tuple[str | None, str], ...] = ()
    """(current name or None for an added column, new name)."""
    now_unique: tuple[tuple[str | None, str], ...] = ()

    @property
    def changes_records(self) -> bool:
        return bool(self.removed or self.renamed or self.retyped)


def plan_columns(current: Sequence[ColumnSpec], wanted: Sequence[Column], *, edit: bool) -> ColumnPlan | Refusal:
    """Check a complete column list against the dialect and the current columns (none for a create) and say what
    it does: every name once, ``rename_from`` only on an edit and naming a current column no other entry keeps."""
    names = [c.name for c in wanted]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        return refuse("invalid_columns", f"column {duplicate!r} is named twice")
    by_name = {c.name: c for c in current}
    sources: dict[str, str] = {}
    for column in wanted:
        if column.rename_from is None:
            continue
        if not edit:
            return refuse(
                "invalid_columns", f"column {column.name!r}: rename_from is for an edit; a new table has no columns yet"
            )
        if column.rename_from not in by_name:
            return refuse(
                "invalid_columns", f"column {column.name!r}: rename_from {column.rename_from!r} is not a current column"
            )
        if column.rename_from in sources.values():
            return refuse("invalid_columns", f"column {column.rename_from!r} is renamed twice")
        if column.rename_from != column.name and column.rename_from in names:
            return refuse(
                "invalid_columns",
                f"column {column.rename_from!r} is renamed to {column.name!r} and also kept under its own name",
            )
        if column.name in by_name and column.name != column.rename_from:
            return refuse(
                "invalid_columns",
                f"column {column.name!r} is renamed from {column.rename_from!r} while a current column has that name; "
                "rename that one too, or drop it",
            )
        sources[column.name] = column.rename_from
    old_of: dict[str, str | None] = {}
    for column in wanted:
        old_of[column.name] = sources.get(column.name, column.name if column.name in by_name else None)
    kept_old = {old for old in old_of.values() if old is not None}
    removed = tuple(c.name for c in current if c.name not in kept_old)
    before_positions = {c.name: i + 1 for i, c in enumerate(current)}
    kept_order = [old for old in (old_of[c.name] for c in wanted) if old is not None]
    old_order = [c.name for c in current if c.name in kept_old]
    moved: list[tuple[str, int, int]] = []
    if kept_order != old_order:
        for position, column in enumerate(wanted, start=1):
            old = old_of[column.name]
            if old is not None and before_positions[old] != position:
                moved.append((column.name, before_positions[old], position))
    added: list[str] = []
    renamed: list[tuple[str, str]] = []
    retyped: list[tuple[str, str, str, str]] = []
    now_required: list[tuple[str | None, str]] = []
    now_unique: list[tuple[str | None, str]] = []
    for column in wanted:
        old = old_of[column.name]
        was = by_name.get(old) if old is not None else None
        if was is None:
            added.append(column.name)
        else:
            if old != column.name:
                renamed.append((was.name, column.name))
            if was.type != column.type:
                retyped.append((was.name, column.name, was.type, column.type))
        if column.required and (was is None or not was.required):
            now_required.append((old if was is not None else None, column.name))
        if column.unique and (was is None or not was.unique):
            now_unique.append((old if was is not None else None, column.name))
    return ColumnPlan(
        after=tuple(ColumnSpec(name=c.name, type=c.type, required=c.required, unique=c.unique) for c in wanted),
        added=tuple(added),
        removed=removed,
        renamed=tuple(renamed),
        retyped=tuple(retyped),
        moved=tuple(moved),
        now_required=tuple(now_required),
        now_unique=tuple(now_unique),
    )


# --- access --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccessEdit:
    """One row a request changes: ``mode`` None removes it."""

    kind: str
    subject_id: str
    before: str | None
    mode: str | None


def initial_access(scope: str, org_id: str, source_guild_id: str) -> tuple[AccessRow, ...]:
    """A guild collection starts with its guild's row at write; an organisation's with the organisation's at read."""
    if scope == "org":
        return (AccessRow("org", org_id, "read"),)
    return (AccessRow("guild", source_guild_id, "write"),)


def plan_access(
    session: Session, rows: Sequence[AccessRow], change: AccessChange | None, agents: Mapping[str, Agent]
) -> tuple[AccessEdit, ...] | Refusal:
    """The rows ``change`` writes over ``rows``: only the source guild's and its live members'; a row set to what it
    already is is no change."""
    if change is None:
        return ()
    held = {(r.kind, r.subject_id): r.mode for r in rows}
    edits: list[AccessEdit] = []
    if change.guild is not None:
        before = held.get(("guild", session.source_guild_id))
        after: str | None = None if change.guild == "none" else change.guild
        if before != after:
            edits.append(AccessEdit("guild", session.source_guild_id, before, after))
    seen: set[str] = set()
    for item in change.agents:
        if item.agent_id in seen:
            return refuse("invalid_access", f"agent {item.agent_id!r} is named twice in access.agents")
        seen.add(item.agent_id)
        agent = agents.get(item.agent_id)
        if agent is None or agent.org_id != session.org_id:
            return refuse("unknown_agent", f"agent {item.agent_id!r} does not exist in this organisation", 404)
        if agent.guild_id != session.source_guild_id or not agent.live:
            return refuse(
                "agent_out_of_reach",
                f"agent {item.agent_id!r} is not a live member of the session's source guild "
                f"{session.source_guild_id!r}; its row on the access list is shown and never changed",
            )
        before = held.get(("agent", item.agent_id))
        after = None if item.mode == "inherit" else item.mode
        if before != after:
            edits.append(AccessEdit("agent", item.agent_id, before, after))
    return tuple(edits)


def with_access(rows: Iterable[AccessRow], edits: Iterable[AccessEdit]) -> tuple[AccessRow, ...]:
    held = {(r.kind, r.subject_id): r.mode for r in rows}
    for edit in edits:
        if edit.mode is None:
            held.pop((edit.kind, edit.subject_id), None)
        else:
            held[(edit.kind, edit.subject_id)] = edit.mode
    return tuple(AccessRow(kind, subject, mode) for (kind, subject), mode in held.items())


def source_access(rows: Iterable[AccessRow], source_guild_id: str, member_ids: Iterable[str]) -> list[list[str]]:
    """The source guild's row and its live members' rows, in one order: what a request binds of the access list."""
    members = set(member_ids)
    return sorted(
        [r.kind, r.subject_id, r.mode]
        for r in rows
        if (r.kind == "guild" and r.subject_id == source_guild_id) or (r.kind == "agent" and r.subject_id in members)
    )


def definition_hash(
    name: str,
    purpose: str,
    scope: str,
    columns: Iterable[ColumnSpec],
    rows: Iterable[AccessRow],
    source_guild_id: str,
    member_ids: Iterable[str],
) -> str:
    """The hash a request binds: name, purpose, scope, columns, and the source guild's access rows."""
    return content_hash(
        json.dumps(
            {
                "name": name,
                "purpose": purpose,
                "scope": scope,
                "columns": [c.model_dump() for c in columns],
                "access": source_access(rows, source_guild_id, member_ids),
            },
            sort_keys=True,
        )
    )


def live_hash(live: LiveCollection, directory: Directory) -> str:
    return definition_hash(
        live.name,
        live.purpose,
        live.scope,
        live.columns,
        live.access,
        directory.source_guild_id,
        (a.agent_id for a in directory.members),
    )


# --- reach ---------------------------------------------------------------------------------------------


def unknown_table(ref: str) -> Refusal:
    return refuse(
        "unknown_table",
        f"there is no table {ref!r} within reach: the source guild's own tables and the organisation's "
        "(studio_list_collections lists them)",
    )


def check_reach(session: Session, live: LiveCollection | None, ref: str) -> Refusal | None:
    """A collection of another organisation, of another guild, or none at all: the same unknown table (422)."""
    if live is None or live.org_id != session.org_id:
        return unknown_table(ref)
    if live.scope == "guild" and live.guild_id != session.source_guild_id:
        return unknown_table(ref)
    return None


def parse_updated_at(text: str) -> datetime | Refusal:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return refuse(
            "invalid_arguments", f"base_updated_at {text!r} is not an ISO 8601 time; pass the updated_at read"
        )


# --- the card ------------------------------------------------------------------------------------------


def _column_line(column: ColumnSpec) -> str:
    flags = [flag for flag, on in (("required", column.required), ("unique", column.unique)) if on]
    return f"Column {column.name}: {', '.join([column.type, *flags])}"


def _mode(mode: str | None) -> str:
    return "no row" if mode is None else mode


def as_text(
    name: str,
    purpose: str,
    scope: str,
    columns: Sequence[ColumnSpec],
    rows: Sequence[AccessRow],
    directory: Directory,
) -> str:
    """A collection as the card shows it: a header with the owner and the purpose, one line per column, the
    organisation's row when it has one, the source guild's row, one line per member row, and the rows outside."""
    owner = "the organisation" if scope == "org" else f"guild {directory.guild(directory.source_guild_id)}"
    lines = [f"Table {name}, owned by {owner}", f"Purpose: {purpose}"]
    lines += [_column_line(c) for c in columns]
    held = {(r.kind, r.subject_id): r.mode for r in rows}
    org = [r for r in rows if r.kind == "org"]
    if org:
        lines.append(f"Organisation: {org[0].mode}")
    source = directory.source_guild_id
    lines.append(f"Guild {directory.guild(source)}: {_mode(held.get(('guild', source)))}")
    members = {a.agent_id for a in directory.members}
    for agent in directory.members:
        mode = held.get(("agent", agent.agent_id))
        if mode is not None:
            lines.append(f"Member {agent.name}: {mode}")
    for line in outside_rows(rows, directory, members):
        lines.append(f"Outside the guild: {line}")
    return "\n".join(lines) + "\n"


def outside_rows(rows: Iterable[AccessRow], directory: Directory, members: set[str]) -> list[str]:
    """The rows of guilds other than the source guild, and of agents who are not its live members."""
    found = []
    for row in sorted(rows, key=lambda r: (r.kind, r.subject_id)):
        if row.kind == "guild" and row.subject_id != directory.source_guild_id:
            found.append(f"guild {directory.guild(row.subject_id)}: {row.mode}")
        elif row.kind == "agent" and row.subject_id not in members:
            found.append(f"agent {directory.agent(row.subject_id)}: {row.mode}")
    return found


@dataclass(frozen=True)
class RecordCounts:
    """What the records say about a plan, counted by the store: ``present`` values per current column, values that
    do not convert per (current column, new type), records with no value per column (None: an added column), and
    records that share a value with another per current column."""

    total: int = 0
    present: Mapping[str, int] = field(default_factory=dict)
    unconvertible: Mapping[tuple[str, str], int] = field(default_factory=dict)
    missing: Mapping[str, int] = field(default_factory=dict)
    duplicates: Mapping[str, int] = field(default_factory=dict)
    kept: Mapping[tuple[str, str], tuple[Any, ...]] = field(default_factory=dict)
    """Per (current column, new type), a few of the distinct stored values that stay as they are (at most
    :data:`EXAMPLES`)."""


EXAMPLES = 3
"""How many of the values a retype keeps as they are the card names."""


def _verb(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _records(n: int) -> str:
    return f"{n} record{'' if n == 1 else 's'}"


def reach_line(rows: Iterable[AccessRow], directory: Directory) -> str:
    """Who outside the source guild reaches the collection after applying."""
    members = {a.agent_id for a in directory.members}
    rows = list(rows)
    who = []
    org = [r for r in rows if r.kind == "org" and r.mode != "none"]
    if org:
        who.append(f"every agent of the organisation ({org[0].mode})")
    who += [line for line in outside_rows(rows, directory, members) if not line.endswith(": none")]
    if not who:
        return "No one outside the guild reaches it"
    return "Reached outside the guild by: " + "; ".join(who)


def effects(
    action: str,
    name: str,
    plan: ColumnPlan | None,
    counts: RecordCounts,
    rows_after: Sequence[AccessRow],
    directory: Directory,
    *,
    renamed_from: str | None = None,
    task_carriers: Sequence[Agent] = (),
    access_edits: Sequence[AccessEdit] = (),
) -> tuple[str, ...]:
    """The lines of what applying does, from the real records' ``counts``."""
    if action == "delete":
        return (f"Deletes table {name} and its {_records(counts.total)}",)
    lines: list[str] = []
    if action == "create":
        lines.append(f"Creates table {name} with {len(plan.after) if plan else 0} columns and no records")
    if plan is not None and action == "edit":
        for old in plan.removed:
            lines.append(f"Column {old} leaves: its values in {_records(counts.present.get(old, 0))} are deleted")
        for old, new in plan.renamed:
            lines.append(f"Column {old} moves to {new} in {_records(counts.present.get(old, 0))}")
        for new, before, after in plan.moved:
            lines.append(f"Column {new} moves from position {before} to {after} (no record changes)")
        for old, new, was, to in plan.retyped:
            kept = counts.unconvertible.get((old, to), 0)
            converted = counts.present.get(old, 0) - kept
            label = old if old == new else f"{old} (now {new})"
            stays = "1 stored value stays as it is" if kept == 1 else f"{kept} stored values stay as they are"
            named = counts.kept.get((old, to), ())
            if named:
                more = ", …" if kept > len(named) else ""
                stays += ": " + ", ".join(json.dumps(v, ensure_ascii=False) for v in named) + more
            lines.append(
                f"Column {label} becomes {to} (was {was}): {_records(converted)} "
                f"{_verb(converted, 'converts', 'convert')}; {stays}"
            )
        for new in plan.added:
            lines.append(f"Column {new} is added, empty in all {_records(counts.total)}")
    if plan is not None:
        for source, new in plan.now_required:
            missing = counts.total if source is None else counts.missing.get(source, 0)
            lines.append(f"Column {new} becomes required: {_records(missing)} {_verb(missing, 'has', 'have')} no value")
        for source, new in plan.now_unique:
            shared = 0 if source is None else counts.duplicates.get(source, 0)
            shares = _verb(shared, "shares", "share")
            lines.append(f"Column {new} becomes unique: {_records(shared)} {shares} a value with another")
    if renamed_from is not None:
        if task_carriers:
            names = ", ".join(a.name for a in task_carriers)
            lines.append(f"Renamed from {renamed_from}: the Task of {names} still names {renamed_from}")
        else:
            lines.append(f"Renamed from {renamed_from}: no Task names it")
    for edit in access_edits:
        who = f"guild {directory.guild(edit.subject_id)}" if edit.kind == "guild" else directory.agent(edit.subject_id)
        lines.append(f"Access of {who}: {_mode(edit.before)} → {_mode(edit.mode)}")
    lines.append(reach_line(rows_after, directory))
    return tuple(lines)


def names_in_task(task: str, name: str) -> bool:
    """Whether a Task carries a collection's name: the name as a whole word."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", task) is not None


def task_carriers(agents: Iterable[Agent], name: str) -> list[Agent]:
    """The organisation's agents whose Task still names ``name``, by name."""
    return sorted((a for a in agents if names_in_task(a.task, name)), key=lambda a: (a.name, a.agent_id))


# --- reviewing a request -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reviewed:
    """A request that passes the rules: what it binds, what it writes and what its card needs (counts aside)."""

    action: str
    collection_id: str | None
    name: str
    purpose: str
    scope: str
    base_hash: str | None
    base_updated_at: str | None
    proposed_hash: str
    plan: ColumnPlan | None
    access_edits: tuple[AccessEdit, ...]
    rows_before: tuple[AccessRow, ...]
    rows_after: tuple[AccessRow, ...]
    renamed_from: str | None = None


def review_create(
    session: Session, args: CreateCollection, taken: bool, agents: Mapping[str, Agent], directory: Directory
) -> Reviewed | Refusal:
    """A create: a free name, a valid column list, and access rows of the source guild and its live members."""
    if taken:
        return refuse("name_taken", f"a table named {args.name!r} already exists in this organisation")
    plan = plan_columns((), args.columns, edit=False)
    if isinstance(plan, Refusal):
        return plan
    start = initial_access(args.scope, session.org_id, session.source_guild_id)
    edits = plan_access(session, start, args.access, agents)
    if isinstance(edits, Refusal):
        return edits
    after = with_access(start, edits)
    members = [a.agent_id for a in directory.members]
    return Reviewed(
        action="create",
        collection_id=None,
        name=args.name,
        purpose=args.purpose,
        scope=args.scope,
        base_hash=None,
        base_updated_at=None,
        proposed_hash=definition_hash(
            args.name, args.purpose, args.scope, plan.after, after, session.source_guild_id, members
        ),
        plan=plan,
        access_edits=edits,
        rows_before=start,
        rows_after=after,
    )


def review_edit(
    session: Session,
    args: EditCollection,
    live: LiveCollection | None,
    taken: bool,
    agents: Mapping[str, Agent],
    directory: Directory,
) -> Reviewed | Refusal:
    """An edit: within reach, at the updated_at read, changing something; on an organisation collection, only added
    columns and access."""
    refusal = check_reach(session, live, args.collection)
    if refusal is not None:
        return refusal
    assert live is not None
    read = parse_updated_at(args.base_updated_at)
    if isinstance(read, Refusal):
        return read
    if read != live.updated_at:
        return refuse(
            "stale_base_updated_at",
            f"table {live.name!r} changed since it was read: base_updated_at {args.base_updated_at} is not its "
            f"updated_at {live.updated_at.isoformat()}; read it again and propose against it",
            409,
        )
    name = live.name if args.name is None else args.name
    purpose = live.purpose if args.purpose is None else args.purpose
    if args.columns is None:
        plan = ColumnPlan(after=live.columns)
    else:
        planned = plan_columns(live.columns, args.columns, edit=True)
        if isinstance(planned, Refusal):
            return planned
        plan = planned
    if live.scope == "org":
        if name != live.name or purpose != live.purpose:
            return refuse(
                "org_table_fixed",
                f"{live.name!r} is the organisation's table: an edit keeps its name and purpose, and may add columns "
                "and change the source guild's and its members' access",
            )
        if (
            plan.removed
            or plan.renamed
            or plan.retyped
            or plan.moved
            or plan.after[: len(live.columns)] != live.columns
        ):
            return refuse(
                "org_table_fixed",
                f"{live.name!r} is the organisation's table: an edit keeps every current column unchanged and in its "
                "order, and may add columns after them",
            )
    if name != live.name and taken:
        return refuse("name_taken", f"a table named {name!r} already exists in this organisation")
    edits = plan_access(session, live.access, args.access, agents)
    if isinstance(edits, Refusal):
        return edits
    after = with_access(live.access, edits)
    if name == live.name and purpose == live.purpose and plan.after == live.columns and not edits:
        return refuse("no_change", f"the request changes nothing in table {live.name!r}")
    members = [a.agent_id for a in directory.members]
    return Reviewed(
        action="edit",
        collection_id=live.collection_id,
        name=name,
        purpose=purpose,
        scope=live.scope,
        base_hash=live_hash(live, directory),
        base_updated_at=live.updated_at.isoformat(),
        proposed_hash=definition_hash(name, purpose, live.scope, plan.after, after, session.source_guild_id, members),
        plan=plan,
        access_edits=edits,
        rows_before=live.access,
        rows_after=after,
        renamed_from=live.name if name != live.name else None,
    )


def review_delete(
    session: Session, args: DeleteCollection, live: LiveCollection | None, directory: Directory
) -> Reviewed | Refusal:
    """A delete: one of the source guild's own tables (an organisation's is refused)."""
    refusal = check_reach(session, live, args.collection)
    if refusal is not None:
        return refusal
    assert live is not None
    if live.scope == "org":
        return refuse(
            "org_table_fixed", f"{live.name!r} is the organisation's table; Studio deletes only the source guild's own"
        )
    return Reviewed(
        action="delete",
        collection_id=live.collection_id,
        name=live.name,
        purpose=live.purpose,
        scope=live.scope,
        base_hash=live_hash(live, directory),
        base_updated_at=live.updated_at.isoformat(),
        proposed_hash="",
        plan=None,
        access_edits=(),
        rows_before=live.access,
        rows_after=(),
    )


# --- views ---------------------------------------------------------------------------------------------


def column_out(column: ColumnSpec) -> ColumnOut:
    return ColumnOut(name=column.name, type=column.type, required=column.required, unique=column.unique)


def collection_view(live: LiveCollection) -> Collection:
    """A collection as the workspace API shows it (without records)."""
    return Collection(
        collection_id=live.collection_id,
        name=live.name,
        purpose=live.purpose,
        scope=live.scope,
        guild_id=live.guild_id,
        columns=[column_out(c) for c in live.columns],
        access=[AccessRowOut(kind=r.kind, subject_id=r.subject_id, mode=r.mode) for r in live.access],
        version=live.version,
        updated_at=live.updated_at.isoformat(),
        records=live.records,
    )


class ListedCollection(Collection):
    """A collection as ``studio_list_collections`` lists it: with the hash a request binds."""

    hash: str


class RecordsPage(BaseModel):
    """A page of a collection's records, in record order, and how many it holds in all."""

    model_config = ConfigDict(frozen=True)

    offset: int
    limit: int
    total: int
    records: list[RecordOut]


class ReadCollectionAnswer(ListedCollection):
    """``studio_read_collection``'s answer: the collection as text, and a page of its records."""

    text: str
    page: RecordsPage


class CollectionList(BaseModel):
    """``studio_list_collections``'s answer."""

    model_config = ConfigDict(frozen=True)

    collections: list[ListedCollection]


def listed(live: LiveCollection, directory: Directory) -> ListedCollection:
    return ListedCollection(**collection_view(live).model_dump(), hash=live_hash(live, directory))


# --- the change log ------------------------------------------------------------------------------------

Logged = CreateLogged | UpdateLogged | DeleteLogged | AccessLogged
"""What the change log says of one change (its ``detail``)."""


def created(
    name: str, purpose: str, scope: str, columns: Iterable[ColumnSpec], rows: Iterable[AccessRow]
) -> CreateLogged:
    return CreateLogged(
        name=name,
        purpose=purpose,
        scope=scope,
        columns=[column_out(c) for c in columns],
        access=[(r.kind, r.subject_id, r.mode) for r in rows],
    )


def updated(
    live: LiveCollection,
    name: str,
    purpose: str,
    columns: Iterable[ColumnSpec],
    plan: ColumnPlan | None,
    records_changed: int,
) -> UpdateLogged:
    """The entry of a change of ``live`` to ``name``, ``purpose`` and ``columns`` (by ``plan``, when the columns
    changed)."""
    return UpdateLogged(
        name=name,
        renamed_from=live.name if name != live.name else None,
        purpose=purpose,
        columns=[column_out(c) for c in columns],
        removed=list(plan.removed) if plan else [],
        renamed=list(plan.renamed) if plan else [],
        retyped=[(old, new, to) for old, new, _, to in plan.retyped] if plan else [],
        records_changed=records_changed,
    )
