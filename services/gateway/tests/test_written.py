"""Direct writes filed in the history, as a use case on fakes: each ``WorkspaceWritten`` of a batch becomes an
unlinked entry in order, and a write that names an agent or guild of another organisation than its own is not filed
(the batch fails, and the failure policy dead-letters the message)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from opentelemetry import trace

from assent.contracts import WorkspaceWritten
from assent.domain import Agent, Guild
from assent.runtime import Received
from assent.testing import FakeUnitOfWork, FakeWorkspace
from gateway.adapters import tables as t
from gateway.adapters.history import FILE_WRITTEN, WRITTEN_COLUMNS, WrittenEntries
from gateway.handlers import BeyondTheWall, file_writes

ORG, OTHER = "org_a", "org_b"


class FakeWrittenEntries:
    def __init__(self) -> None:
        self.filed: list[WorkspaceWritten] = []

    async def file(self, written: Sequence[WorkspaceWritten]) -> None:
        self.filed.extend(written)


def written(n: int, org: str = ORG, agent: str | None = "agent_ada", guild: str | None = "guild_a") -> WorkspaceWritten:
    return WorkspaceWritten(
        org_id=org,
        guild_id=guild,
        agent_id=agent,
        kind="memory",
        action="edit",
        target=f"Memory of Ada ({n})",
        actor="olga@acme.example",
        via="PUT /api/workspace/agents/{agent_id}/memory",
        at=datetime(2026, 12, 3, 9, 0, n, tzinfo=UTC),
        hash_before=f"sha256:{n}",
        hash_after=f"sha256:{n + 1}",
    )


def batch(*messages: WorkspaceWritten) -> list[Received]:
    return [Received(message, {}, trace.get_tracer("test"), "workspace.writes") for message in messages]


def world() -> tuple[FakeUnitOfWork, FakeWrittenEntries]:
    entries = FakeWrittenEntries()
    workspace = FakeWorkspace(
        orgs={ORG: "A", OTHER: "B"},
        guilds=[Guild("guild_a", ORG, "Support", "", "", 1), Guild("guild_b", OTHER, "Sales", "", "", 1)],
        agents=[
            Agent("agent_ada", ORG, "guild_a", "Ada", True, "", 1),
            Agent("agent_bo", OTHER, "guild_b", "Bo", True, "", 1),
        ],
    )
    return FakeUnitOfWork(workspace=workspace, stores={WrittenEntries: entries}), entries


async def test_each_write_is_filed_in_order() -> None:
    uow, entries = world()
    first, second, third = written(1), written(2, agent=None, guild=None), written(3)
    await file_writes(batch(first, second, third), uow)
    assert entries.filed == [first, second, third]
    assert uow.emitted == []  # filing sends nothing on


async def test_a_write_of_an_agent_or_guild_not_copied_yet_is_filed() -> None:
    # A write that created its agent or guild may arrive before the directory's event of it does.
    uow, entries = world()
    new = written(1, agent="agent_new", guild="guild_new")
    await file_writes(batch(new), uow)
    assert entries.filed == [new]


@pytest.mark.parametrize(
    ("agent", "guild", "named"),
    [("agent_bo", None, "agent 'agent_bo'"), (None, "guild_b", "guild 'guild_b'"), ("agent_ada", "guild_b", "guild")],
)
async def test_a_write_naming_another_organisations_agent_or_guild_is_not_filed(
    agent: str | None, guild: str | None, named: str
) -> None:
    uow, entries = world()
    with pytest.raises(BeyondTheWall, match=f"names {named}.* of another organisation than its own \\('org_a'\\)"):
        await file_writes(batch(written(1), written(2, agent=agent, guild=guild)), uow)
    assert entries.filed == []  # the whole batch: it is handled again one message at a time


def test_the_statement_files_unlinked_entries_of_type_written_in_the_batchs_order() -> None:
    names = [name for name, _ in WRITTEN_COLUMNS]
    assert set(names) <= {column.name for column in t.history_unlinked.columns}
    assert FILE_WRITTEN.startswith(f"INSERT INTO gateway.history_unlinked (type, {', '.join(names)}) SELECT 'written'")
    assert FILE_WRITTEN.endswith(f"WITH ORDINALITY AS r({', '.join(names)}, n) ORDER BY r.n")
