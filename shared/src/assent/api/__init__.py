"""The public HTTP API's routes, each declared once by the service that owns its data.

A route is a :class:`PublicRoute` in its owner's module here (:mod:`.workspace` for edits, :mod:`.source` and
:mod:`.deploys` for the deployer), with its request and answer models: the owner serves it with
:func:`serve`, and the gateway mounts every route of :data:`ROUTES` at the one public address with the same
authentication, permission check and error body, and no code of its own for any of them. Adding or changing an
owner's route is an edit here and in the owner's handler, none in the gateway.

:data:`FEEDS` are the owners' activity feeds that the public activity feed merges; :data:`DECISION_OPTIONS` the
models of the choices a decision of theirs takes besides itself (a source approval's branch), which the gateway's
decision routes take as the kind registry names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from . import access, collections, connections, deploys, drafts, routines, source, workspace
from .declare import (
    ORG_HEADER,
    ROLES_HEADER,
    USER_HEADER,
    Error,
    Invalid,
    PublicRoute,
    QueryModel,
    RequestModel,
    Wall,
    error_statuses,
    responses,
)
from .roles import Identity, Permission
from .serve import Caller, caller, caller_headers, endpoint, expected_parameters, mismatches, route_options, serve

ROUTES: tuple[PublicRoute, ...] = (
    *workspace.ROUTES,
    *collections.ROUTES,
    *source.ROUTES,
    *deploys.ROUTES,
    *routines.ROUTES,
    *connections.ROUTES,
    *access.ROUTES,
    *drafts.ROUTES,
)
"""Every owner's public routes."""


@dataclass(frozen=True)
class Feed:
    """An owner's entries of the public activity feed, at ``/internal`` + ``path`` (``?limit=&agent_id=``, for the
    caller's organisation): ``{"entries": [{"who", "what", "when", ...}]}``."""

    owner: str
    path: str


FEEDS: tuple[Feed, ...] = (Feed(source.OWNER, "/activity"),)

DECISION_OPTIONS: Mapping[str, type[RequestModel]] = MappingProxyType(
    {model.__name__: model for model in source.DECISION_OPTIONS}
)
"""The owners' models of a decision's options, by name (:attr:`assent.kinds.Options.model`)."""


def routes_of(owner: str) -> tuple[PublicRoute, ...]:
    return tuple(route for route in ROUTES if route.owner == owner)


OWNERS: Mapping[str, tuple[PublicRoute, ...]] = MappingProxyType(
    {owner: routes_of(owner) for owner in dict.fromkeys(route.owner for route in ROUTES)}
)

__all__ = [
    "DECISION_OPTIONS",
    "FEEDS",
    "ORG_HEADER",
    "OWNERS",
    "ROLES_HEADER",
    "ROUTES",
    "USER_HEADER",
    "Caller",
    "Error",
    "Feed",
    "Identity",
    "Invalid",
    "Permission",
    "PublicRoute",
    "QueryModel",
    "RequestModel",
    "Wall",
    "caller",
    "caller_headers",
    "endpoint",
    "error_statuses",
    "expected_parameters",
    "mismatches",
    "responses",
    "route_options",
    "routes_of",
    "serve",
]
