"""Who is asking, and whether they may: bearer tokens of people, verified and turned into an
:class:`~assent.api.Identity`, and the check of a route's :class:`~assent.api.Permission`.

Two kinds of token are accepted:

- **OpenID Connect access tokens** (JWT) from the configured issuer: the signature is verified against the
  issuer's JWKS (fetched, cached, and fetched again when a token names a key id not seen yet, so the issuer can
  rotate keys), then the issuer, the audience and the expiry. The user, the organisation and the roles come
  from configurable claims (``ASSENT_OIDC_USER_CLAIM``, ``..._ORG_CLAIM``, ``..._ROLES_CLAIM``).
- **Static tokens** (``ASSENT_API_TOKENS``), for ``make run`` and tests: each names a user, an organisation and
  roles, ``{"<token>": {"user": "olga@acme.example", "org": "acme", "roles": ["admin"]}}``.

Anything else is :class:`Unauthenticated` (401 with ``WWW-Authenticate``). No token, key or claim value is
logged or put in an answer. :class:`Gate` is what every public route depends on: the person (401 without a valid
token, 403 without any role) and their permission (403; 404 for an agent the organisation does not hold).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import jwt
from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from jwt import PyJWKClient

from assent.api import Identity, Permission
from assent.api.roles import ORG_ROLES
from assent.domain import Agent

from .settings import GatewaySettings

log = logging.getLogger(__name__)


class Unauthenticated(Exception):
    """The request carries no valid token; ``reason`` is safe to show (it names no secret)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Authenticator:
    def __init__(self, settings: GatewaySettings) -> None:
        self.static = {
            token: Identity(entry.user, entry.org, frozenset(entry.roles))
            for token, entry in settings.api_tokens.items()
        }
        self.settings = settings
        self.jwks = (
            PyJWKClient(
                settings.oidc_jwks_url,
                cache_keys=True,
                lifespan=settings.oidc_jwks_cache_seconds,
                cooldown_duration=settings.oidc_jwks_refresh_cooldown_seconds,
                timeout=5,
            )
            if settings.oidc_jwks_url
            else None
        )

    async def identify(self, token: str | None) -> Identity:
        if not token:
            raise Unauthenticated("a bearer token is required")
        for known, identity in self.static.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return identity
        if self.jwks is None or token.count(".") != 2:
            raise Unauthenticated("the token is not valid")
        return await self._verify(token)

    async def _verify(self, token: str) -> Identity:
        s = self.settings
        assert self.jwks is not None
        try:
            # The JWKS client blocks on the network when it has to fetch; keep that off the event loop.
            key = await asyncio.to_thread(self.jwks.get_signing_key_from_jwt, token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=list(s.oidc_algorithms),
                audience=s.oidc_audience,
                issuer=s.oidc_issuer,
                options={"require": ["exp", "iss", "aud"]},
                leeway=s.oidc_leeway_seconds,
            )
        except jwt.ExpiredSignatureError as exc:
            raise Unauthenticated("the token has expired") from exc
        except jwt.InvalidAudienceError as exc:
            raise Unauthenticated("the token is not meant for this API (audience)") from exc
        except jwt.InvalidIssuerError as exc:
            raise Unauthenticated("the token comes from another issuer") from exc
        except jwt.PyJWKClientError as exc:
            raise Unauthenticated("the token's signing key is unknown") from exc
        except jwt.InvalidTokenError as exc:
            raise Unauthenticated("the token is not valid") from exc
        user, org, roles = claims.get(s.oidc_user_claim), claims.get(s.oidc_org_claim), claims.get(s.oidc_roles_claim)
        if not isinstance(user, str) or not user or not isinstance(org, str) or not org:
            raise Unauthenticated("the token names no user or no organisation")
        if isinstance(roles, str):
            roles = roles.split()
        if not isinstance(roles, list):
            roles = []
        return Identity(user, org, frozenset(r for r in roles if isinstance(r, str) and r in ORG_ROLES))


bearer = HTTPBearer(auto_error=False, description="An API token of the operator")


class AgentNotFound(LookupError):
    """The caller's organisation holds no such agent (answered 404, as the owner would)."""


class Gate:
    """Who asks (:meth:`person`, a FastAPI dependency) and whether they may (:meth:`check`).

    A permission held on an agent (:attr:`Permission.on_agent`) is decided from the gateway's copy of the
    workspace (``agent_of``) only when the role alone does not grant it: an agent the copy does not hold in the
    caller's organisation is :class:`AgentNotFound`, one the caller neither owns nor edits is 403.
    """

    def __init__(self, authenticator: Authenticator, agent_of: Callable[[str], Awaitable[Agent | None]]) -> None:
        self.authenticator = authenticator
        self.agent_of = agent_of

    async def person(self, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Identity:
        """Who asks, from their bearer token; 401 without a valid one, 403 without any role."""
        try:
            identity = await self.authenticator.identify(credentials.credentials if credentials is not None else None)
        except Unauthenticated as exc:
            raise HTTPException(401, exc.reason, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}) from None
        if not identity.may_read():
            raise HTTPException(403, Permission.READ.refusal)
        return identity

    async def check(self, identity: Identity, permission: Permission, agent_id: str | None = None) -> None:
        """Raise 403 (or :class:`AgentNotFound`) unless ``identity`` holds ``permission`` (on ``agent_id``)."""
        if identity.may(permission):
            return
        if permission.on_agent and agent_id is not None:
            agent = await self.agent_of(agent_id)
            if agent is None or agent.org_id != identity.org_id:
                raise AgentNotFound(f"agent {agent_id!r} does not exist")
            if identity.may(permission, agent.owners, agent.editors):
                return
        raise HTTPException(403, permission.refusal)
