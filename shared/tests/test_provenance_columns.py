"""The provenance columns are declared once (:func:`assent.runtime.tables.last_update`,
:func:`~assent.runtime.tables.studio_request`): each call makes columns of its own, and every service's table that
carries them carries them as declared there."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from sqlalchemy import Column, MetaData, Table

from assent.runtime.tables import last_update, studio_request

SERVICES = ("access", "connections", "deployer", "edits", "gateway", "routines")


def shape(column: Column[Any]) -> tuple[str, str, bool, str | None]:
    default = column.server_default
    return column.name, repr(column.type), bool(column.nullable), None if default is None else str(default.arg)  # type: ignore[attr-defined]  # a DefaultClause


def test_each_table_gets_columns_of_its_own() -> None:
    metadata = MetaData()
    a = Table("a", metadata, *last_update(), *studio_request())
    b = Table("b", metadata, *last_update(), *studio_request())
    assert (
        [c.name for c in a.c]
        == ["updated_by", "updated_at", "studio_session_id", "studio_seq"]
        == [c.name for c in b.c]
    )
    assert all(x is not y and x.table is a and y.table is b for x, y in zip(a.c, b.c, strict=True))


@pytest.mark.parametrize("service", SERVICES)
def test_every_table_carries_them_as_declared(service: str) -> None:
    declared = {column.name: shape(column) for column in (*last_update(), *studio_request())}
    tables = importlib.import_module(f"{service}.adapters.tables")
    for table in tables.metadata.tables.values():
        for column in table.c:
            if column.name in declared:
                assert shape(column) == declared[column.name], f"{table.fullname}.{column.name}"
