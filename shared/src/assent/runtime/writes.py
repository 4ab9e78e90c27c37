"""Direct writes of the workspace, recorded with the write.

Every declared route of an owner that changes what the owner holds (each ``POST``, ``PUT``, ``PATCH`` and ``DELETE``
of :data:`assent.api.ROUTES`: :func:`write_routes`) calls :func:`record_write` in the unit of work of its write. The
:class:`~assent.contracts.WorkspaceWritten` goes to the owner's outbox in that transaction, so the write and its
record commit together or not at all; the relay publishes it on ``workspace.writes`` and the gateway files it in the
organisation's history. A write that fails (a refusal, a conflict, another organisation's entity) rolls back, and
its record with it. A decision's apply is not a direct write: the proposal's history records it.

The organisation a record names is the organisation of what was written, as the owner read it behind the caller's
wall (``agent_in``, ``guild_in``, ``org_in``), never a value of the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from types import MappingProxyType

from .. import api, topics
from ..api import Caller, PublicRoute
from ..contracts import WorkspaceWritten
from .uow import UnitOfWork

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""The methods of a route that writes."""


@cache
def _write_routes() -> Mapping[str, PublicRoute]:
    found: dict[str, PublicRoute] = {}
    for route in api.ROUTES:
        if route.method not in WRITE_METHODS:
            continue
        if route.name in found:
            raise ValueError(f"two declared write routes are named {route.name!r}")
        found[route.name] = route
    return MappingProxyType(found)


def write_routes() -> tuple[PublicRoute, ...]:
    """Every declared route that writes, in the registry's order: each records its writes."""
    return tuple(_write_routes().values())


def via(route: PublicRoute) -> str:
    """How a write names the route it came through: its method and public path, ``PUT /api/workspace/...``."""
    return f"{route.method} {route.public_path}"


def write_route(name: str) -> PublicRoute:
    """The declared write route named ``name``; ``KeyError`` for a name that is none."""
    try:
        return _write_routes()[name]
    except KeyError:
        raise KeyError(f"{name!r} is no declared route that writes") from None


def actor_of(caller: Caller, service: str) -> str:
    """Who made a write: the person the call was made for, else (a service's own call) the service."""
    return caller.user or service


async def record_write(
    uow: UnitOfWork,
    route: str,
    *,
    org_id: str,
    kind: str,
    action: str,
    target: str,
    actor: str,
    guild_id: str | None = None,
    agent_id: str | None = None,
    hash_before: str | None = None,
    hash_after: str | None = None,
    detail: str | None = None,
) -> WorkspaceWritten:
    """Record a direct write made through the declared route named ``route``, in ``uow``'s transaction (its outbox):
    what was written (``kind``, ``action``, ``target``), of which organisation, guild and agent, by ``actor``, and the
    target's content hashes before and after where the owner has them. Answers the message emitted."""
    message = WorkspaceWritten(
        org_id=org_id,
        guild_id=guild_id,
        agent_id=agent_id,
        kind=kind,
        action=action,
        target=target,
        actor=actor,
        via=via(write_route(route)),
        at=datetime.now(UTC),
        hash_before=hash_before,
        hash_after=hash_after,
        detail=detail,
    )
    await uow.emit(topics.WORKSPACE_WRITES, org_id, message)
    return message
