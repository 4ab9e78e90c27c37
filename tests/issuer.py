"""A real OpenID Connect issuer for the tests: an RSA key pair whose JWKS is served over HTTP, and access
tokens minted with it. The gateway verifies them exactly as it verifies a production issuer's (no stub)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

AUDIENCE = "assent-api"


class TestIssuer:
    """Serves ``/jwks.json`` on a free local port; :meth:`mint` signs tokens with the current key."""

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self.keys: list[tuple[str, Any]] = []
        self.minted: list[str] = []
        """Every token handed out: the suite checks that none of them reached a log."""
        self.rotate()
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps({"keys": [issuer.public_jwk(kid, key) for kid, key in issuer.keys]}).encode()
                self.send_response(200 if self.path == "/jwks.json" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks.json"

    def env(self) -> dict[str, str]:
        """What the gateway needs to trust this issuer."""
        return {
            "ASSENT_OIDC_ISSUER": self.url,
            "ASSENT_OIDC_AUDIENCE": AUDIENCE,
            "ASSENT_OIDC_JWKS_URL": self.jwks_url,
            "ASSENT_OIDC_JWKS_REFRESH_COOLDOWN_SECONDS": "1",
        }

    def rotate(self) -> None:
        """Add a new signing key (the next tokens use it); the JWKS keeps publishing the old ones."""
        self.keys.append((uuid.uuid4().hex[:12], rsa.generate_private_key(public_exponent=65537, key_size=2048)))

    @staticmethod
    def public_jwk(kid: str, key: Any) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        return {**jwk, "kid": kid, "use": "sig", "alg": "RS256"}

    def mint(
        self,
        user: str,
        org: str,
        roles: tuple[str, ...] = ("admin",),
        *,
        audience: str = AUDIENCE,
        issuer: str | None = None,
        expires_in: float = 3600,
        key: Any = None,
        kid: str | None = None,
    ) -> str:
        now = int(time.time())
        current_kid, current_key = self.keys[-1]
        claims = {
            "iss": issuer or self.url,
            "aud": audience,
            "sub": user,
            "org_id": org,
            "roles": list(roles),
            "iat": now,
            "exp": now + int(expires_in),
        }
        token = jwt.encode(claims, key or current_key, algorithm="RS256", headers={"kid": kid or current_kid})
        self.minted.append(token)
        return token


_issuer: TestIssuer | None = None


def test_issuer() -> TestIssuer:
    """The suite's one issuer, started on first use."""
    global _issuer
    if _issuer is None:
        _issuer = TestIssuer()
    return _issuer


test_issuer.__test__ = False  # type: ignore[attr-defined]
