"""Direct collection writes by people (not proposals): create, read, change and delete collections, add and change
their records, set their access rows, and read their change log.

These are the operator's (or a test's) own changes, the kind of change a pending request must never overwrite. The
rules are those of an applied request (:mod:`edits.domain.collections`): the column dialect, a name unique in the
organisation, and a change of columns that changes the records in the same transaction. Records written here must fit
the columns as they are: each key a column, each value of its type, every required column filled, a unique column's
value held by no other record.

Organisations are walls: every function takes ``caller_org`` (``None`` for a service's own call). Another
organisation's org is answered as one that does not exist (404), before anything is read, and a collection of
another organisation as one that does not exist.

Each write is recorded for the organisation's history (:func:`assent.runtime.writes.record_write`) without hashes:
the hash a request binds is of the collection as its session's guild sees it (:func:`rules.live_hash`), and a
direct write has no session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assent.domain import Refusal
from assent.runtime.uow import SqlUnitOfWork
from assent.runtime.walls import NotFound, org_in
from assent.runtime.writes import record_write
from edits_contract.collections import (
    AccessLogged,
    Collection,
    CollectionChange,
    CollectionDeleted,
    CollectionPage,
    CollectionPatch,
    ColumnIn,
    DeleteLogged,
    RecordOut,
    RecordsAdded,
)

from .adapters.collections import CollectionsRepository
from .domain import collections as rules
from .domain.collections import ColumnSpec, LiveCollection, collection_view
from .domain.model import WriteOrigin
from .workspace import Conflict, Refused


def _raise(refusal: Refusal | None) -> None:
    if refusal is None:
        return
    if refusal.status == 404:
        raise NotFound(refusal.message)
    if refusal.status == 409:
        raise Conflict(refusal.message)
    raise Refused(refusal.message, refusal.code)


async def _org(uow: SqlUnitOfWork, org_id: str, caller_org: str | None) -> None:
    await org_in(uow, org_id, caller_org)


async def _collection(
    uow: SqlUnitOfWork, org_id: str, collection_id: str, caller_org: str | None, *, for_update: bool = False
) -> LiveCollection:
    await _org(uow, org_id, caller_org)
    live = await CollectionsRepository(uow.conn).get(collection_id, for_update=for_update)
    if live is None or live.org_id != org_id:
        raise NotFound(f"there is no collection {collection_id!r} in org {org_id!r}")
    return live


def _columns(columns: Sequence[ColumnIn]) -> list[rules.Column]:
    return [rules.Column.model_validate(c.model_dump(exclude_none=True)) for c in columns]


async def _record(
    uow: SqlUnitOfWork, route: str, live: LiveCollection, action: str, actor: str, detail: str | None = None
) -> None:
    await record_write(
        uow,
        route,
        org_id=live.org_id,
        guild_id=live.guild_id if live.scope == "guild" else None,
        kind="collection",
        action=action,
        target=f"Table {live.name}",
        actor=actor,
        detail=detail,
    )


async def list_collections(uow: SqlUnitOfWork, org_id: str, *, caller_org: str | None = None) -> list[Collection]:
    await _org(uow, org_id, caller_org)
    return [collection_view(live) for live in await CollectionsRepository(uow.conn).of_org(org_id)]


async def create_collection(
    uow: SqlUnitOfWork,
    org_id: str,
    name: str,
    purpose: str,
    scope: str,
    guild_id: str | None,
    columns: Sequence[ColumnIn],
    actor: str,
    *,
    caller_org: str | None = None,
) -> Collection:
    await _org(uow, org_id, caller_org)
    if scope == "guild":
        if guild_id is None:
            raise Refused("a guild collection needs guild_id, the guild that owns it", "invalid_arguments")
        guild = await uow.workspace.guild(guild_id)
        if guild is None or guild.org_id != org_id:
            raise NotFound(f"guild {guild_id!r} does not exist in org {org_id!r}")
    elif guild_id is not None:
        raise Refused("an organisation collection takes no guild_id", "invalid_arguments")
    plan = rules.plan_columns((), _columns(columns), edit=False)
    if isinstance(plan, Refusal):
        _raise(plan)
        raise AssertionError("unreachable")
    start = rules.initial_access(scope, org_id, guild_id or "")
    store = CollectionsRepository(uow.conn)
    collection_id = await store.create(org_id, name, purpose, scope, guild_id, plan.after, start, actor=actor)
    if collection_id is None:
        raise Conflict(f"a collection named {name!r} already exists in org {org_id!r}")
    detail = rules.created(name, purpose, scope, plan.after, start)
    await store.log(collection_id, org_id, "create", detail, origin=WriteOrigin(actor))
    live = await store.get(collection_id)
    assert live is not None
    await _record(uow, "create_collection", live, "create", actor, _counted(len(live.columns), "column"))
    return collection_view(live)


async def read_collection(
    uow: SqlUnitOfWork, org_id: str, collection_id: str, offset: int, limit: int, *, caller_org: str | None = None
) -> CollectionPage:
    live = await _collection(uow, org_id, collection_id, caller_org)
    page = await CollectionsRepository(uow.conn).records(collection_id, offset, limit)
    return CollectionPage(**collection_view(live).model_dump(), offset=offset, limit=limit, page=page)


async def update_collection(
    uow: SqlUnitOfWork,
    org_id: str,
    collection_id: str,
    patch: CollectionPatch,
    actor: str,
    *,
    caller_org: str | None = None,
) -> Collection:
    """Change name, purpose or columns (the complete list); with ``expected_updated_at``, 409 unless at it."""
    live = await _collection(uow, org_id, collection_id, caller_org, for_update=True)
    expected = patch.expected_updated_at
    if expected is not None and expected != live.updated_at:
        raise Conflict(
            f"collection {live.name!r} is at updated_at {live.updated_at.isoformat()}, not {expected.isoformat()}"
        )
    store = CollectionsRepository(uow.conn)
    name, purpose = patch.name or live.name, patch.purpose or live.purpose
    if name != live.name and await store.name_taken(org_id, name, other_than=collection_id):
        raise Conflict(f"a collection named {name!r} already exists in org {org_id!r}")
    plan = None
    if patch.columns is not None:
        planned = rules.plan_columns(live.columns, _columns(patch.columns), edit=True)
        if isinstance(planned, Refusal):
            _raise(planned)
            raise AssertionError("unreachable")
        plan = planned
    columns: tuple[ColumnSpec, ...] = live.columns if plan is None else plan.after
    changes = (name, purpose, columns) != (live.name, live.purpose, live.columns)
    if changes:
        await store.update(collection_id, name, purpose, columns, actor=actor)
        changed = 0 if plan is None else await store.transform(collection_id, plan, actor=actor)
        detail = rules.updated(live, name, purpose, columns, plan, changed)
        await store.log(collection_id, org_id, "update", detail, origin=WriteOrigin(actor))
    after = await store.get(collection_id)
    assert after is not None
    if changes:
        fields = [f for f, was, now in (("name", live.name, name), ("purpose", live.purpose, purpose)) if was != now]
        fields += ["columns"] if columns != live.columns else []
        await _record(uow, "update_collection", after, "edit", actor, ", ".join(fields))
    return collection_view(after)


async def delete_collection(
    uow: SqlUnitOfWork, org_id: str, collection_id: str, actor: str, *, caller_org: str | None = None
) -> CollectionDeleted:
    live = await _collection(uow, org_id, collection_id, caller_org, for_update=True)
    store = CollectionsRepository(uow.conn)
    gone = await store.delete(collection_id)
    await store.log(
        collection_id, org_id, "delete", DeleteLogged(name=live.name, records=gone), origin=WriteOrigin(actor)
    )
    await _record(uow, "delete_collection", live, "delete", actor, _counted(gone, "record"))
    return CollectionDeleted(collection_id=collection_id, deleted=True, records=gone)


async def _check_unique(
    store: CollectionsRepository,
    live: LiveCollection,
    records: Sequence[Mapping[str, Any]],
    *,
    except_record: int | None = None,
) -> None:
    for column in live.columns:
        if not column.unique:
            continue
        values = [r[column.name] for r in records if r.get(column.name) is not None]
        seen: list[Any] = []
        for value in values:
            if value in seen:
                raise Conflict(f"column {column.name!r} is unique; {value!r} is given twice")
            seen.append(value)
        taken = await store.taken_values(live.collection_id, column.name, values, except_record=except_record)
        if taken:
            raise Conflict(f"column {column.name!r} is unique; another record holds {taken[0]!r}")


async def add_records(
    uow: SqlUnitOfWork,
    org_id: str,
    collection_id: str,
    records: Sequence[Mapping[str, Any]],
    actor: str,
    *,
    caller_org: str | None = None,
) -> RecordsAdded:
    live = await _collection(uow, org_id, collection_id, caller_org, for_update=True)
    cleaned = []
    for i, record in enumerate(records):
        refusal = rules.check_values(live.columns, record, whole=True)
        if refusal is not None:
            raise Refused(f"record {i}: {refusal.message}", refusal.code)
        cleaned.append({k: v for k, v in record.items() if v is not None})
    store = CollectionsRepository(uow.conn)
    await _check_unique(store, live, cleaned)
    added = await store.add_records(collection_id, cleaned, actor=actor)
    if added:
        await _record(uow, "add_collection_records", live, "add_records", actor, f"records {_ids(added)}")
    return RecordsAdded(record_ids=added)


async def update_record(
    uow: SqlUnitOfWork,
    org_id: str,
    collection_id: str,
    record_id: int,
    values: Mapping[str, Any],
    actor: str,
    *,
    caller_org: str | None = None,
) -> RecordOut:
    live = await _collection(uow, org_id, collection_id, caller_org, for_update=True)
    store = CollectionsRepository(uow.conn)
    held = await store.record(collection_id, record_id, for_update=True)
    if held is None:
        raise NotFound(f"there is no record {record_id} in collection {collection_id!r}")
    _raise(rules.check_values(live.columns, values, whole=False))
    merged = {k: v for k, v in {**held, **values}.items() if v is not None}
    missing = [c.name for c in live.columns if c.required and merged.get(c.name) is None]
    if missing:
        raise Refused(f"required column(s) {', '.join(missing)} would have no value", "missing_value")
    await _check_unique(store, live, [{k: v for k, v in values.items() if v is not None}], except_record=record_id)
    await store.replace_record(collection_id, record_id, merged, actor=actor)
    await _record(uow, "update_collection_record", live, "edit_record", actor, f"record {record_id}")
    return RecordOut(record_id=record_id, values=merged)


async def set_access(
    uow: SqlUnitOfWork,
    org_id: str,
    collection_id: str,
    kind: str,
    subject_id: str | None,
    mode: str,
    actor: str,
    *,
    caller_org: str | None = None,
) -> Collection:
    """Set one row (``remove``: delete it): the organisation's, a guild's of the org, or an agent's of the org."""
    live = await _collection(uow, org_id, collection_id, caller_org, for_update=True)
    if kind == "org":
        if subject_id not in (None, org_id):
            raise Refused("the organisation's row takes no subject_id (or the org's own id)", "invalid_arguments")
        subject_id = org_id
    elif subject_id is None:
        raise Refused(f"a {kind}'s row needs subject_id", "invalid_arguments")
    elif kind == "guild":
        guild = await uow.workspace.guild(subject_id)
        if guild is None or guild.org_id != org_id:
            raise NotFound(f"guild {subject_id!r} does not exist in org {org_id!r}")
    else:
        agent = await uow.workspace.agent(subject_id)
        if agent is None or agent.org_id != org_id:
            raise NotFound(f"agent {subject_id!r} does not exist in org {org_id!r}")
    if mode == "none" and kind != "agent":
        raise Refused("none is an agent's row only; remove the row instead", "invalid_access")
    written = None if mode == "remove" else mode
    store = CollectionsRepository(uow.conn)
    await store.set_access(live.collection_id, kind, subject_id, written)
    await store.log(
        live.collection_id,
        org_id,
        "access",
        AccessLogged(mode=written),
        origin=WriteOrigin(actor),
        kind=kind,
        subject_id=subject_id,
        mode=written,
    )
    after = await store.get(live.collection_id)
    assert after is not None
    await _record(uow, "set_collection_access", after, "set_access", actor, f"{kind} {subject_id}: {mode}")
    return collection_view(after)


def _counted(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def _ids(record_ids: Sequence[int]) -> str:
    """Record ids as a short text: ``4``, ``4, 5``, ``4 to 9``."""
    if len(record_ids) > 2 and list(record_ids) == list(range(record_ids[0], record_ids[0] + len(record_ids))):
        return f"{record_ids[0]} to {record_ids[-1]}"
    return ", ".join(str(i) for i in record_ids)


async def collection_changes(
    uow: SqlUnitOfWork, org_id: str, collection_id: str, *, caller_org: str | None = None
) -> list[CollectionChange]:
    """The change log, also of a collection deleted since (its last entry says so)."""
    await _org(uow, org_id, caller_org)
    return await CollectionsRepository(uow.conn).changes(org_id, collection_id)
