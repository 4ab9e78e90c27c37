"""Where the gateway is and which token to present: options, then environment variables, then the config file.

The config file is TOML (by default ``$XDG_CONFIG_HOME/assent/config.toml``, else ``~/.config/assent/config.toml``;
``--config`` or ``ASSENT_CONFIG`` names another)::

    url = "http://127.0.0.1:8100"
    token = "..."

``ASSENT_URL`` and ``ASSENT_TOKEN`` win over the file; ``--url`` and ``--token`` over both.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8100"


class ConfigError(Exception):
    """The config file cannot be read, or says something it may not."""


@dataclass(frozen=True)
class Config:
    url: str
    token: str | None


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "assent" / "config.toml"


def load(path: str | None = None, url: str | None = None, token: str | None = None) -> Config:
    """The settings in force: ``url``/``token`` (options), else the environment, else the file at ``path`` (or
    ``ASSENT_CONFIG``, or :func:`default_path`; a missing default file is no error, a missing named one is)."""
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
    chosen_url = url or os.environ.get("ASSENT_URL") or values.get("url") or DEFAULT_URL
    chosen_token = token or os.environ.get("ASSENT_TOKEN") or values.get("token")
    return Config(str(chosen_url).rstrip("/"), None if chosen_token is None else str(chosen_token))
