"""The organisation wall in the workspace functions (on an in-memory unit of work) and the ``X-Assent-Org``
dependency. The routes end to end, on PostgreSQL: tests/test_owner_org_walls.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from assent.domain import Agent, Guild
from assent.runtime.walls import ORG_HEADER, CallerOrg
from assent.testing import FakeUnitOfWork, FakeWorkspace
from edits import note_workspace, workspace

MINE, THEIRS = "org_a", "org_b"


def uow() -> Any:
    return FakeUnitOfWork(
        workspace=FakeWorkspace(
            orgs={MINE: "A", THEIRS: "B"},
            guilds=[Guild("g_a", MINE, "Support"), Guild("g_b", THEIRS, "Support", about="secret")],
            agents=[Agent("a_a", MINE, "g_a", "Ada"), Agent("a_b", THEIRS, "g_b", "Bo", task="secret")],
        )
    )


def test_walled_is_another_org_and_no_wall_without_a_caller_org() -> None:
    assert workspace.walled(THEIRS, MINE)
    assert not workspace.walled(MINE, MINE)
    assert not workspace.walled(THEIRS, None)


async def test_own_entities_read_and_without_a_caller_org_every_one_does() -> None:
    work = uow()
    assert (await workspace.get_agent(work, "a_a", caller_org=MINE)).org_id == MINE
    assert (await workspace.get_guild(work, "g_a", caller_org=MINE)).org_id == MINE
    assert (await workspace.get_agent(work, "a_b")).org_id == THEIRS
    assert (await workspace.get_guild(work, "g_b", caller_org=None)).org_id == THEIRS


WALLED: list[tuple[str, Callable[[Any], Awaitable[Any]], str]] = [
    ("get agent", lambda u: workspace.get_agent(u, "a_b", caller_org=MINE), "agent 'a_b' does not exist"),
    (
        "update agent",
        lambda u: workspace.update_agent(u, "a_b", {"task": "x"}, caller_org=MINE),
        "agent 'a_b' does not exist",
    ),
    ("read memory", lambda u: workspace.read_memory(u, "a_b", caller_org=MINE), "agent 'a_b' does not exist"),
    ("memory history", lambda u: workspace.memory_history(u, "a_b", caller_org=MINE), "agent 'a_b' does not exist"),
    ("get guild", lambda u: workspace.get_guild(u, "g_b", caller_org=MINE), "guild 'g_b' does not exist"),
    ("guild history", lambda u: workspace.guild_history(u, "g_b", caller_org=MINE), "guild 'g_b' does not exist"),
    (
        "change guild text",
        lambda u: workspace.change_guild_text(u, "g_b", {"about": "x"}, "m", caller_org=MINE),
        "guild 'g_b' does not exist",
    ),
    ("create org", lambda u: workspace.create_org(u, THEIRS, "B", caller_org=MINE), "org 'org_b' does not exist"),
    ("create new org", lambda u: workspace.create_org(u, "org_c", "C", caller_org=MINE), "org 'org_c' does not exist"),
    (
        "create guild",
        lambda u: workspace.create_guild(u, "g_new", THEIRS, "x", caller_org=MINE),
        "org 'org_b' does not exist",
    ),
    (
        "create agent",
        lambda u: workspace.create_agent(u, "a_new", THEIRS, None, "x", "", "", "m", 100, caller_org=MINE),
        "org 'org_b' does not exist",
    ),
    (
        "create agent in their guild",
        lambda u: workspace.create_agent(u, "a_new", THEIRS, "g_b", "x", "", "", "m", 100, caller_org=MINE),
        "guild 'g_b' does not exist in org 'org_b'",
    ),
    ("list notes", lambda u: note_workspace.list_notes(u, THEIRS, caller_org=MINE), "org 'org_b' does not exist"),
    (
        "read note",
        lambda u: note_workspace.read_note(u, THEIRS, "org/a.md", caller_org=MINE),
        "org 'org_b' does not exist",
    ),
    (
        "write note",
        lambda u: note_workspace.write_note(u, THEIRS, "org/a.md", "x", None, None, "m", 100, caller_org=MINE),
        "org 'org_b' does not exist",
    ),
    (
        "delete note",
        lambda u: note_workspace.delete_note(u, THEIRS, "org/a.md", None, "m", caller_org=MINE),
        "org 'org_b' does not exist",
    ),
    (
        "note history",
        lambda u: note_workspace.note_history(u, THEIRS, "not a path", caller_org=MINE),
        "org 'org_b' does not exist",
    ),
]


@pytest.mark.parametrize(("name", "work", "detail"), WALLED, ids=[name for name, _, _ in WALLED])
async def test_another_orgs_entity_is_one_that_does_not_exist_and_nothing_is_written(
    name: str, work: Callable[[Any], Awaitable[Any]], detail: str
) -> None:
    unit = uow()
    with pytest.raises(workspace.NotFound) as raised:
        await work(unit)
    assert str(raised.value) == detail
    assert "secret" not in str(raised.value)
    assert unit.emitted == [] and unit.workspace.locked in ([], ["g_b"])  # read, maybe locked; never written


def client() -> TestClient:
    app = FastAPI()

    @app.get("/whoami")
    async def whoami(org: CallerOrg) -> dict[str, str | None]:
        return {"org": org}

    return TestClient(app)


def test_the_header_names_the_callers_org_and_its_absence_is_a_services_own_call() -> None:
    with client() as http:
        assert http.get("/whoami", headers={ORG_HEADER: MINE}).json() == {"org": MINE}
        assert http.get("/whoami", headers={ORG_HEADER.lower(): MINE}).json() == {"org": MINE}
        assert http.get("/whoami").json() == {"org": None}


@pytest.mark.parametrize("bad", ["", "x" * 201])
def test_a_header_that_is_no_identifier_is_refused_not_ignored(bad: str) -> None:
    with client() as http:
        assert http.get("/whoami", headers={ORG_HEADER: bad}).status_code == 422
