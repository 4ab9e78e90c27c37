"""An agent's access as it is now: the logins it resolves and the bindings of its organisation, guild and its own,
resolved (:func:`access.domain.access.resolve`)."""

from __future__ import annotations

from dataclasses import dataclass

from assent.domain import Agent

from .adapters.repository import AccessRepository, HeldBinding
from .domain.access import Access, Binding, Connection, resolve


@dataclass(frozen=True)
class Current:
    access: Access
    connections: list[Connection]
    held: list[HeldBinding]

    @property
    def bindings(self) -> list[Binding]:
        return [h.binding for h in self.held]


async def current(repo: AccessRepository, agent: Agent) -> Current:
    connections = await repo.reachable(agent.org_id, agent.guild_id, agent.agent_id)
    held = await repo.bindings_of(agent.org_id, agent.guild_id, agent.agent_id)
    return Current(resolve(connections, [h.binding for h in held]), connections, held)
