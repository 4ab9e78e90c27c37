"""Service credentials: how one Assent service proves to another that a call on its internal API is its own.

The calling service presents ``Authorization: Bearer <token>``: a short-lived HS256 JWT whose ``iss`` names
the caller, whose ``aud`` names the service called, with ``iat``, ``exp`` (about 60 seconds later) and a
``jti``. The owner accepts it only when the signature checks out under the deployment's service key, ``aud``
is its own name, ``iss`` is one of the callers it admits (the gateway) and the token is not expired.

The key is ``ASSENT_SERVICE_KEY``, one per deployment, shared by its services (in Kubernetes the Secret
``assent``), at least 32 bytes. For rotation it may be a comma-separated list: a service signs with the first
key and accepts any of them. Rotate in two redeploys: put the new key first and keep the old one second, roll
out every service; then drop the old one.

Every service of a deployment holds the same key, so ``iss`` tells which service says it is calling, not which
one could have signed; the NetworkPolicy of the Kubernetes base (only the gateway reaches the owners' ports)
is the other half. Neither the key nor a token ever appears in a message raised here.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jwt
from pydantic import SecretStr

ENV = "ASSENT_SERVICE_KEY"
MIN_KEY_BYTES = 32
ALGORITHM = "HS256"
TOKEN_SECONDS = 60
LEEWAY_SECONDS = 5
MAX_TOKEN_SECONDS = 300
"""A token living longer than this (``exp - iat``) is refused whoever signed it."""
REQUIRED_CLAIMS = ["iss", "aud", "iat", "exp", "jti"]

KeyInput = str | bytes | SecretStr | Sequence[str | bytes]


class ServiceKeyError(ValueError):
    """The service key is missing or too short. The message names the variable, never its value."""


class InvalidServiceToken(Exception):
    """A credential was missing or refused. The message says why in general terms, never the token."""


def service_keys(key: KeyInput | None) -> tuple[bytes, ...]:
    """The accepted keys, the signing key first, from a setting (comma-separated) or given keys."""
    if isinstance(key, SecretStr):
        key = key.get_secret_value()
    if isinstance(key, str):
        parts: list[str | bytes] = [part.strip() for part in key.split(",")] if key.strip() else []
    elif isinstance(key, bytes):
        parts = [key]
    elif key is None:
        parts = []
    else:
        parts = list(key)
    keys = tuple(part.encode() if isinstance(part, str) else bytes(part) for part in parts)
    if not keys:
        raise ServiceKeyError(
            f"{ENV} is not set: every Assent service needs the deployment's service key (at least {MIN_KEY_BYTES} "
            "bytes, e.g. from `python -c 'import secrets; print(secrets.token_urlsafe(48))'`), in its environment "
            "or in the Kubernetes Secret `assent`"
        )
    for n, one in enumerate(keys, start=1):
        if len(one) < MIN_KEY_BYTES:
            which = f"key {n} of {len(keys)}" if len(keys) > 1 else "the key"
            raise ServiceKeyError(f"{ENV}: {which} is shorter than {MIN_KEY_BYTES} bytes")
    return keys


class ServiceSigner:
    """Mints this service's tokens for the services it calls, one per audience, renewed before expiry."""

    def __init__(
        self,
        service_name: str,
        key: KeyInput,
        *,
        lifetime: int = TOKEN_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.service_name = service_name
        self._key = service_keys(key)[0]
        self.lifetime = lifetime
        self._clock = clock
        self._cache: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ServiceSigner({self.service_name!r})"

    def token(self, audience: str) -> str:
        """A token for calling ``audience``; the cached one while more than a third of its life remains."""
        now = self._clock()
        with self._lock:
            cached = self._cache.get(audience)
            if cached is not None and cached[1] - now > self.lifetime / 3:
                return cached[0]
            issued = int(now)
            expires = issued + self.lifetime
            claims = {
                "iss": self.service_name,
                "aud": audience,
                "iat": issued,
                "exp": expires,
                "jti": uuid.uuid4().hex,
            }
            token = jwt.encode(claims, self._key, algorithm=ALGORITHM)
            self._cache[audience] = (token, float(expires))
            return token

    def headers(self, audience: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(audience)}"}


class ServiceVerifier:
    """Accepts only tokens for this service, from the callers it admits, signed by an accepted key."""

    def __init__(
        self,
        service_name: str,
        key: KeyInput,
        allowed_callers: Iterable[str],
        *,
        leeway: int = LEEWAY_SECONDS,
    ) -> None:
        self.service_name = service_name
        self._keys = service_keys(key)
        self.allowed_callers = frozenset(allowed_callers)
        self.leeway = leeway

    def __repr__(self) -> str:
        return f"ServiceVerifier({self.service_name!r}, callers={sorted(self.allowed_callers)!r})"

    def verify(self, token: str | None) -> str:
        """The calling service's name, or :class:`InvalidServiceToken`."""
        if not token:
            raise InvalidServiceToken("a service credential is required")
        claims: dict[str, Any] | None = None
        for key in self._keys:
            try:
                claims = jwt.decode(
                    token,
                    key,
                    algorithms=[ALGORITHM],
                    audience=self.service_name,
                    leeway=self.leeway,
                    options={"require": REQUIRED_CLAIMS},
                )
                break
            except jwt.InvalidSignatureError:
                continue
            except jwt.ExpiredSignatureError:
                raise InvalidServiceToken("the service credential has expired") from None
            except jwt.InvalidAudienceError:
                raise InvalidServiceToken("the service credential is for another service") from None
            except jwt.PyJWTError:
                raise InvalidServiceToken("the service credential is malformed") from None
        if claims is None:
            raise InvalidServiceToken("the service credential's signature does not verify")
        caller = claims.get("iss")
        if not isinstance(caller, str) or caller not in self.allowed_callers:
            raise InvalidServiceToken("the service credential names a caller this service does not admit")
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int | float) or not isinstance(exp, int | float) or exp - iat > MAX_TOKEN_SECONDS:
            raise InvalidServiceToken("the service credential lives too long")
        if iat > time.time() + self.leeway:
            raise InvalidServiceToken("the service credential was issued in the future")
        return caller

    def verify_header(self, authorization: str | None) -> str:
        """The caller named by an ``Authorization: Bearer <token>`` header value, or :class:`InvalidServiceToken`."""
        if not authorization:
            raise InvalidServiceToken("a service credential is required")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise InvalidServiceToken("a service credential is required (Authorization: Bearer)")
        return self.verify(token.strip())
