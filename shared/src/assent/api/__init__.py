"""The public HTTP API's routes, each declared once by the service that owns its data.

A route is a :class:`PublicRoute` in its owner's contract package (:mod:`assent.owners`), with its request and answer
models: the owner serves it with :func:`serve`, and the gateway mounts every route of :data:`ROUTES` at the one
public address with the same authentication, permission check and error body, and no code of its own for any of
them. Adding or changing an owner's route is an edit in the owner's contract and its handler, none in the gateway.

:data:`ROUTES` (every installed owner's routes, in the contracts' order), :data:`OWNERS` (each owner's) and
:data:`FEEDS` (the owners' activity feeds that the public activity feed merges) are made the first time one is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .declare import (
    ORG_HEADER,
    ROLES_HEADER,
    USER_HEADER,
    Error,
    Feed,
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

if TYPE_CHECKING:  # made on first reading, by __getattr__ below
    ROUTES: tuple[PublicRoute, ...]
    """Every owner's public routes."""
    FEEDS: tuple[Feed, ...]
    OWNERS: Mapping[str, tuple[PublicRoute, ...]]


@cache
def _registry() -> dict[str, Any]:
    from ..owners import contracts  # the contracts import this package

    routes = tuple(route for contract in contracts() for route in contract.routes)
    owners = {owner: tuple(r for r in routes if r.owner == owner) for owner in dict.fromkeys(r.owner for r in routes)}
    return {
        "ROUTES": routes,
        "FEEDS": tuple(feed for contract in contracts() for feed in contract.feeds),
        "OWNERS": MappingProxyType(owners),
    }


def __getattr__(name: str) -> Any:
    if name in ("ROUTES", "FEEDS", "OWNERS"):
        return _registry()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def routes_of(owner: str) -> tuple[PublicRoute, ...]:
    owners: Mapping[str, tuple[PublicRoute, ...]] = _registry()["OWNERS"]
    return owners.get(owner, ())


__all__ = [
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
