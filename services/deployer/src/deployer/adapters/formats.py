"""The source layout's formats: JSON Schemas kept in the repository (``services/deployer/schemas``) and the
pages of ``services/deployer/docs`` that the ``read_docs`` tool serves. Read once at start-up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..domain.checks import FileFormat

SERVICE_ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = SERVICE_ROOT / "schemas"
DOCS = SERVICE_ROOT / "docs"


def load_schemas(folder: Path = SCHEMAS) -> dict[FileFormat, dict[str, Any]]:
    return {kind: json.loads((folder / f"{kind}.schema.json").read_text()) for kind in ("connection", "store", "eval")}


def load_docs(folder: Path = DOCS) -> dict[str, str]:
    """Each page by its name (``connections`` for ``connections.md``)."""
    return {page.stem: page.read_text() for page in sorted(folder.glob("*.md"))}
