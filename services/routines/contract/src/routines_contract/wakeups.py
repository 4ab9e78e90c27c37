"""How an agent's runtime reads its routines' wake-ups, beside its coach::

async for wakeup in wakeups(coach, group_id="agent-runtime", agent_ids={"ada"}):
    await run_agent(wakeup.agent_id, wakeup.instruction)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection

from assent.coach import CoachClient

from .messages import RoutineWokeUp
from .topics import ROUTINES_WAKEUPS


async def wakeups(
    coach: CoachClient, *, group_id: str, agent_ids: Collection[str] | None = None
) -> AsyncIterator[RoutineWokeUp]:
    """The routines' wake-ups (of ``agent_ids``, or of every agent), each carrying the instruction in force when its
    routine fired, read as :meth:`~assent.coach.CoachClient.events` reads (``group_id`` is the runtime's consumer
    group; a wake-up is committed once the loop asks for the next one, and yielded once per process)."""
    async for message in coach.events(ROUTINES_WAKEUPS, group_id=group_id, client_id=f"{group_id}-wakeups"):
        if isinstance(message, RoutineWokeUp) and (agent_ids is None or message.agent_id in agent_ids):
            yield message
