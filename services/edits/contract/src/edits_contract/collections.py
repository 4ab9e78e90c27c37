"""Collections on the public API, owned by the workspace owner (edits): create, read, change and delete a collection
directly, add and change its records, set its access rows, and read its change log.

These are the operator's own changes (not proposals): the kind of change a pending ``studio_edit_collection``
request must never overwrite. The column dialect is the one ``services/edits/src/edits/domain/collections.py``
documents (``name``, ``type``, ``required``, ``unique``, ``rename_from``); a change of the columns changes the
records as applying a request would, in one transaction. Reading needs any role of the organisation; writing, the
admin or developer role. Another organisation's collection answers 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from assent.api.declare import KeysMatch, PublicRoute, QueryModel, RequestModel
from assent.api.roles import Permission
from assent.http import Identifier, NoNul, Omissible
from assent.kinds import WORKSPACE_OWNER

from .workspace import Answer, Instant

OWNER = WORKSPACE_OWNER
TAG = "collections"
NAME = r"^[a-z][a-z0-9_]{0,62}$"
"""A collection's or a column's name."""

Name = Annotated[str, StringConstraints(pattern=NAME)]
Purpose = Annotated[str, StringConstraints(min_length=1, max_length=2000), NoNul]
ColumnType = Literal["text", "integer", "number", "boolean", "date"]
Scalar = Annotated[str, NoNul, StringConstraints(max_length=10_000)] | int | float | bool | None
Values = Annotated[dict[Name, Scalar], Field(max_length=100), KeysMatch(NAME, max_length=63)]


class ColumnIn(RequestModel):
    """A column: ``type`` text, integer (whole, up to 18 digits), number, boolean or date (``YYYY-MM-DD``);
    ``required`` and ``unique`` hold for records written from then on; ``rename_from`` (a change only) names the
    current column it was."""

    name: Name
    type: ColumnType
    required: bool = False
    unique: bool = False
    rename_from: Omissible[Name] = None


Columns = Annotated[list[ColumnIn], Field(min_length=1, max_length=100)]


class CollectionIn(RequestModel):
    """A new collection: ``scope`` guild (``guild_id`` owns it, its row at write) or org (the organisation's row at
    read)."""

    name: Name
    purpose: Purpose
    scope: Literal["guild", "org"]
    guild_id: Omissible[Identifier] = None
    columns: Columns


class CollectionPatch(RequestModel):
    """Change a collection: a field left out is kept; ``columns`` is the complete new list; ``expected_updated_at``:
    409 unless the collection is at it."""

    name: Omissible[Name] = None
    purpose: Omissible[Purpose] = None
    columns: Omissible[Columns] = None
    expected_updated_at: Omissible[Annotated[datetime, Field(strict=False)]] = None


class RecordsIn(RequestModel):
    """Records to add, each a map of column name to value."""

    records: Annotated[list[Values], Field(min_length=1, max_length=1000)]


class RecordPatch(RequestModel):
    """One record's values to change (null: no value any more); the others are kept."""

    record_id: Annotated[int, Field(ge=1, le=9_223_372_036_854_775_807)]
    values: Values


class AccessIn(RequestModel):
    """Set one access row: the organisation's (``subject_id`` left out), a guild's or an agent's; ``remove`` deletes
    the row. ``none`` is an agent's only."""

    kind: Literal["org", "guild", "agent"]
    subject_id: Omissible[Identifier] = None
    mode: Literal["read", "write", "none", "remove"]


class Page(QueryModel):
    offset: Annotated[int, Field(ge=0, le=10_000_000)] = 0
    limit: Annotated[int, Field(ge=1, le=500)] = 50


class ColumnOut(Answer):
    name: str
    type: str
    required: bool
    unique: bool


class AccessRowOut(Answer):
    kind: str
    subject_id: str
    mode: str


class Collection(Answer):
    collection_id: str
    name: str
    purpose: str
    scope: str
    guild_id: str | None
    columns: list[ColumnOut]
    access: list[AccessRowOut]
    version: int
    updated_at: str
    records: int
    """How many records it holds."""


class RecordOut(Answer):
    record_id: int
    values: dict[str, Any]


class CollectionPage(Collection):
    offset: int
    limit: int
    page: list[RecordOut]


class CollectionDeleted(Answer):
    collection_id: str
    deleted: bool
    records: int


class RecordsAdded(Answer):
    record_ids: list[int]


class CreateLogged(Answer):
    """What the change log says of a create: the collection as made, its access rows as ``[kind, subject_id,
    mode]``."""

    name: str
    purpose: str
    scope: str
    columns: list[ColumnOut]
    access: list[tuple[str, str, str]]


class UpdateLogged(Answer):
    """What the change log says of a change: the name (and the one it had, if it changed), purpose and columns after
    it, and what it did to the records (``renamed``: ``[old, new]``; ``retyped``: ``[old, new, new type]``)."""

    name: str
    renamed_from: str | None
    purpose: str
    columns: list[ColumnOut]
    removed: list[str]
    renamed: list[tuple[str, str]]
    retyped: list[tuple[str, str, str]]
    records_changed: int


class DeleteLogged(Answer):
    """What the change log says of a delete: the name the collection had, and how many records went with it."""

    name: str
    records: int


class AccessLogged(Answer):
    """What the change log says of one access row written: its mode (null: removed)."""

    mode: str | None


class CollectionChange(Answer):
    change: str
    """create, update, delete, or access (one row written; ``mode`` null: removed)."""
    kind: str | None
    subject_id: str | None
    mode: str | None
    detail: CreateLogged | UpdateLogged | DeleteLogged | AccessLogged
    """What the change did, as its ``change`` says."""
    actor_user_id: str
    tool_call_id: str | None
    tool_name: str | None
    studio_session_id: str | None
    studio_seq: int | None
    created_at: Instant


ORG_404 = {404: "No such org, or another organisation's"}
COLLECTION_404 = {404: "No such org (or another organisation's), or no such collection in it"}
RULES = (
    "columns outside the dialect (a name twice, rename_from of no current column), a value not of its column's type, "
    "an unknown column, a required column left without a value, an agent's row on an agent of no guild of the org"
)


def _route(method: Any, path: str, name: str, summary: str, permission: Permission, **more: Any) -> PublicRoute:
    return PublicRoute(OWNER, method, path, name, summary, permission, TAG, **more)


AT = "/orgs/{org_id}/collections/{collection_id}"

ROUTES: tuple[PublicRoute, ...] = (
    _route(
        "GET",
        "/orgs/{org_id}/collections",
        "list_collections",
        "Every collection of the organisation, with its columns, access list, updated_at and record count",
        Permission.READ,
        response=list[Collection],
        errors=ORG_404,
    ),
    _route(
        "POST",
        "/orgs/{org_id}/collections",
        "create_collection",
        "Create a collection directly, as the operator (not a proposal)",
        Permission.CHANGE_WORKSPACE,
        body=CollectionIn,
        response=Collection,
        status=201,
        errors={404: "No such org (or another organisation's), or no such guild in it", 409: "The name is taken"},
        rules=RULES,
    ),
    _route(
        "GET",
        AT,
        "read_collection",
        "A collection with a page of its records, in record order",
        Permission.READ,
        query=Page,
        response=CollectionPage,
        errors=COLLECTION_404,
    ),
    _route(
        "PATCH",
        AT,
        "update_collection",
        "Change a collection's name, purpose or columns directly; renamed, removed and retyped columns change the "
        "records in one transaction",
        Permission.CHANGE_WORKSPACE,
        body=CollectionPatch,
        response=Collection,
        errors={**COLLECTION_404, 409: "Not at expected_updated_at, or the name is taken"},
        rules=RULES,
    ),
    _route(
        "DELETE",
        AT,
        "delete_collection",
        "Delete a collection with its records and access list",
        Permission.CHANGE_WORKSPACE,
        response=CollectionDeleted,
        errors=COLLECTION_404,
    ),
    _route(
        "POST",
        AT + "/records",
        "add_collection_records",
        "Add records (up to 1000 at once)",
        Permission.CHANGE_WORKSPACE,
        body=RecordsIn,
        response=RecordsAdded,
        status=201,
        errors={**COLLECTION_404, 409: "A unique column's value is held by another record"},
        rules=RULES,
    ),
    _route(
        "PATCH",
        AT + "/records",
        "update_collection_record",
        "Change some values of one record",
        Permission.CHANGE_WORKSPACE,
        body=RecordPatch,
        response=RecordOut,
        errors={404: "No such org, collection or record", 409: "A unique column's value is held by another record"},
        rules=RULES,
    ),
    _route(
        "PUT",
        AT + "/access",
        "set_collection_access",
        "Set or remove one row of a collection's access list",
        Permission.CHANGE_WORKSPACE,
        body=AccessIn,
        response=Collection,
        errors={404: "No such org, collection, guild or agent in the organisation"},
        rules=RULES,
    ),
    _route(
        "GET",
        AT + "/changes",
        "collection_changes",
        "Every change of a collection, oldest first, with the request behind each (studio_session_id, studio_seq)",
        Permission.READ,
        response=list[CollectionChange],
        errors=ORG_404,
    ),
)
"""The collection routes of the workspace owner."""
