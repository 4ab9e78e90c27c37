"""Serving declared routes: the FastAPI parameters a declaration implies, and the owner's side of it.

:func:`endpoint` makes one FastAPI endpoint of a :class:`~assent.api.PublicRoute` for either side: its path
parameters, query model, declared headers and body become the endpoint's parameters (so both documents tell the
same schema), and the endpoint hands what was validated to a function. :func:`serve` is the owner's: each
declaration's handler, found by name, is called with the caller (:class:`Caller`), the path parameters by name, and
``query``, ``headers`` and ``body`` where the route has them. A route without a handler, or a handler whose
parameters do not match its declaration, stops the owner as it starts.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote, unquote

from fastapi import APIRouter, Body, Depends, Header, HTTPException, Query, Request

from ..http import PathId
from .declare import ORG_HEADER, ROLES_HEADER, USER_HEADER, PublicRoute, Wall, responses
from .roles import ORG_ROLES, Identity

_ID = r"^[^\x00-\x1f\x7f]+$"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
Call = Callable[[Request, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Caller:
    """Whom an owner answers: the person's organisation, user and roles as the gateway sent them, or ``org`` None
    for a service's own call (no wall applies; the service credential admitted it)."""

    org: str | None
    user: str | None
    roles: frozenset[str]

    @property
    def actor(self) -> str:
        """Who does what the call writes; a write needs it (422 without :data:`USER_HEADER`)."""
        if self.user is None:
            raise HTTPException(422, f"a write names who makes it: {USER_HEADER} is required")
        return self.user

    def identity(self) -> Identity | None:
        """The person, when the call is made for one."""
        if self.org is None or self.user is None:
            return None
        return Identity(self.user, self.org, self.roles)


async def caller(
    org: Annotated[str | None, Header(alias=ORG_HEADER, min_length=1, max_length=600, pattern=_ID)] = None,
    user: Annotated[str | None, Header(alias=USER_HEADER, min_length=1, max_length=600, pattern=_ID)] = None,
    roles: Annotated[str | None, Header(alias=ROLES_HEADER, max_length=200, pattern=_ID)] = None,
) -> Caller:
    """The :class:`Caller` of an internal call, from its headers (percent-encoded, as :func:`caller_headers` sends
    them: a header holds ASCII only); a malformed one is 422, so no wall opens silently."""
    held = frozenset(role for role in (roles or "").split() if role in ORG_ROLES)
    return Caller(_decoded(ORG_HEADER, org), _decoded(USER_HEADER, user), held)


def _decoded(header: str, value: str | None) -> str | None:
    if value is None:
        return None
    decoded = unquote(value)
    if not decoded or len(decoded) > 200 or _CONTROL.search(decoded):
        raise HTTPException(422, f"{header} is not an identifier")
    return decoded


def caller_headers(identity: Identity) -> dict[str, str]:
    """The headers that carry ``identity`` to an owner (read back by :func:`caller`)."""
    headers = {ORG_HEADER: quote(identity.org_id, safe=""), USER_HEADER: quote(identity.user_id, safe="@")}
    if identity.roles:
        headers[ROLES_HEADER] = " ".join(sorted(identity.roles))
    return headers


def header_name(header: str) -> str:
    return header.lower().replace("-", "_")


def parameters(route: PublicRoute) -> list[inspect.Parameter]:
    """The endpoint parameters ``route`` implies: path parameters (ids unless ``params`` types them), ``query``,
    each declared header (optional), and ``body``."""
    found = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=route.params.get(name, PathId))
        for name in route.path_params
    ]
    if route.query is not None:
        found.append(
            inspect.Parameter("query", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[route.query, Query()])
        )
    for header in route.headers:
        found.append(
            inspect.Parameter(
                header_name(header),
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[str | None, Header(alias=header, max_length=500)],
            )
        )
    if route.body is not None:
        found.append(
            inspect.Parameter("body", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[route.body, Body()])
        )
    return found


def endpoint(route: PublicRoute, call: Call, extra: Sequence[inspect.Parameter] = ()) -> Callable[..., Awaitable[Any]]:
    """A FastAPI endpoint for ``route`` that hands the request and the validated values (``extra`` ones too, such
    as the caller) to ``call``; the declared headers arrive as one ``headers`` mapping."""
    headers = {header_name(h): h for h in route.headers}

    async def run(request: Request, **values: Any) -> Any:
        if headers:
            values["headers"] = {header: values.pop(name) for name, header in headers.items()}
        return await call(request, values)

    own = inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request)
    run.__signature__ = inspect.Signature([own, *extra, *parameters(route)])  # type: ignore[attr-defined]  # FastAPI reads it
    run.__name__ = route.name
    run.__doc__ = route.description or None
    return run


def route_options(route: PublicRoute) -> dict[str, Any]:
    """What ``APIRouter.add_api_route`` takes from ``route`` on either side, but the path and the endpoint."""
    extra: dict[str, Any] = {}
    if route.raw_body:
        extra["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
        }
    return {
        "methods": [route.method],
        "status_code": route.status,
        "name": route.name,
        "summary": route.summary,
        "description": route.description,
        "responses": responses(route),
        "response_model": None,
        "tags": [route.tag],
        "openapi_extra": extra or None,
    }


def expected_parameters(route: PublicRoute) -> list[str]:
    """The parameter names of ``route``'s handler on its owner, in order."""
    names = ["caller"] if route.wall is Wall.ORG else []
    names += list(route.path_params)
    names += ["query"] if route.query is not None else []
    names += ["headers"] if route.headers else []
    names += ["body"] if route.has_body else []
    return names


def handler_of(route: PublicRoute, resources: Iterable[object]) -> Callable[..., Awaitable[Any]] | None:
    """The one handler named ``route.name`` among ``resources`` (objects or classes), or None."""
    found = [getattr(resource, route.name) for resource in resources if hasattr(resource, route.name)]
    if len(found) > 1:
        raise RuntimeError(f"{route.name} is handled twice")
    return found[0] if found else None


def mismatches(routes: Iterable[PublicRoute], resources: Sequence[object]) -> list[str]:
    """Why ``resources`` cannot serve ``routes``: each route without a handler, or whose handler takes other
    parameters than its declaration gives (empty when they serve them all)."""
    problems = []
    for route in routes:
        handler = handler_of(route, resources)
        if handler is None:
            problems.append(f"{route.method} {route.path}: no handler {route.name}")
            continue
        taken = [name for name in inspect.signature(handler).parameters if name != "self"]
        if taken != expected_parameters(route):
            problems.append(f"{route.name} takes {taken}; its declaration gives {expected_parameters(route)}")
    return problems


def serve(router: APIRouter, routes: Iterable[PublicRoute], *resources: object) -> None:
    """Add a handler of ``resources`` for each of ``routes`` to the owner's internal ``router``; a route without
    one (or a handler that does not fit its declaration) raises ``RuntimeError`` at start-up."""
    routes = list(routes)
    problems = mismatches(routes, resources)
    if problems:
        raise RuntimeError("the owner does not serve its declared routes: " + "; ".join(problems))
    who = inspect.Parameter("caller", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[Caller, Depends(caller)])
    for route in routes:
        handler = handler_of(route, resources)
        assert handler is not None
        router.add_api_route(
            route.path,
            endpoint(route, _handing_to(route, handler), [who] if route.wall is Wall.ORG else []),
            **route_options(route),
        )


def _handing_to(route: PublicRoute, handler: Callable[..., Awaitable[Any]]) -> Call:
    async def call(request: Request, values: dict[str, Any]) -> Any:
        if route.raw_body:
            values["body"] = await request.body()
        return await handler(**values)

    return call
