"""Direct writes' records (:mod:`assent.runtime.writes`): which routes write, how a record names its route, and that it
goes through the unit of work's outbox on ``workspace.writes``, keyed by its organisation."""

from __future__ import annotations

import pytest

from assent.api import ROUTES, Caller
from assent.contracts import WorkspaceWritten
from assent.runtime.writes import WRITE_METHODS, actor_of, record_write, via, write_route, write_routes
from assent.testing import FakeUnitOfWork
from assent.topics import WORKSPACE_WRITES


def test_the_routes_that_write_are_every_declared_route_but_the_reads() -> None:
    assert {route.name for route in write_routes()} == {route.name for route in ROUTES if route.method != "GET"}
    assert {route.method for route in ROUTES} - WRITE_METHODS == {"GET"}
    assert via(write_route("write_memory")) == "PUT /api/workspace/agents/{agent_id}/memory"
    assert via(write_route("push")) == "POST /api/webhooks/{provider}"


def test_a_read_route_or_an_unknown_name_records_nothing() -> None:
    for name in ("read_memory", "no_such_route"):
        with pytest.raises(KeyError, match="is no declared route that writes"):
            write_route(name)


async def test_a_record_goes_through_the_outbox_keyed_by_its_organisation() -> None:
    uow = FakeUnitOfWork()
    message = await record_write(
        uow,
        "write_memory",
        org_id="org_a",
        guild_id="guild_a",
        agent_id="agent_ada",
        kind="memory",
        action="edit",
        target="Memory of Ada",
        actor="olga@acme.example",
        hash_before="sha256:a",
        hash_after="sha256:b",
    )
    assert uow.emitted == [(WORKSPACE_WRITES.name, "org_a", message)]
    assert isinstance(message, WorkspaceWritten)
    assert (message.via, message.actor, message.hash_before, message.hash_after) == (
        "PUT /api/workspace/agents/{agent_id}/memory",
        "olga@acme.example",
        "sha256:a",
        "sha256:b",
    )
    assert message.at.tzinfo is not None and message.detail is None
    with pytest.raises(KeyError):
        await record_write(uow, "read_memory", org_id="o", kind="memory", action="edit", target="t", actor="a")
    assert len(uow.emitted) == 1


def test_a_write_is_the_persons_or_else_the_services_own() -> None:
    assert actor_of(Caller("org_a", "olga@acme.example", frozenset()), "edits") == "olga@acme.example"
    assert actor_of(Caller(None, None, frozenset()), "edits") == "edits"
