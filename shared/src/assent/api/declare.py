"""A public route, declared once beside the data it serves, and the error body every route answers with.

A :class:`PublicRoute` says everything both sides need: the owner that serves it, its method and path, its body,
query and response models, the :class:`~assent.api.roles.Permission` a person needs, the organisation's wall, its
success status and the error statuses it answers. The owner answers it on its internal API
(:func:`assent.api.serve`, at ``/internal`` + ``path``); the gateway serves it at the one public address
(``prefix`` + ``path``), authenticates the person, checks the permission and passes the call on with the person's
organisation, user and roles (:data:`ORG_HEADER`, :data:`USER_HEADER`, :data:`ROLES_HEADER`). Neither side writes a
route by hand, and the body is validated on both with the one model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from .roles import Permission

ORG_HEADER = "X-Assent-Org"
"""The organisation of the person a call is made for: the owner answers 404 for another organisation's entities."""
USER_HEADER = "X-Assent-User"
"""The person's user id: who did it (``updated_by``, revisions, change logs)."""
ROLES_HEADER = "X-Assent-Roles"
"""The person's organisation roles, space-separated (for an answer that depends on them, such as the builder
chat's ``shown``)."""

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]


class Wall(Enum):
    """Whose data a route shows."""

    ORG = "the caller's organisation"
    """Only the caller's organisation's: another organisation's entity answers 404, as a missing one does."""
    NONE = "no organisation"
    """No person calls it (a provider's webhook): what it reaches is found from the request itself."""


def no_null_default(schema: dict[str, Any]) -> None:
    """Drop ``"default": null`` from a property whose schema does not allow null (a field that may be left out but
    not sent as null): a client reading the document must not send the default back and get a 422."""
    for prop in schema.get("properties", {}).values():
        branches = [prop, *prop.get("anyOf", []), *prop.get("oneOf", [])]
        if "default" in prop and prop["default"] is None and not any(b.get("type") == "null" for b in branches):
            del prop["default"]


class RequestModel(BaseModel):
    """A request body: what its JSON Schema says and nothing else. Unknown fields are refused (422), no value is
    coerced into another type (``0`` is not ``false``), and the schema holds no default it refuses."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=no_null_default)


class QueryModel(BaseModel):
    """A route's query parameters (others are ignored; each arrives as text, so numbers are read from it); its JSON
    Schema holds no default it refuses."""

    model_config = ConfigDict(json_schema_extra=no_null_default)


@dataclass(frozen=True)
class Matching:
    """A string that matches ``pattern`` (a JSON Schema pattern with look-ahead, which pydantic's own patterns
    cannot hold), checked with Python's ``re`` and refused as "must be ``what``"."""

    pattern: str
    what: str

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        compiled = re.compile(self.pattern)

        def check(value: str) -> str:
            if compiled.fullmatch(value) is None:
                raise PydanticCustomError("pattern_mismatch", "must be {what}", {"what": self.what})
            return value

        return core_schema.no_info_after_validator_function(check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["pattern"] = self.pattern
        return json_schema


class KeysMatch:
    """A map's JSON Schema whose every key matches ``patterns`` (``propertyNames``): pydantic states a key's pattern
    as ``patternProperties`` alone, which leaves any other key allowed, and states a key checked by a function as
    nothing at all."""

    def __init__(self, *patterns: str, max_length: int) -> None:
        self.keys: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": max_length}
        if len(patterns) == 1:
            self.keys["pattern"] = patterns[0]
        else:
            self.keys["allOf"] = [{"pattern": pattern} for pattern in patterns]

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        values = json_schema.pop("patternProperties", None)
        if values:
            (value,) = values.values()
            json_schema["additionalProperties"] = value
        json_schema["propertyNames"] = self.keys
        return json_schema


class Invalid(BaseModel):
    """One problem with a request: where (``loc``: ``body``, ``query``, ``path`` or ``header``, then the field's
    path), what (``msg``) and which rule (``type``)."""

    model_config = ConfigDict(extra="allow")
    loc: list[str | int]
    msg: str
    type: str


class Error(BaseModel):
    """Every error answer: ``detail`` says why, as text or (for a request that does not fit its schema) as one
    :class:`Invalid` per problem. Some answers add ``code`` (the rule that refused), ``retry`` (true: trying again
    shortly may succeed; with a ``Retry-After`` header), ``error_id`` (an unexpected failure, as the log names it)
    or ``decision_id`` (a decision that was sent and still stands)."""

    model_config = ConfigDict(extra="allow")
    detail: str | list[Invalid]
    code: str | None = None
    retry: bool | None = None
    error_id: str | None = None
    decision_id: str | None = None


COMMON_ERRORS: Mapping[int, str] = MappingProxyType(
    {
        401: "No valid bearer token (``WWW-Authenticate: Bearer``)",
        403: "The token's role may not do this",
        422: "The request does not fit its schema: ``detail`` lists each problem",
        503: "A service or its database is unavailable; ``retry: true`` when trying again shortly may succeed",
    }
)
"""What any route of a person may answer besides its own errors."""
BODY_ERRORS: Mapping[int, str] = MappingProxyType(
    {400: "The body could not be read as JSON (not UTF-8)", 408: "The request's body did not arrive in time"}
)

_PARAM = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class PublicRoute:
    """One public route of an owner.

    ``path`` is the owner's: the owner serves it at ``/internal`` + ``path`` and the public at ``prefix`` +
    ``path``. ``name`` names the owner's handler (:func:`assent.api.serve` finds it by that name) and the operation.
    ``agent`` is the path parameter that names the agent whose owners and editors hold ``permission`` (when it is
    one that is held on an agent). ``errors`` are the route's own error statuses (the common ones are added:
    :func:`error_statuses`); ``rules`` says what the owner refuses with 422 beyond what the schema can say (a
    file's contents, a remote that must answer, a byte cap that is a setting). ``params`` types path parameters
    other than an id. ``headers`` are request headers passed on as they are, and ``raw_body`` passes the body's
    exact bytes (a provider's signed webhook) instead of a validated model.
    """

    owner: str
    method: Method
    path: str
    name: str
    summary: str
    permission: Permission
    tag: str
    prefix: str = "/api/workspace"
    body: Any = None
    query: type[BaseModel] | None = None
    response: Any = None
    status: int = 200
    errors: Mapping[int, str] = field(default_factory=dict)
    rules: str = ""
    wall: Wall = Wall.ORG
    agent: str = "agent_id"
    params: Mapping[str, Any] = field(default_factory=dict)
    headers: tuple[str, ...] = ()
    raw_body: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if self.permission.on_agent and self.agent not in self.path_params:
            raise ValueError(f"{self.name}: {self.permission} needs the agent's id in the path ({{{self.agent}}})")
        if (self.wall is Wall.NONE) != (self.permission is Permission.SIGNED):
            raise ValueError(f"{self.name}: only a signed route has no wall, and it has no person's permission")

    @property
    def path_params(self) -> tuple[str, ...]:
        return tuple(_PARAM.findall(self.path))

    @property
    def public_path(self) -> str:
        return self.prefix + self.path

    @property
    def internal_path(self) -> str:
        return "/internal" + self.path

    @property
    def has_body(self) -> bool:
        return self.body is not None or self.raw_body


@dataclass(frozen=True)
class Feed:
    """An owner's entries of the public activity feed, at ``/internal`` + ``path`` (``?limit=&agent_id=``, for the
    caller's organisation): ``{"entries": [{"who", "what", "when", ...}]}``."""

    owner: str
    path: str


def error_statuses(route: PublicRoute) -> dict[int, str]:
    """Every error status ``route`` answers, with when: the common ones, then its own (which may say more)."""
    common = dict(COMMON_ERRORS) if route.wall is Wall.ORG else {422: COMMON_ERRORS[422], 503: COMMON_ERRORS[503]}
    if route.has_body:
        common.update(BODY_ERRORS)
    if route.rules:
        common[422] = f"{common[422]}; or the owner's rules refuse it: {route.rules}"
    return dict(sorted({**common, **route.errors}.items()))


def responses(route: PublicRoute) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of ``route``: its success model and every error status with :class:`Error`."""
    answers: dict[int | str, dict[str, Any]] = {
        status: {"model": Error, "description": why} for status, why in error_statuses(route).items()
    }
    if route.response is not None:
        answers[route.status] = {"model": route.response}
    return answers
