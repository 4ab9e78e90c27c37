"""The public HTTP API, as the CLI calls it: one request per call, and an HTTP answer turned into an exit code.

Exit codes (:data:`EXIT_CODES`) are what scripts may rely on.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from .config import Config

OK = 0
FAILED = 1
"""Anything else: an unexpected answer, an owner that failed to carry a decision out (502), a bad config file."""
USAGE = 2
"""A command line that does not fit (Click's own code)."""
AUTH = 3
"""401: no valid token; 403: the token's roles do not allow it."""
NOT_FOUND = 4
"""404: no such session, request, login, agent or proposal in the token's organisation."""
CONFLICT = 5
"""409: the target changed since it was read (stale), the turn still waits on decisions, a login is not connected
or already answered, or a request with the same Idempotency-Key is still running."""
REFUSED = 6
"""422 (or 400): the request was refused as it stands: already decided, a decision that does not fit, a body that
does not fit, an Idempotency-Key used for another request."""
UNAVAILABLE = 7
"""503, 504, or no answer at all: the gateway or an owner cannot answer now (a 504 decision still stands)."""

EXIT_CODES = {
    OK: "ok",
    FAILED: "failed (anything else)",
    USAGE: "usage",
    AUTH: "not authenticated or not allowed (401, 403)",
    NOT_FOUND: "not found (404)",
    CONFLICT: "conflict: stale, still waiting, or still running (409)",
    REFUSED: "refused (400, 422)",
    UNAVAILABLE: "unavailable or late (503, 504, no answer)",
}


def exit_code(status: int) -> int:
    """The exit code of an HTTP status."""
    if status < 400:
        return OK
    if status in (401, 403):
        return AUTH
    if status == 404:
        return NOT_FOUND
    if status == 409:
        return CONFLICT
    if status in (400, 422):
        return REFUSED
    if status in (503, 504):
        return UNAVAILABLE
    return FAILED


class ApiError(Exception):
    """An answer that is not a success (``status``; ``body`` as the gateway sent it), or no answer (status 0)."""

    def __init__(self, status: int, detail: str, body: Any = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.body = body

    @property
    def code(self) -> int:
        return UNAVAILABLE if self.status == 0 else exit_code(self.status)


def detail_of(body: Any) -> str:
    """The error answer's ``detail`` as one line (a list of invalid fields names each)."""
    if isinstance(body, dict):
        detail = body.get("detail")
        if isinstance(detail, list):
            return "; ".join(f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg', '')}" for d in detail)
        if detail is not None:
            return str(detail)
    return str(body)


class Api:
    """The gateway's public API with the configured token."""

    def __init__(self, config: Config, *, timeout: float = 60.0, transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
        self.http = httpx.Client(base_url=config.url, headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The answer's JSON; :class:`ApiError` for any status of 400 and above, or when the gateway did not answer."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(0, f"no answer from {self.http.base_url}: {exc}") from exc
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if response.status_code >= 400:
            raise ApiError(response.status_code, detail_of(body), body)
        return body

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def decide(self, path: str, body: dict[str, Any] | None = None, key: str | None = None) -> Any:
        """A decision (or Apply all, Decline all), always with an ``Idempotency-Key`` (``key``, or a fresh one): when
        the connection breaks before an answer, the same request is sent once more with the same key, so it is
        decided once."""
        headers = {"Idempotency-Key": key or f"cli-{uuid.uuid4().hex}"}
        try:
            return self.request("POST", path, json=body, headers=headers)
        except ApiError as exc:
            if exc.status != 0:
                raise
            return self.request("POST", path, json=body, headers=headers)
