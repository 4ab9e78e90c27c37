"""The organisation's wall, written once for every owner: an entity of another organisation is not found, in the
words a missing one gets; a service's own call (no caller organisation) has no wall."""

from __future__ import annotations

from typing import Any

import pytest

from assent.domain import Agent, Guild
from assent.runtime.walls import NotFound, agent_in, guild_in, org_in, walled
from assent.testing import FakeUnitOfWork, FakeWorkspace


def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork(
        workspace=FakeWorkspace(
            orgs={"acme": "Acme", "globex": "Globex"},
            guilds=[Guild("support", "acme", "Support"), Guild("sales", "globex", "Sales")],
            agents=[Agent("ada", "acme", "support", "Ada"), Agent("bob", "globex", "sales", "Bob")],
        )
    )


LOOKUPS = {"org": org_in, "guild": guild_in, "agent": agent_in}


@pytest.mark.parametrize(
    ("what", "wanted", "caller_org", "found"),
    [
        ("org", "acme", "acme", "acme"),
        ("org", "acme", None, "acme"),
        ("org", "globex", "acme", None),
        ("org", "initech", "acme", None),
        ("org", "initech", None, None),
        ("guild", "support", "acme", "support"),
        ("guild", "sales", None, "sales"),
        ("guild", "sales", "acme", None),
        ("guild", "nowhere", "acme", None),
        ("agent", "ada", "acme", "ada"),
        ("agent", "bob", None, "bob"),
        ("agent", "bob", "acme", None),
        ("agent", "nobody", None, None),
    ],
)
async def test_another_organisations_entity_is_not_found_as_a_missing_one_is(
    what: str, wanted: str, caller_org: str | None, found: str | None
) -> None:
    lookup: Any = LOOKUPS[what]
    if found is None:
        with pytest.raises(NotFound) as raised:
            await lookup(uow(), wanted, caller_org)
        assert str(raised.value) == f"{what} {wanted!r} does not exist"
        return
    entity = await lookup(uow(), wanted, caller_org)
    assert (entity if isinstance(entity, str) else getattr(entity, f"{what}_id")) == found


async def test_a_guild_is_locked_when_asked_for_update_behind_the_wall_too() -> None:
    work = uow()
    assert (await guild_in(work, "support", "acme", for_update=True)).guild_id == "support"
    with pytest.raises(NotFound):
        await guild_in(work, "sales", "acme", for_update=True)
    assert work.workspace.locked == ["support", "sales"]


@pytest.mark.parametrize(
    ("org_id", "caller_org", "behind"), [("acme", "acme", False), ("acme", None, False), ("globex", "acme", True)]
)
def test_the_wall_stands_between_organisations_only(org_id: str, caller_org: str | None, behind: bool) -> None:
    assert walled(org_id, caller_org) is behind
