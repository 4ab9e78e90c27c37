"""Queries over collections: their definitions, records, access lists and change log.

Records are JSONB objects, one row each. What a column plan does to them (a removal, a rename, a retype) is one
``UPDATE`` over the collection's rows, set-wise in PostgreSQL, and what the card counts is one aggregate query: no
record crosses into Python, so a collection of any size changes in the caller's one transaction. The conversions
are those of :func:`edits.domain.collections.convert`, written in SQL (:func:`converts_sql`, :func:`converted_sql`);
the integration tests compare the two on the same values. A repository works inside the caller's transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import ARRAY, Text, bindparam, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from edits_contract.collections import CollectionChange, RecordOut

from ..domain.collections import (
    DATE,
    DECIMAL,
    EXAMPLES,
    WHOLE,
    AccessRow,
    ColumnPlan,
    ColumnSpec,
    LiveCollection,
    Logged,
    RecordCounts,
)
from ..domain.model import WriteOrigin
from . import tables as t

RECORDS = f"{t.SCHEMA}.collection_records"
PAIRS_PER_CALL = 40
"""``jsonb_build_object`` takes at most 100 arguments: the moved values are built 40 pairs at a time."""


def present_sql(v: str) -> str:
    """A value is there: the key is present and not JSON null."""
    return f"({v} IS NOT NULL AND {v} <> 'null'::jsonb)"


def converts_sql(v: str, to_type: str) -> str:
    """SQL: whether the JSONB value ``v`` converts to ``to_type`` (the rules of ``convert``)."""
    n = f"({v} #>> '{{}}')"
    if to_type == "text":
        return f"(jsonb_typeof({v}) IN ('string', 'number', 'boolean'))"
    if to_type == "integer":
        return (
            f"(CASE jsonb_typeof({v}) WHEN 'number' THEN ({n}::numeric = trunc({n}::numeric) AND "
            f"abs({n}::numeric) < 1e18) WHEN 'string' THEN {n} ~ :re_whole ELSE false END)"
        )
    if to_type == "number":
        return f"(CASE jsonb_typeof({v}) WHEN 'number' THEN true WHEN 'string' THEN {n} ~ :re_decimal ELSE false END)"
    if to_type == "boolean":
        return (
            f"(CASE jsonb_typeof({v}) WHEN 'boolean' THEN true WHEN 'string' THEN {n} IN ('true', 'false') "
            "ELSE false END)"
        )
    if to_type == "date":
        return f"(CASE jsonb_typeof({v}) WHEN 'string' THEN {n} ~ :re_date ELSE false END)"
    raise ValueError(f"unknown column type {to_type!r}")


def converted_sql(v: str, to_type: str) -> str:
    """SQL: the JSONB value ``v`` converted to ``to_type`` when it converts, else as it is."""
    n = f"({v} #>> '{{}}')"
    if to_type == "text":
        to = f"(CASE jsonb_typeof({v}) WHEN 'string' THEN {v} ELSE to_jsonb({n}) END)"
    elif to_type == "integer":
        to = (
            f"(CASE jsonb_typeof({v}) WHEN 'number' THEN to_jsonb({n}::numeric::bigint) ELSE to_jsonb({n}::bigint) END)"
        )
    elif to_type == "number":
        to = f"(CASE jsonb_typeof({v}) WHEN 'number' THEN {v} ELSE to_jsonb({n}::numeric) END)"
    elif to_type == "boolean":
        to = f"(CASE jsonb_typeof({v}) WHEN 'boolean' THEN {v} ELSE to_jsonb({n}::boolean) END)"
    else:
        to = v
    return f"(CASE WHEN {converts_sql(v, to_type)} THEN {to} ELSE {v} END)"


PATTERNS = {"re_whole": WHOLE.pattern, "re_decimal": DECIMAL.pattern, "re_date": DATE.pattern}


def _live(row: Any, access: Sequence[AccessRow], records: int) -> LiveCollection:
    return LiveCollection(
        collection_id=row.collection_id,
        org_id=row.org_id,
        name=row.name,
        purpose=row.purpose,
        scope=row.scope,
        guild_id=row.guild_id,
        columns=tuple(ColumnSpec.of(c) for c in row.columns),
        access=tuple(access),
        version=row.version,
        updated_at=row.updated_at,
        records=records,
    )


class CollectionsRepository:
    """Collections by id and by name in their organisation, their records and access, and every change's log."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    # --- reading --------------------------------------------------------------------------------------

    async def _access(self, collection_ids: Sequence[str]) -> dict[str, list[AccessRow]]:
        a = t.collection_access
        rows = await self.conn.execute(
            select(a).where(a.c.collection_id.in_(collection_ids)).order_by(a.c.kind, a.c.subject_id)
        )
        found: dict[str, list[AccessRow]] = {i: [] for i in collection_ids}
        for row in rows:
            found[row.collection_id].append(AccessRow(row.kind, row.subject_id, row.mode))
        return found

    async def _counts(self, collection_ids: Sequence[str]) -> dict[str, int]:
        r = t.collection_records
        rows = await self.conn.execute(
            select(r.c.collection_id, func.count())
            .where(r.c.collection_id.in_(collection_ids))
            .group_by(r.c.collection_id)
        )
        return {row[0]: int(row[1]) for row in rows}

    async def _many(self, query: Any) -> list[LiveCollection]:
        rows = list(await self.conn.execute(query))
        ids = [row.collection_id for row in rows]
        access, counts = await self._access(ids), await self._counts(ids)
        return [_live(row, access[row.collection_id], counts.get(row.collection_id, 0)) for row in rows]

    async def get(self, collection_id: str, *, for_update: bool = False) -> LiveCollection | None:
        query = select(t.collections).where(t.collections.c.collection_id == collection_id)
        found = await self._many(query.with_for_update() if for_update else query)
        return found[0] if found else None

    async def by_ref(self, org_id: str, ref: str, *, for_update: bool = False) -> LiveCollection | None:
        """The organisation's collection whose id, or else whose name, is ``ref``."""
        c = t.collections
        for where in (c.c.collection_id == ref, c.c.name == ref):
            query = select(c).where(c.c.org_id == org_id, where)
            found = await self._many(query.with_for_update() if for_update else query)
            if found:
                return found[0]
        return None

    async def of_org(self, org_id: str) -> list[LiveCollection]:
        c = t.collections
        return await self._many(select(c).where(c.c.org_id == org_id).order_by(c.c.name))

    async def name_taken(self, org_id: str, name: str, *, other_than: str | None = None) -> bool:
        c = t.collections
        query = select(c.c.collection_id).where(c.c.org_id == org_id, c.c.name == name)
        if other_than is not None:
            query = query.where(c.c.collection_id != other_than)
        return (await self.conn.execute(query)).first() is not None

    async def records(self, collection_id: str, offset: int, limit: int) -> list[RecordOut]:
        r = t.collection_records
        rows = await self.conn.execute(
            select(r.c.record_id, r.c.data)
            .where(r.c.collection_id == collection_id)
            .order_by(r.c.record_id)
            .offset(offset)
            .limit(limit)
        )
        return [RecordOut(record_id=row.record_id, values=row.data) for row in rows]

    async def record(self, collection_id: str, record_id: int, *, for_update: bool = False) -> dict[str, Any] | None:
        r = t.collection_records
        query = select(r.c.data).where(r.c.collection_id == collection_id, r.c.record_id == record_id)
        row = (await self.conn.execute(query.with_for_update() if for_update else query)).first()
        return None if row is None else dict(row.data)

    async def counts(self, collection_id: str, plan: ColumnPlan | None) -> RecordCounts:
        """What the card says of ``plan`` in numbers, from the records now (one aggregate query, and one more per
        column that becomes unique)."""
        params: dict[str, Any] = {"cid": collection_id, **PATTERNS}
        parts = ["count(*) AS total"]
        present: dict[str, str] = {}
        unconvertible: dict[tuple[str, str], str] = {}
        missing: dict[str, str] = {}
        if plan is not None:
            wanted_present = [*plan.removed, *(old for old, _ in plan.renamed), *(old for old, *_ in plan.retyped)]
            for i, old in enumerate(dict.fromkeys(wanted_present)):
                params[f"p{i}"] = old
                parts.append(f"count(*) FILTER (WHERE {present_sql(f'(data -> :p{i})')}) AS p{i}")
                present[old] = f"p{i}"
            for i, (old, _, _, to) in enumerate(plan.retyped):
                params[f"u{i}"] = old
                v = f"(data -> :u{i})"
                parts.append(f"count(*) FILTER (WHERE {present_sql(v)} AND NOT {converts_sql(v, to)}) AS u{i}")
                unconvertible[(old, to)] = f"u{i}"
            for i, old in enumerate(dict.fromkeys(old for old, _ in plan.now_required if old is not None)):
                params[f"m{i}"] = old
                parts.append(f"count(*) FILTER (WHERE NOT {present_sql(f'(data -> :m{i})')}) AS m{i}")
                missing[old] = f"m{i}"
        row = (
            (
                await self.conn.execute(
                    text(f"SELECT {', '.join(parts)} FROM {RECORDS} WHERE collection_id = :cid"), params
                )
            )
            .mappings()
            .one()
        )
        duplicates: dict[str, int] = {}
        for old in dict.fromkeys(old for old, _ in (plan.now_unique if plan else ()) if old is not None):
            duplicates[old] = await self._sharing(collection_id, old)
        kept: dict[tuple[str, str], tuple[Any, ...]] = {}
        for key, alias in unconvertible.items():
            if int(row[alias]):
                kept[key] = await self._kept(collection_id, *key)
        return RecordCounts(
            total=int(row["total"]),
            present={name: int(row[alias]) for name, alias in present.items()},
            unconvertible={key: int(row[alias]) for key, alias in unconvertible.items()},
            missing={name: int(row[alias]) for name, alias in missing.items()},
            duplicates=duplicates,
            kept=kept,
        )

    async def _kept(self, collection_id: str, column: str, to_type: str) -> tuple[Any, ...]:
        """The first few distinct values of ``column`` (in record order) that do not convert to ``to_type``."""
        v = "(data -> :c)"
        query = text(
            f"SELECT value FROM (SELECT DISTINCT ON ({v}) {v} AS value, record_id FROM {RECORDS} "
            f"WHERE collection_id = :cid AND {present_sql(v)} AND NOT {converts_sql(v, to_type)} "
            f"ORDER BY {v}, record_id) AS kept ORDER BY record_id LIMIT {EXAMPLES}"
        )
        rows = await self.conn.execute(query, {"cid": collection_id, "c": column, **PATTERNS})
        return tuple(row[0] for row in rows)

    async def _sharing(self, collection_id: str, column: str) -> int:
        """How many records share their value of ``column`` with another record."""
        query = text(
            f"SELECT coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM {RECORDS} WHERE collection_id = :cid AND "
            f"{present_sql('(data -> :c)')} GROUP BY data -> :c HAVING count(*) > 1) AS shared"
        )
        return int((await self.conn.execute(query, {"cid": collection_id, "c": column})).scalar_one())

    async def taken_values(
        self, collection_id: str, column: str, values: Sequence[Any], *, except_record: int | None = None
    ) -> list[Any]:
        """Which of ``values`` a record of the collection already holds in ``column``."""
        query = text(
            f"SELECT DISTINCT data -> :c FROM {RECORDS} WHERE collection_id = :cid AND data -> :c IN "
            "(SELECT value FROM jsonb_array_elements(CAST(:vals AS jsonb)))"
            + ("" if except_record is None else " AND record_id <> :rid")
        )
        params: dict[str, Any] = {"cid": collection_id, "c": column, "vals": json.dumps(list(values))}
        if except_record is not None:
            params["rid"] = except_record
        return [row[0] for row in await self.conn.execute(query, params)]

    async def changes(self, org_id: str, collection_id: str) -> list[CollectionChange]:
        c = t.collection_changes
        query = (
            select(
                c.c.change,
                c.c.kind,
                c.c.subject_id,
                c.c.mode,
                c.c.detail,
                c.c.actor_user_id,
                c.c.tool_call_id,
                c.c.tool_name,
                c.c.studio_session_id,
                c.c.studio_seq,
                c.c.created_at,
            )
            .where(c.c.org_id == org_id, c.c.collection_id == collection_id)
            .order_by(c.c.change_id)
        )
        return [CollectionChange.model_validate(dict(row)) for row in (await self.conn.execute(query)).mappings()]

    # --- writing --------------------------------------------------------------------------------------

    async def create(
        self,
        org_id: str,
        name: str,
        purpose: str,
        scope: str,
        guild_id: str | None,
        columns: Iterable[ColumnSpec],
        access: Iterable[AccessRow],
        *,
        actor: str,
    ) -> str | None:
        """Insert a collection with its first access rows; None when the name is taken in the organisation."""
        collection_id = "col_" + uuid.uuid4().hex[:16]
        created = await self.conn.execute(
            insert(t.collections)
            .values(
                collection_id=collection_id,
                org_id=org_id,
                name=name,
                purpose=purpose,
                scope=scope,
                guild_id=guild_id,
                columns=[c.model_dump() for c in columns],
                version=1,
                updated_by=actor,
                updated_at=func.clock_timestamp(),
            )
            .on_conflict_do_nothing(index_elements=["org_id", "name"])
            .returning(t.collections.c.collection_id)
        )
        if created.first() is None:
            return None
        for row in access:
            await self.set_access(collection_id, row.kind, row.subject_id, row.mode, touch=False)
        return collection_id

    async def update(
        self, collection_id: str, name: str, purpose: str, columns: Iterable[ColumnSpec], *, actor: str
    ) -> None:
        c = t.collections
        await self.conn.execute(
            update(c)
            .where(c.c.collection_id == collection_id)
            .values(
                name=name,
                purpose=purpose,
                columns=[col.model_dump() for col in columns],
                version=c.c.version + 1,
                updated_by=actor,
                updated_at=func.clock_timestamp(),
            )
        )

    async def transform(self, collection_id: str, plan: ColumnPlan, *, actor: str) -> int:
        """Rewrite every record the plan changes in one statement: removed columns and the old names of renamed and
        retyped ones leave; each renamed or retyped value is written under its new name, converted where it
        converts. Answers how many records changed."""
        if not plan.changes_records:
            return 0
        moved: dict[str, tuple[str, str | None]] = {old: (new, None) for old, new in plan.renamed}
        for old, new, _, new_type in plan.retyped:
            moved[old] = (new, new_type)
        drop = [*plan.removed, *moved]
        params: dict[str, Any] = {"cid": collection_id, "actor": actor, **PATTERNS}
        pairs = []
        for i, (old, (new, to)) in enumerate(moved.items()):
            params[f"o{i}"], params[f"n{i}"] = old, new
            v = f"(data -> :o{i})"
            pairs.append(f"CAST(:n{i} AS text), {v if to is None else converted_sql(v, to)}")
        built = " || ".join(
            f"jsonb_strip_nulls(jsonb_build_object({', '.join(pairs[i : i + PAIRS_PER_CALL])}))"
            for i in range(0, len(pairs), PAIRS_PER_CALL)
        )
        new_data = "(data - :drop)" + (f" || {built}" if built else "")
        statement = text(
            f"UPDATE {RECORDS} SET data = {new_data}, updated_by = :actor, updated_at = clock_timestamp() "
            "WHERE collection_id = :cid AND data ?| :drop"
        ).bindparams(bindparam("drop", type_=ARRAY(Text)))
        result = await self.conn.execute(statement, {**params, "drop": drop})
        return int(result.rowcount)

    async def delete(self, collection_id: str) -> int:
        """Delete a collection, its records and its access list; answers how many records went with it."""
        r = t.collection_records
        gone = await self.conn.execute(delete(r).where(r.c.collection_id == collection_id))
        await self.conn.execute(delete(t.collections).where(t.collections.c.collection_id == collection_id))
        return int(gone.rowcount)

    async def set_access(
        self, collection_id: str, kind: str, subject_id: str, mode: str | None, *, touch: bool = True
    ) -> None:
        """Write one access row (``mode`` None: remove it); ``touch`` moves the collection's ``updated_at``."""
        a = t.collection_access
        if mode is None:
            await self.conn.execute(
                delete(a).where(a.c.collection_id == collection_id, a.c.kind == kind, a.c.subject_id == subject_id)
            )
        else:
            await self.conn.execute(
                insert(a)
                .values(collection_id=collection_id, kind=kind, subject_id=subject_id, mode=mode)
                .on_conflict_do_update(index_elements=["collection_id", "kind", "subject_id"], set_={"mode": mode})
            )
        if touch:
            c = t.collections
            await self.conn.execute(
                update(c)
                .where(c.c.collection_id == collection_id)
                .values(version=c.c.version + 1, updated_at=func.clock_timestamp())
            )

    async def log(
        self,
        collection_id: str,
        org_id: str,
        change: str,
        detail: Logged,
        *,
        origin: WriteOrigin,
        kind: str | None = None,
        subject_id: str | None = None,
        mode: str | None = None,
    ) -> None:
        """Log one change of a collection (an access row's: its ``kind``, ``subject_id`` and ``mode``), by whom and
        from which request."""
        await self.conn.execute(
            t.collection_changes.insert().values(
                collection_id=collection_id,
                org_id=org_id,
                change=change,
                kind=kind,
                subject_id=subject_id,
                mode=mode,
                detail=detail.model_dump(mode="json"),
                actor_user_id=origin.actor,
                tool_call_id=origin.tool_call_id,
                tool_name=origin.tool_name,
                studio_session_id=origin.studio_session_id,
                studio_seq=origin.studio_seq,
            )
        )

    async def add_records(self, collection_id: str, records: Sequence[Mapping[str, Any]], *, actor: str) -> list[int]:
        r = t.collection_records
        rows = await self.conn.execute(
            insert(r)
            .values([{"collection_id": collection_id, "data": dict(data), "updated_by": actor} for data in records])
            .returning(r.c.record_id)
        )
        return sorted(int(row[0]) for row in rows)

    async def replace_record(self, collection_id: str, record_id: int, data: Mapping[str, Any], *, actor: str) -> None:
        r = t.collection_records
        await self.conn.execute(
            update(r)
            .where(r.c.collection_id == collection_id, r.c.record_id == record_id)
            .values(data=dict(data), updated_by=actor, updated_at=func.clock_timestamp())
        )
