"""What a proposed file may hold: never a secret value, and the source layout's formats.

A connection names each credential as ``env:NAME`` (the value lives on the Secrets page, never in the source);
a ``spec.json`` holding a literal credential is refused. Every JSON file must parse; connection, store and eval
files must also fit their JSON Schema (``deployer/schemas/``). Any file that holds something shaped like
a well-known secret (a private key, a cloud or API token) is refused. Each refusal names the file and the problem.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from typing import Any, Literal

from jsonschema import Draft202012Validator

from assent.domain import Refusal

from .paths import split

FileFormat = Literal["connection", "store", "eval"]

ENV_REFERENCE = re.compile(r"^env:[A-Z_][A-Z0-9_]*$")
CREDENTIAL_KEY = re.compile(
    r"(?i)(^|_|-)(token|secret|password|passwd|pass|api[_-]?key|access[_-]?key|client[_-]?secret|private[_-]?key|"
    r"credential|credentials|auth[_-]?token|bearer)($|_|-)"
)
SECRET_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("an AWS access key id", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b")),
    ("an API secret key", re.compile(r"\bsk-(?:ant-|proj-|live_|test_)?[A-Za-z0-9_-]{20,}\b")),
    ("a Stripe key", re.compile(r"\b[rs]k_live_[A-Za-z0-9]{16,}\b")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
)


def file_format(path: str) -> FileFormat | None:
    """Which source-layout format a file has, by where it sits (under ``amodal/`` or not)."""
    _, rest = split(path)
    parts = rest.split("/")
    if parts[0] == "connections" and len(parts) == 3 and parts[2] == "spec.json":
        return "connection"
    if parts[0] == "stores" and len(parts) == 2 and parts[1].endswith(".json"):
        return "store"
    if parts[0] == "evals" and len(parts) >= 2 and parts[-1].endswith(".json"):
        return "eval"
    return None


def literal_credentials(value: Any, where: str = "") -> list[str]:
    """Fields of a JSON document that hold a credential as a literal value (anything but ``env:NAME``)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{where}.{key}" if where else str(key)
            if isinstance(item, str) and CREDENTIAL_KEY.search(str(key)) and item and not ENV_REFERENCE.match(item):
                found.append(here)
            else:
                found.extend(literal_credentials(item, here))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(literal_credentials(item, f"{where}[{index}]"))
    return found


def check_file(path: str, text: str, schemas: Mapping[FileFormat, Mapping[str, Any]]) -> Refusal | None:
    """Refuse a file that holds a secret value or does not fit its format; None when it may be stored."""
    for what, shape in SECRET_SHAPES:
        if shape.search(text):
            return Refusal(
                422,
                "secret_value",
                f"{path}: holds what looks like {what}; a secret is never written to the source, name it as "
                "env:NAME and add NAME on the Secrets page",
            )
    name = posixpath.basename(path)
    if not name.endswith(".json"):
        return None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return Refusal(
            422, "invalid_json", f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        )
    if name == "spec.json" or file_format(path) == "connection":
        literal = literal_credentials(document)
        if literal:
            return Refusal(
                422,
                "literal_credential",
                f"{path}: {', '.join(literal)} holds a literal credential; reference it as env:NAME and add NAME on "
                "the Secrets page",
            )
    kind = file_format(path)
    if kind is None:
        return None
    errors = sorted(Draft202012Validator(schemas[kind]).iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        at = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return Refusal(422, "invalid_format", f"{path}: not a valid {kind} file: at {at}: {first.message}{more}")
    return None
