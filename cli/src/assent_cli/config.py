"""Where the gateway is and which token to present: options, then environment variables, then the config file.

The config file is TOML (by default ``$XDG_CONFIG_HOME/assent/config.toml``, else ``~/.config/assent/config.toml``;
``--config`` or ``ASSENT_CONFIG`` names another)::

    url = "http://127.0.0.1:8100"
    token = "..."

``ASSENT_URL`` and ``ASSENT_TOKEN`` win over the file; ``--url`` and ``--token`` over both.

The URL is the gateway's base URL with its scheme: ``http://host:port`` or ``https://host``. One written without a
scheme (``127.0.0.1:8100``) is refused at once (:class:`BadUrl`) with the URL to write, rather than taken as
``http://``: every request carries the bearer token, and guessing plain HTTP for a gateway served over TLS would
send that token over the network in clear text (or fail against a port that speaks only TLS, in a way that reads
like an outage). Writing the seven characters once costs less than a guess that leaks a credential.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_URL = "http://127.0.0.1:8100"


class ConfigError(Exception):
    """The config file cannot be read, or says something it may not."""


class BadUrl(ConfigError):
    """The gateway's URL does not fit (no scheme, not HTTP, no host); the message says what to write."""


@dataclass(frozen=True)
class Config:
    url: str
    token: str | None
    file: Path | None = None
    """The config file consulted (the default one, whether or not it exists); None when none was."""
    url_from: str = "the default"
    """Where the URL came from: ``--url``, ``ASSENT_URL``, the config file, or the default."""
    token_from: str | None = None
    """Where the token came from: ``--token``, ``ASSENT_TOKEN`` or the config file; None: no token was given."""


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "assent" / "config.toml"


def check_url(url: str, source: str) -> str:
    """``url`` without a trailing slash; :class:`BadUrl` (naming ``source``) when it has no ``http://`` or
    ``https://`` scheme or no host."""
    if "://" not in url:
        written = url.removeprefix("//").rstrip("/")
        raise BadUrl(
            f"the gateway URL {url!r} (from {source}) has no scheme: write http://{written} "
            f"(or https://{written} where the gateway is served over TLS)"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadUrl(
            f"the gateway URL {url!r} (from {source}) must be http:// or https:// and a host, as in {DEFAULT_URL}"
        )
    return url.rstrip("/")


def load(path: str | None = None, url: str | None = None, token: str | None = None) -> Config:
    """The settings in force: ``url``/``token`` (options), else the environment, else the file at ``path`` (or
    ``ASSENT_CONFIG``, or :func:`default_path`; a missing default file is no error, a missing named one is).
    :class:`BadUrl` when the URL in force does not fit."""
    named = path or os.environ.get("ASSENT_CONFIG")
    file = Path(named) if named else default_path()
    values: dict[str, object] = {}
    if file.exists():
        try:
            values = tomllib.loads(file.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{file}: {exc}") from exc
    elif named:
        raise ConfigError(f"{file}: no such file")
    unknown = set(values) - {"url", "token"}
    if unknown:
        raise ConfigError(f"{file}: unknown setting {', '.join(sorted(unknown))} (url and token are known)")
    for name in ("url", "token"):
        if name in values and not isinstance(values[name], str):
            raise ConfigError(f"{file}: {name} must be a string")
    in_file = f"the config file {file}"
    chosen_url, url_from = next(
        (str(value), source)
        for value, source in (
            (url, "--url"),
            (os.environ.get("ASSENT_URL"), "ASSENT_URL"),
            (values.get("url"), in_file),
            (DEFAULT_URL, "the default"),
        )
        if value
    )
    chosen_token, token_from = next(
        (
            (str(value), source)
            for value, source in (
                (token, "--token"),
                (os.environ.get("ASSENT_TOKEN"), "ASSENT_TOKEN"),
                (values.get("token"), in_file),
            )
            if value
        ),
        (None, None),
    )
    return Config(check_url(chosen_url, url_from), chosen_token, file, url_from, token_from)
