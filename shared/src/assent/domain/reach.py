"""Reach: what a session may touch. Every kind applies these before anything of its own."""

from __future__ import annotations

from pydantic import ValidationError

from .model import Agent, Guild, Refusal, Session


def invalid_arguments(tool: str, exc: ValidationError) -> Refusal:
    """A refusal that names every argument that is wrong and why."""
    problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors())
    return Refusal(422, "invalid_arguments", f"{tool}: {problems}")


def check_live_member(session: Session, agent: Agent | None, agent_id: str) -> Refusal | None:
    """The agent must exist in the session's organisation and be a live member of its source guild."""
    if agent is None or agent.org_id != session.org_id:
        return Refusal(404, "unknown_agent", f"agent {agent_id!r} does not exist in this organisation")
    if agent.guild_id != session.source_guild_id or not agent.live:
        return Refusal(
            422,
            "agent_out_of_reach",
            f"agent {agent_id!r} is not a live member of the session's source guild {session.source_guild_id!r}",
        )
    return None


def check_source_guild(session: Session, guild: Guild | None) -> Refusal | None:
    """The session's source guild must exist in its organisation."""
    if guild is None or guild.org_id != session.org_id:
        return Refusal(404, "unknown_guild", f"the source guild {session.source_guild_id!r} does not exist")
    return None
