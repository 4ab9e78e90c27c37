"""A real OpenID Connect issuer for the tests: an RSA key pair whose JWKS is served over HTTP, and access
tokens minted with it. The gateway verifies them exactly as it verifies a production issuer's (no stub).

It also signs people in as a production issuer does for a browser: a discovery document, an authorization endpoint
(which approves at once, as the person :meth:`TestIssuer.approve_as` names) and a token endpoint that exchanges a
code once, for its redirect URI and the PKCE (S256) verifier of its challenge, answering the console's origin with
CORS headers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

AUDIENCE = "assent-api"
CONSOLE_CLIENT_ID = "assent-console"
"""The console's client at this issuer: public (no secret), authorization code with PKCE."""


def s256(verifier: str) -> str:
    """The PKCE S256 challenge of a verifier: base64url(SHA-256(verifier)) with no padding (RFC 7636 4.2)."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass
class Grant:
    """An authorization code handed out: for whom, to which redirect URI, bound to which challenge."""

    redirect_uri: str
    challenge: str
    user: str
    org: str
    roles: tuple[str, ...]
    expires: float
    used: bool = False


class TestIssuer:
    """Serves ``/jwks.json`` on a free local port; :meth:`mint` signs tokens with the current key."""

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self.keys: list[tuple[str, Any]] = []
        self.minted: list[str] = []
        """Every token handed out: the suite checks that none of them reached a log."""
        self.grants: dict[str, Grant] = {}
        self.signs_in: tuple[str, str, tuple[str, ...]] | None = None
        self.exchanges: list[str] = []
        """The outcome of every code exchange, in order: ``"ok"`` or the OAuth error answered."""
        self.lock = threading.Lock()
        self.rotate()
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path == "/jwks.json":
                    self.answer(200, {"keys": [issuer.public_jwk(kid, key) for kid, key in issuer.keys]}, "*")
                elif url.path == "/.well-known/openid-configuration":
                    self.answer(200, issuer.discovery(), "*")
                elif url.path == "/authorize":
                    status, where = issuer.authorize({k: v[0] for k, v in parse_qs(url.query).items()})
                    if status == 302:
                        self.send_response(302)
                        self.send_header("Location", where)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                    else:
                        self.answer(status, {"error": "invalid_request", "error_description": where})
                else:
                    self.answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                if urlsplit(self.path).path != "/token":
                    self.answer(404, {"error": "not_found"})
                    return
                status, body, allowed = issuer.exchange(form)
                # CORS for the origin of the code's redirect URI only (the web origin of the client that asked).
                sent = self.headers.get("Origin")
                self.answer(status, body, sent if sent and sent == allowed else None)

            def do_OPTIONS(self) -> None:
                self.send_response(204)
                self.send_header("Access-Control-Allow-Origin", self.headers.get("Origin") or "*")
                self.send_header("Access-Control-Allow-Methods", "GET, POST")
                self.send_header("Access-Control-Allow-Headers", "Content-Type, Accept")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def answer(self, status: int, payload: dict[str, Any], cors: str | None = None) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                if cors:
                    self.send_header("Access-Control-Allow-Origin", cors)
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
            "ASSENT_OIDC_CONSOLE_CLIENT_ID": CONSOLE_CLIENT_ID,
        }

    def discovery(self) -> dict[str, Any]:
        """``/.well-known/openid-configuration``, as OpenID Connect Discovery 1.0 shapes it."""
        return {
            "issuer": self.url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "jwks_uri": self.jwks_url,
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": ["openid"],
        }

    def approve_as(self, user: str, org: str, roles: tuple[str, ...] = ("admin",)) -> None:
        """Whom the authorization endpoint signs in from now on (it asks nothing: it approves at once)."""
        self.signs_in = (user, org, roles)

    def authorize(self, query: dict[str, str]) -> tuple[int, str]:
        """The authorization endpoint: ``(302, redirect)`` with a code (or an OAuth error) for the client's redirect
        URI; ``(400, why)`` when the client or its redirect URI is wrong, which must not redirect (RFC 6749 4.1.2.1)."""
        redirect_uri = query.get("redirect_uri", "")
        if query.get("client_id") != CONSOLE_CLIENT_ID:
            return 400, "unknown client_id"
        if urlsplit(redirect_uri).scheme not in ("http", "https") or urlsplit(redirect_uri).fragment:
            return 400, "redirect_uri must be an absolute URL with no fragment"

        def back(**params: str) -> tuple[int, str]:
            if "state" in query:
                params["state"] = query["state"]
            return 302, f"{redirect_uri}{'&' if '?' in redirect_uri else '?'}{urlencode(params)}"

        if query.get("response_type") != "code":
            return back(error="unsupported_response_type")
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            return back(error="invalid_request", error_description="PKCE with S256 is required")
        if self.signs_in is None:
            return back(error="access_denied", error_description="nobody signs in here")
        code = secrets.token_urlsafe(24)
        user, org, roles = self.signs_in
        with self.lock:
            self.grants[code] = Grant(redirect_uri, query["code_challenge"], user, org, roles, time.time() + 60)
        return back(code=code)

    def exchange(self, form: dict[str, str]) -> tuple[int, dict[str, Any], str | None]:
        """The token endpoint: ``(status, body, the web origin allowed to read it)``. A code works once, before it
        expires, for the redirect URI and client it was issued to and the verifier of its challenge."""
        with self.lock:
            grant = self.grants.get(form.get("code", ""))
            allowed = origin(grant.redirect_uri) if grant else None
            if form.get("grant_type") != "authorization_code":
                error = "unsupported_grant_type"
            elif grant is None or grant.used or grant.expires < time.time():
                error = "invalid_grant"
            elif form.get("client_id") != CONSOLE_CLIENT_ID:
                error = "invalid_client"
            elif form.get("redirect_uri") != grant.redirect_uri:
                error = "invalid_grant"
            elif not hmac.compare_digest(s256(form.get("code_verifier", "")), grant.challenge):
                error = "invalid_grant"
            else:
                error = None
            if grant is not None:
                grant.used = True  # one try per code, whatever its outcome
            self.exchanges.append(error or "ok")
        if error is not None or grant is None:
            return 400, {"error": error}, allowed
        token = self.mint(grant.user, grant.org, grant.roles)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600, "scope": "openid"}, allowed

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
