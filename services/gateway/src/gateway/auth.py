"""Who is asking: bearer tokens of people, verified and turned into an :class:`~gateway.domain.roles.Identity`.

Two kinds of token are accepted:

- **OpenID Connect access tokens** (JWT) from the configured issuer: the signature is verified against the
  issuer's JWKS (fetched, cached, and fetched again when a token names a key id not seen yet, so the issuer can
  rotate keys), then the issuer, the audience and the expiry. The user, the organisation and the roles come
  from configurable claims (``ASSENT_OIDC_USER_CLAIM``, ``..._ORG_CLAIM``, ``..._ROLES_CLAIM``).
- **Static tokens** (``ASSENT_API_TOKENS``), for ``make run`` and tests: each names a user, an organisation and
  roles, ``{"<token>": {"user": "olga@acme.example", "org": "acme", "roles": ["admin"]}}``.

Anything else is :class:`Unauthenticated` (401 with ``WWW-Authenticate``). No token, key or claim value is
logged or put in an answer.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any

import jwt
from jwt import PyJWKClient

from .domain.roles import ORG_ROLES, Identity
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
