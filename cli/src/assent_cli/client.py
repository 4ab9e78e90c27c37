"""The public HTTP API, as the CLI calls it: one request per call, and an HTTP answer turned into an exit code
(:class:`~assent_cli.exit_codes.ExitCode`, which scripts may rely on).

Two answers are read as a wrong setting rather than as the API's: a 401 (the message says how to give a token, or
that the one given was refused), and an answer that is not Assent's API at all (a path after the gateway's base
URL, another server): a 404 that no route of the API gave, or a page where JSON was due. Then the CLI asks the same
base URL for the API's document (``/openapi.json``); when that is not Assent's either, the command ends with
:attr:`~assent_cli.exit_codes.ExitCode.USAGE` and the URL to give.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit

import httpx

from .config import DEFAULT_URL, Config
from .exit_codes import ExitCode

ASSENT_PATH = "/api/studio/sessions"
"""A path the API's document lists whatever else changes: how the CLI knows the base URL serves Assent's API."""
NO_ROUTE = "Not Found"
"""The ``detail`` of the web framework's 404 for a path that no route serves (the API's own 404s say what is
missing)."""


def exit_code(status: int) -> ExitCode:
    """The exit code of an HTTP status."""
    return ExitCode.of_status(status)


class Failure(Exception):
    """The CLI's own finding that ends a command with ``code`` (no HTTP answer says it as it stands)."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ApiError(Exception):
    """An answer that is not a success (``status``; ``body`` as the gateway sent it), or no answer (status 0).
    ``hint``: what to do about it, when the CLI can tell."""

    def __init__(self, status: int, detail: str, body: Any = None, hint: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.body = body
        self.hint = hint

    @property
    def code(self) -> ExitCode:
        return ExitCode.UNAVAILABLE if self.status == 0 else exit_code(self.status)


def detail_of(body: Any) -> str:
    """The error answer's ``detail`` as one line (a list of invalid fields names each)."""
    if isinstance(body, dict):
        detail = body.get("detail")
        if isinstance(detail, list):
            return "; ".join(f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg', '')}" for d in detail)
        if detail is not None:
            return str(detail)
    return str(body)


def token_hint(config: Config) -> str:
    """What to do about a 401: give a token (there was none), or know which one was refused."""
    file = config.file or "the config file"
    if config.token_from is None:
        return (
            f'no token was given: pass --token TOKEN, set ASSENT_TOKEN, or write token = "TOKEN" in {file} '
            f"(--config or ASSENT_CONFIG names another file)"
        )
    return (
        f"the token from {config.token_from} was refused: give a valid one with --token, ASSENT_TOKEN or the "
        f"config file ({file})"
    )


class Api:
    """The gateway's public API with the configured token."""

    def __init__(self, config: Config, *, timeout: float = 60.0, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
        self.http = httpx.Client(base_url=config.url, headers=headers, timeout=timeout, transport=transport)
        self._is_assent: bool | None = None
        self._kinds: dict[str, Any] | None = None

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, *, check_url: bool = True, **kwargs: Any) -> Any:
        """The answer's JSON; :class:`ApiError` for any status of 400 and above, or when the gateway did not answer;
        :class:`Failure` (usage) when what answered is not Assent's API (unless ``check_url`` is false: a caller
        that expects the framework's 404 of a path no route serves)."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(0, f"no answer from {self.http.base_url}: {exc}") from exc
        try:
            body = response.json()
        except ValueError:
            body = None
        if check_url and not self._from_the_api(response, body):
            self._check_base_url(method, path, response)
        if body is None:
            body = response.text
            if response.status_code >= 400:
                raise ApiError(response.status_code, response.reason_phrase or "an answer that is not JSON", body)
        if response.status_code >= 400:
            hint = token_hint(self.config) if response.status_code == 401 else None
            raise ApiError(response.status_code, detail_of(body), body, hint)
        return body

    @staticmethod
    def _from_the_api(response: httpx.Response, body: Any) -> bool:
        """Whether the answer reads as one of the API's: JSON, and no 404 of a path that no route serves. (5xx is
        left as it came: a proxy's error page in front of the gateway says the gateway is not there now.)"""
        if response.status_code >= 500:
            return True
        if body is None:
            return False
        return not (response.status_code == 404 and isinstance(body, dict) and body.get("detail") == NO_ROUTE)

    def _check_base_url(self, method: str, path: str, response: httpx.Response) -> None:
        """:class:`Failure` (usage) when the base URL does not serve Assent's API document: the answer to ``path``
        was not the API's."""
        if self._is_assent is None:
            try:
                probe = self.http.get("/openapi.json")
                document = probe.json() if probe.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                document = None
            self._is_assent = isinstance(document, dict) and ASSENT_PATH in (document.get("paths") or {})
        if self._is_assent:
            return
        url, source = self.config.url, self.config.url_from
        parts = urlsplit(url)
        base = f"{parts.scheme}://{parts.netloc}" if parts.path not in ("", "/") else DEFAULT_URL
        kind = response.headers.get("content-type", "").split(";")[0] or "no content type"
        raise Failure(
            ExitCode.USAGE,
            f"{url} (from {source}) answers, but not as Assent's API: {method} {path} gave "
            f"{response.status_code} {response.reason_phrase} ({kind}). Give the gateway's base URL, with no path "
            f"after it, e.g. {base}, with --url, ASSENT_URL or url in the config file",
        )

    def get(self, path: str, *, check_url: bool = True, **params: Any) -> Any:
        return self.request("GET", path, check_url=check_url, params={k: v for k, v in params.items() if v is not None})

    def kinds(self) -> dict[str, Any]:
        """The kind registry as the gateway's console decides with it (``/console/kinds.json``): per kind the endpoint
        that decides it and its apply and decline decisions."""
        if self._kinds is None:
            self._kinds = self.get("/console/kinds.json")["kinds"]
        return self._kinds

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
