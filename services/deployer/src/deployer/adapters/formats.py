"""The source layout's formats: JSON Schemas kept in the package (``services/deployer/src/deployer/schemas``) and
the pages of ``services/deployer/src/deployer/docs`` that the ``read_docs`` tool serves. Read once at start-up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..domain.checks import FileFormat

PACKAGE = Path(__file__).resolve().parents[1]  # inside the package: an installed wheel carries them
SCHEMAS = PACKAGE / "schemas"
DOCS = PACKAGE / "docs"


def load_schemas(folder: Path = SCHEMAS) -> dict[FileFormat, dict[str, Any]]:
    return {kind: json.loads((folder / f"{kind}.schema.json").read_text()) for kind in ("connection", "store", "eval")}


def load_docs(folder: Path = DOCS) -> dict[str, str]:
    """Each page by its name (``connections`` for ``connections.md``)."""
    return {page.stem: page.read_text() for page in sorted(folder.glob("*.md"))}
