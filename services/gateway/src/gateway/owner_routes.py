"""The owners' public routes, mounted from their declarations (:data:`assent.api.ROUTES`) by one function.

For each declared route the gateway serves its public path with the declared parameters, body and answers (so the
public document tells them), authenticates the person, checks the declared permission (:class:`~gateway.auth.Gate`)
and passes the call on to the owner: the path with each id as one segment, the validated query, the body's exact
bytes, the person's organisation, user and roles (the owner enforces the organisation's wall), and any header the
route declares. The owner's answer goes back as it came; an owner that does not answer is 503. Nothing here names a
kind, an owner or a route.

A ``GET`` whose answer model declares ``resolution`` (:class:`assent.api.resolution.Resolution`: a Task draft, a
source proposal) reads a proposal: once it is decided, the gateway fills that field from its projection (the
decisions taken on it, the outcome and its reason, what the coach was told), as its own cards show it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from assent.api import Identity, Permission, PublicRoute, Wall, caller_headers, endpoint, route_options
from assent.api.serve import Call

from .adapters.owners import Owners, segment
from .auth import Gate

Resolved = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]
"""The resolution (as JSON) of the decided proposal that an owner's answer reads, for an organisation; None if none."""


def mount(
    app: FastAPI, routes: Iterable[PublicRoute], gate: Gate, owners: Owners, resolved: Resolved | None = None
) -> None:
    """Serve ``routes`` on ``app``: one router per resource (a route's tag), one endpoint per route; ``resolved``
    fills the ``resolution`` of a read whose answer model declares one."""
    person = inspect.Parameter(
        "identity", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[Identity, Depends(gate.person)]
    )
    routers: dict[str, APIRouter] = {}
    for route in routes:
        router = routers.setdefault(route.tag, APIRouter())
        extra = [person] if route.wall is Wall.ORG else []
        router.add_api_route(
            route.public_path, endpoint(route, passing_on(route, gate, owners, resolved), extra), **route_options(route)
        )
    for router in routers.values():
        app.include_router(router)


def reads_resolution(route: PublicRoute) -> bool:
    """Whether ``route`` reads a proposal whose resolution the gateway fills in (a GET whose answer declares one)."""
    fields = getattr(route.response, "model_fields", {})
    return route.method == "GET" and "resolution" in fields


def passing_on(route: PublicRoute, gate: Gate, owners: Owners, resolved: Resolved | None = None) -> Call:
    """What the gateway does for ``route``: check the permission, then ask its owner for the person."""
    fill = resolved if resolved is not None and reads_resolution(route) else None

    async def call(request: Request, values: dict[str, Any]) -> JSONResponse:
        identity: Identity | None = values.get("identity")
        headers: dict[str, str] = {}
        if identity is not None:
            await gate.check(identity, route.permission, values.get(route.agent))
            headers.update(caller_headers(identity))
        headers.update({name: value for name, value in values.get("headers", {}).items() if value is not None})
        path = route.internal_path.format(**{name: segment(str(values[name])) for name in route.path_params})
        query = values.get("query")
        if query is not None:
            path = f"{path}?{urlencode(query.model_dump(mode='json', exclude_none=True))}"
        content = await request.body() if route.has_body else None
        reply = await owners.call(route.owner, route.method, path, headers=headers, content=content)
        # An owner's 401 means the gateway's credential was refused (503); a signed route's refusal comes as 403.
        status = 401 if route.permission is Permission.SIGNED and reply.status == 403 else reply.status
        body = reply.body
        if fill is not None and identity is not None and status == 200 and isinstance(body, dict):
            body = {**body, "resolution": await fill(identity.org_id, body)}
        return JSONResponse(body, status_code=status)

    return call
