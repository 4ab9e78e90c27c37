"""Which source files a proposal may change, by where it comes from.

An agent's own proposal (web or API chat) may change Markdown under ``agents/``, ``skills/`` and ``knowledge/``,
and ``.ts``, ``.mts``, ``.js`` and ``.mjs`` files under ``tools/<name>/``; nothing else (so it never adds a tool,
which needs a ``tool.json``, nor widens a connection or a secret). The builder chat may change any file except
environment files, keys and anything under build or dependency folders.

The runtime loads each of :data:`LOCATED_DIRS` from ``amodal/<dir>/`` when that folder holds files, and from the
top level otherwise (:func:`layout`); a file proposed where this agent does not load it is refused with the path
to use instead.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from typing import Literal

from assent.domain import Refusal
from deployer_contract import source as api_source

Origin = Literal["agent", "builder"]

LOCATED_DIRS: tuple[str, ...] = ("skills", "knowledge", "tools", "connections", "stores", "evals")
"""Folders the runtime reads from ``amodal/<dir>/`` when it holds files, else from ``<dir>/``."""
PREFIX = "amodal/"
AGENT_REFUSED_NAMES = frozenset({"amodal.json", "agent.json", "agent.ts", "tool.json", "package.json"})
AGENT_MARKDOWN_DIRS = ("agents", "skills", "knowledge")
TOOL_EXTENSIONS = (".ts", ".mts", ".js", ".mjs")
BUILDER_REFUSED_DIRS = frozenset({"node_modules", "dist", "build", "coverage", ".git", ".next"})
KEY_EXTENSIONS = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".der", ".crt", ".cer", ".gpg", ".asc")
KEY_NAMES = frozenset({"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".npmrc", ".netrc", ".pypirc"})
MAX_PATH = api_source.MAX_PATH
normalize = api_source.repository_path
"""The path as the repository names it, or why it names no file of the repository (the rule the public API's
schema states too: :func:`deployer_contract.source.repository_path`)."""


def layout(files: Iterable[str]) -> dict[str, str]:
    """Where this agent loads each of :data:`LOCATED_DIRS` from: ``"amodal/<dir>/"`` or ``"<dir>/"``."""
    held = {path.split("/")[1] for path in files if path.startswith(PREFIX) and path.count("/") >= 2}
    return {name: f"{PREFIX}{name}/" if name in held else f"{name}/" for name in LOCATED_DIRS}


def split(path: str) -> tuple[bool, str]:
    """(whether the path sits under ``amodal/``, its path below that)."""
    return (True, path[len(PREFIX) :]) if path.startswith(PREFIX) else (False, path)


def is_env_file(name: str) -> bool:
    return name == ".env" or name.startswith(".env.") or name.endswith(".env")


def is_key_file(name: str) -> bool:
    return name in KEY_NAMES or name.lower().endswith(KEY_EXTENSIONS)


def _location(path: str, loads: Mapping[str, str]) -> Refusal | None:
    """Refuse a file of a located folder proposed where this agent does not load that folder from."""
    _, rest = split(path)
    top = rest.split("/", 1)[0]
    if top not in loads or "/" not in rest:
        return None
    if path.startswith(loads[top]):
        return None
    use = loads[top] + rest[len(top) + 1 :]
    return Refusal(
        422,
        "wrong_location",
        f"{path}: this agent loads {top}/ from {loads[top]}; propose it as {use} instead",
    )


def check_agent_path(path: str, loads: Mapping[str, str]) -> Refusal | None:
    """An agent's own proposal: Markdown under agents/, skills/, knowledge/; scripts under tools/<name>/."""
    name = posixpath.basename(path)
    if name in AGENT_REFUSED_NAMES or is_env_file(name) or is_key_file(name):
        return Refusal(422, "path_refused", f"{path}: an agent may not change {name}")
    in_amodal, rest = split(path)
    parts = rest.split("/")
    top = parts[0]
    markdown = name.lower().endswith(".md")
    allowed = (top in AGENT_MARKDOWN_DIRS and len(parts) >= 2 and markdown and not (in_amodal and top == "agents")) or (
        top == "tools" and len(parts) >= 3 and name.endswith(TOOL_EXTENSIONS)
    )
    if not allowed:
        return Refusal(
            422,
            "path_refused",
            f"{path}: an agent may change only Markdown under agents/, skills/ and knowledge/, and .ts, .mts, .js "
            "and .mjs files under tools/<name>/",
        )
    return _location(path, loads)


def check_builder_path(path: str, loads: Mapping[str, str], *, exists: bool) -> Refusal | None:
    """The builder chat: any file but environment files, keys and build or dependency folders; a new file of a
    located folder where this agent loads it."""
    parts = path.split("/")
    name = parts[-1]
    if is_env_file(name):
        return Refusal(
            422, "path_refused", f"{path}: environment files are never proposed; add secrets on the Secrets page"
        )
    if is_key_file(name):
        return Refusal(422, "path_refused", f"{path}: key files are never proposed")
    folder = next((part for part in parts[:-1] if part in BUILDER_REFUSED_DIRS), None)
    if folder is not None:
        return Refusal(422, "path_refused", f"{path}: nothing under {folder}/ is proposed")
    return None if exists else _location(path, loads)


def check_path(origin: Origin, path: str, loads: Mapping[str, str], *, exists: bool) -> Refusal | None:
    if origin == "agent":
        return check_agent_path(path, loads)
    return check_builder_path(path, loads, exists=exists)
