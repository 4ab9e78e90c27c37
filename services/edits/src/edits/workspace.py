"""The workspace directory (orgs, guilds, agents, membership, Tasks), owned here, and direct Memory writes.

These are not proposals: they are the operator's (or a test's) own changes to live state, the kind of
change a pending request must never overwrite. Every change of the directory goes out on
``workspace.events`` through the outbox, carrying the entity's whole new state, so that every other service
keeps its read copy for its reach checks. Every direct write is recorded on ``workspace.writes`` in its own
transaction (:func:`assent.runtime.writes.record_write`), by ``actor`` (the person; the service for a call of its
own), for the organisation's history.

Organisations are walls. Every function that reads or writes an org's entity takes ``caller_org``, the
organisation of the person the call is made for (``None`` for a service's own call: no wall). An entity of
another organisation is answered exactly as a missing one (``NotFound`` with the same wording), and the check
reads the entity inside the caller's unit of work, the same transaction as the read or write it guards.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert

from assent.contracts import AgentChanged, GuildChanged, OrgChanged
from assent.domain import Agent, Guild
from assent.hashing import content_hash
from assent.runtime.uow import SqlUnitOfWork, UnitOfWork
from assent.runtime.walls import NotFound, agent_in, guild_in, org_in, walled
from assent.runtime.writes import record_write
from assent.topics import WORKSPACE_EVENTS
from edits_contract import workspace as answers
from edits_contract.workspace import OWNER, AgentPatch

from .adapters import tables as t
from .adapters.repository import EditsRepository
from .domain import guild as guild_rules
from .domain.drafts import task_hash
from .domain.memory import check_byte_cap
from .domain.model import LiveMemory


class Conflict(Exception):
    pass


class Refused(Exception):
    """A write the rules refuse (422); ``code`` names the rule, as a refused tool call's does."""

    def __init__(self, message: str, code: str = "refused") -> None:
        super().__init__(message)
        self.code = code


def agent_view(agent: Agent) -> answers.Agent:
    return answers.Agent(
        agent_id=agent.agent_id,
        org_id=agent.org_id,
        guild_id=agent.guild_id,
        name=agent.name,
        live=agent.live,
        task=agent.task,
        owners=list(agent.owners),
        editors=list(agent.editors),
    )


def guild_view(guild: Guild) -> answers.Guild:
    return answers.Guild(
        guild_id=guild.guild_id,
        org_id=guild.org_id,
        name=guild.name,
        about=guild.about,
        description=guild.description,
    )


def memory_view(live: LiveMemory) -> answers.Memory:
    return answers.Memory(agent_id=live.agent_id, content=live.content, version=live.version, hash=live.hash)


async def publish_guild(uow: UnitOfWork, guild: Guild) -> None:
    uow.answer_once_published()  # the other services' copies find it from the answer on
    await uow.emit(
        WORKSPACE_EVENTS,
        guild.org_id,
        GuildChanged(
            guild_id=guild.guild_id,
            org_id=guild.org_id,
            name=guild.name,
            about=guild.about,
            description=guild.description,
            revision=guild.revision,
        ),
    )


async def publish_agent(uow: UnitOfWork, agent: Agent) -> None:
    uow.answer_once_published()  # the other services' copies find it from the answer on
    await uow.emit(
        WORKSPACE_EVENTS,
        agent.org_id,
        AgentChanged(
            agent_id=agent.agent_id,
            org_id=agent.org_id,
            guild_id=agent.guild_id,
            name=agent.name,
            live=agent.live,
            task=agent.task,
            revision=agent.revision,
            owners=agent.owners,
            editors=agent.editors,
        ),
    )


async def create_org(
    uow: SqlUnitOfWork, org_id: str, name: str, *, caller_org: str | None = None, actor: str = OWNER
) -> None:
    """Create an org; a person may only create their own (any other is, to them, an org that does not exist)."""
    if walled(org_id, caller_org):
        raise NotFound(f"org {org_id!r} does not exist")
    created = await uow.conn.execute(
        insert(t.orgs).values(org_id=org_id, name=name).on_conflict_do_nothing().returning(t.orgs.c.org_id)
    )
    if created.first() is None:
        raise Conflict(f"org {org_id!r} already exists")
    uow.answer_once_published()  # the other services' copies find it from the answer on
    await uow.emit(WORKSPACE_EVENTS, org_id, OrgChanged(org_id=org_id, name=name, revision=1))
    await record_write(
        uow, "create_org", org_id=org_id, kind="org", action="create", target=f"Organisation {name}", actor=actor
    )


async def create_guild(
    uow: SqlUnitOfWork, guild_id: str, org_id: str, name: str, *, caller_org: str | None = None, actor: str = OWNER
) -> Guild:
    await org_in(uow, org_id, caller_org)
    created = await uow.conn.execute(
        insert(t.guilds)
        .values(guild_id=guild_id, org_id=org_id, name=name)
        .on_conflict_do_nothing()
        .returning(t.guilds.c.guild_id)
    )
    if created.first() is None:
        raise Conflict(f"guild {guild_id!r} already exists")
    guild = await uow.workspace.guild(guild_id)
    assert guild is not None
    await publish_guild(uow, guild)
    await record_write(
        uow,
        "create_guild",
        org_id=org_id,
        guild_id=guild_id,
        kind="guild",
        action="create",
        target=f"Guild {name}",
        actor=actor,
        hash_after=guild_rules.guild_hash(guild),
    )
    return guild


async def get_guild(
    uow: UnitOfWork, guild_id: str, *, caller_org: str | None = None, for_update: bool = False
) -> Guild:
    return await guild_in(uow, guild_id, caller_org, for_update=for_update)


async def create_agent(
    uow: SqlUnitOfWork,
    agent_id: str,
    org_id: str,
    guild_id: str | None,
    name: str,
    memory: str,
    task: str,
    actor: str,
    max_bytes: int,
    *,
    caller_org: str | None = None,
) -> answers.Memory:
    """Create an agent with its Memory at version 0 (empty), then version 1 when ``memory`` is given."""
    refusal = check_byte_cap(memory, max_bytes, "the Memory")
    if refusal is not None:
        raise Refused(refusal.message, refusal.code)
    if guild_id is not None:
        guild = await uow.workspace.guild(guild_id)
        if guild is None or guild.org_id != org_id or walled(org_id, caller_org):
            raise NotFound(f"guild {guild_id!r} does not exist in org {org_id!r}")
    else:
        await org_in(uow, org_id, caller_org)
    created = await uow.conn.execute(
        insert(t.agents)
        .values(agent_id=agent_id, org_id=org_id, guild_id=guild_id, name=name, task=task, owners=[actor])
        .on_conflict_do_nothing()
        .returning(t.agents.c.agent_id)
    )
    if created.first() is None:
        raise Conflict(f"agent {agent_id!r} already exists")
    repo = EditsRepository(uow.conn)
    await repo.create_memory(agent_id, actor)
    if memory:
        await repo.write_memory(org_id, agent_id, memory, expected_version=0, actor=actor)
    agent = await uow.workspace.agent(agent_id)
    assert agent is not None
    await publish_agent(uow, agent)
    live = await repo.memory(agent_id)
    assert live is not None
    await record_write(
        uow,
        "create_agent",
        org_id=org_id,
        guild_id=guild_id,
        agent_id=agent_id,
        kind="agent",
        action="create",
        target=f"Agent {name}",
        actor=actor,
        detail=f"Memory at version {live.version} ({live.hash})",
    )
    return memory_view(live)


async def get_agent(uow: SqlUnitOfWork, agent_id: str, *, caller_org: str | None = None) -> Agent:
    return await agent_in(uow, agent_id, caller_org)


async def update_agent(
    uow: SqlUnitOfWork, agent_id: str, patch: AgentPatch, *, caller_org: str | None = None, actor: str = OWNER
) -> Agent:
    """Move an agent to another guild (or none), retire it (``live: false``), rename it or change its Task: the
    fields ``patch`` gives.

    The new guild must be of the agent's own org (so, behind the wall, of the caller's). The write's record names the
    fields given and, where the Task changed, its hashes before and after (what a Task draft binds).
    """
    agent = await get_agent(uow, agent_id, caller_org=caller_org)
    if patch.guild_id is not None:
        guild = await uow.workspace.guild(patch.guild_id)
        if guild is None or guild.org_id != agent.org_id:
            raise NotFound(f"guild {patch.guild_id!r} does not exist in org {agent.org_id!r}")
    changes = patch.model_dump(exclude_unset=True)
    if changes:
        before = agent
        await uow.conn.execute(
            t.agents.update().where(t.agents.c.agent_id == agent_id).values(**changes, revision=t.agents.c.revision + 1)
        )
        agent = await get_agent(uow, agent_id)
        await publish_agent(uow, agent)
        task_moved = "task" in changes and before.task != agent.task
        await record_write(
            uow,
            "update_agent",
            org_id=agent.org_id,
            guild_id=agent.guild_id,
            agent_id=agent_id,
            kind="agent",
            action="edit",
            target=f"Agent {agent.name}",
            actor=actor,
            hash_before=task_hash(before.task) if task_moved else None,
            hash_after=task_hash(agent.task) if task_moved else None,
            detail=", ".join(sorted(changes)),
        )
    return agent


async def read_memory(uow: SqlUnitOfWork, agent_id: str, *, caller_org: str | None = None) -> answers.Memory:
    if caller_org is not None:
        await get_agent(uow, agent_id, caller_org=caller_org)  # another org's agent: as if missing
    live = await EditsRepository(uow.conn).memory(agent_id)
    if live is None:
        raise NotFound(f"agent {agent_id!r} does not exist")
    return memory_view(live)


async def write_memory(
    uow: SqlUnitOfWork,
    agent_id: str,
    content: str,
    expected_version: int | None,
    actor: str,
    max_bytes: int,
    *,
    caller_org: str | None = None,
) -> answers.Memory:
    """Write Memory directly; with ``expected_version``, refuse (Conflict) when the live version differs."""
    refusal = check_byte_cap(content, max_bytes, "the Memory")
    if refusal is not None:
        raise Refused(refusal.message, refusal.code)
    repo = EditsRepository(uow.conn)
    live = await repo.memory(agent_id, for_update=True)
    agent = await uow.workspace.agent(agent_id)
    if live is None or agent is None or walled(agent.org_id, caller_org):
        raise NotFound(f"agent {agent_id!r} does not exist")
    if expected_version is not None and expected_version != live.version:
        raise Conflict(f"Memory of {agent_id!r} is at version {live.version}, not {expected_version}")
    version = await repo.write_memory(agent.org_id, agent_id, content, expected_version=live.version, actor=actor)
    assert version is not None  # the row is locked at live.version
    written = answers.Memory(agent_id=agent_id, content=content, version=version, hash=content_hash(content))
    await record_write(
        uow,
        "write_memory",
        org_id=agent.org_id,
        guild_id=agent.guild_id,
        agent_id=agent_id,
        kind="memory",
        action="edit",
        target=f"Memory of {agent.name}",
        actor=actor,
        hash_before=live.hash,
        hash_after=written.hash,
        detail=f"version {version}",
    )
    return written


async def memory_history(
    uow: SqlUnitOfWork, agent_id: str, *, caller_org: str | None = None
) -> list[answers.MemoryRevision]:
    await read_memory(uow, agent_id, caller_org=caller_org)
    return await EditsRepository(uow.conn).memory_history(agent_id)


async def guild_history(
    uow: SqlUnitOfWork, guild_id: str, *, caller_org: str | None = None
) -> list[answers.GuildChange]:
    await get_guild(uow, guild_id, caller_org=caller_org)
    return await EditsRepository(uow.conn).guild_changes(guild_id)


async def guilds_of_org(uow: SqlUnitOfWork, org_id: str) -> list[Guild]:
    rows = await uow.conn.execute(select(t.guilds).where(t.guilds.c.org_id == org_id))
    return [Guild(r.guild_id, r.org_id, r.name, r.about, r.description, r.revision) for r in rows]


async def update_guild_text(uow: UnitOfWork, guild_id: str, changes: dict[str, str]) -> Guild:
    """Write the given text fields (``about``, ``description``) of a guild, one revision up, and publish it.

    Works on any unit of work: the write goes through the ``edits`` store. The caller checks the rules
    (limits, staleness) and logs who changed which field.
    """
    if changes and not await uow.store(EditsRepository).update_guild_text(guild_id, changes):
        raise NotFound(f"guild {guild_id!r} does not exist")
    guild = await uow.workspace.guild(guild_id)
    if guild is None:
        raise NotFound(f"guild {guild_id!r} does not exist")
    if changes:
        await publish_guild(uow, guild)
    return guild


async def change_guild_text(
    uow: UnitOfWork, guild_id: str, given: dict[str, str], actor: str, *, caller_org: str | None = None
) -> tuple[Guild, list[str]]:
    """The operator's own change of a guild's text (not a proposal), under the same field limits as a request.

    It logs who changed which field, moves the guild's revision and publishes ``GuildChanged``, so a pending
    request bound to the old text turns stale. A field equal to the live text is not a change. Returns the
    guild and the fields that changed.
    """
    if not given:
        raise Refused("give about, description, or both", "no_fields")
    refusal = guild_rules.check_lengths(given)
    if refusal is not None:
        raise Refused(refusal.message, refusal.code)
    guild = await get_guild(uow, guild_id, caller_org=caller_org, for_update=True)
    changes = guild_rules.changed(guild, given)
    before = guild
    guild = await update_guild_text(uow, guild_id, changes)
    for name in changes:
        await uow.store(EditsRepository).log_guild_change(
            guild_id, name, actor, tool_call_id=None, session_id=None, seq=None
        )
    if changes:  # a field equal to the live text is no change, and writes nothing
        await record_write(
            uow,
            "update_guild_text",
            org_id=guild.org_id,
            guild_id=guild_id,
            kind="guild",
            action="edit",
            target=f"Guild {guild.name}",
            actor=actor,
            hash_before=guild_rules.guild_hash(before),
            hash_after=guild_rules.guild_hash(guild),
            detail=", ".join(changes),
        )
    return guild, list(changes)


async def set_agent_roles(
    uow: SqlUnitOfWork,
    agent_id: str,
    owners: list[str],
    editors: list[str],
    *,
    caller_org: str | None = None,
    actor: str = OWNER,
) -> Agent:
    """Say who owns and who edits an agent (the organisation's admins decide; the gateway checks that)."""
    agent = await get_agent(uow, agent_id, caller_org=caller_org)
    await uow.conn.execute(
        t.agents.update()
        .where(t.agents.c.agent_id == agent.agent_id)
        .values(
            owners=sorted(set(owners)), editors=sorted(set(editors) - set(owners)), revision=t.agents.c.revision + 1
        )
    )
    agent = await get_agent(uow, agent_id, caller_org=caller_org)
    await publish_agent(uow, agent)
    await record_write(
        uow,
        "set_agent_roles",
        org_id=agent.org_id,
        guild_id=agent.guild_id,
        agent_id=agent_id,
        kind="agent",
        action="roles",
        target=f"Agent {agent.name}",
        actor=actor,
        detail=f"owners: {', '.join(agent.owners) or '-'}; editors: {', '.join(agent.editors) or '-'}",
    )
    return agent
