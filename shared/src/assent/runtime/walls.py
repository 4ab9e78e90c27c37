"""Organisations are walls, on owners' internal APIs too.

The gateway authenticates people and calls an owner for one of them with ``X-Assent-Org``: the person's
organisation. An owner then answers 404 for another organisation's entities, in the words it uses for one that
does not exist. Without the header the call is a service's own (the service credential still admits it). The
header is read as the declared routes read it (:class:`assent.api.Caller`).

The lookups of the workspace directory behind the wall are here, once for every owner: :func:`org_in`,
:func:`guild_in` and :func:`agent_in` read the entity in the caller's unit of work (the transaction of the read or
write they guard) and raise :class:`NotFound` for a missing one and for another organisation's alike, which the
owner answers 404 with its message.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from ..api import ORG_HEADER, Caller, caller
from ..domain import Agent, Guild
from .uow import UnitOfWork

__all__ = ["ORG_HEADER", "CallerOrg", "NotFound", "agent_in", "caller_org", "guild_in", "org_in", "walled"]


async def caller_org(who: Annotated[Caller, Depends(caller)]) -> str | None:
    """The organisation of the person the call is made for (``X-Assent-Org``), or ``None`` for a service's own."""
    return who.org


CallerOrg = Annotated[str | None, Depends(caller_org)]


class NotFound(LookupError):
    """An entity that does not exist, or is behind the caller's wall: answered 404 with this message, the same
    words for both."""


def walled(org_id: str, caller_org: str | None) -> bool:
    """Whether ``org_id`` is behind the caller's wall: another organisation than the caller's own (``caller_org``
    None, a service's own call, has no wall)."""
    return caller_org is not None and org_id != caller_org


async def org_in(uow: UnitOfWork, org_id: str, caller_org: str | None) -> str:
    """``org_id``, when the organisation exists and is the caller's; else :class:`NotFound` (another organisation is
    not even read)."""
    if walled(org_id, caller_org) or await uow.workspace.org(org_id) is None:
        raise NotFound(f"org {org_id!r} does not exist")
    return org_id


async def guild_in(uow: UnitOfWork, guild_id: str, caller_org: str | None, *, for_update: bool = False) -> Guild:
    """The guild (locked for the transaction with ``for_update``), when it is of the caller's organisation; else
    :class:`NotFound`."""
    guild = await uow.workspace.guild(guild_id, for_update=for_update)
    if guild is None or walled(guild.org_id, caller_org):
        raise NotFound(f"guild {guild_id!r} does not exist")
    return guild


async def agent_in(uow: UnitOfWork, agent_id: str, caller_org: str | None) -> Agent:
    """The agent, when it is of the caller's organisation; else :class:`NotFound`."""
    agent = await uow.workspace.agent(agent_id)
    if agent is None or walled(agent.org_id, caller_org):
        raise NotFound(f"agent {agent_id!r} does not exist")
    return agent
