"""MkDocs hook (``hooks:`` in mkdocs.yml): the reference pages, written from the code as the site builds.

``docs/gen/reference.py`` runs in a process of its own, so that ``make docs-serve`` reads the code as it is at each
rebuild and the imports of the services' code stay out of MkDocs' process. Its pages are added to the site's files
in memory: none is written under ``docs/``, so none can be committed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

GENERATOR = Path(__file__).with_name("reference.py")
REPO = GENERATOR.parents[2]
ISOLATED = ("ASSENT_", "KAFKA_", "OTEL_", "DATABASE_URL", "REDIS_URL")
"""Variables the generator does not inherit: the pages say what the code declares, not what this shell sets."""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ISOLATED)}
    env.update(PYTHONDONTWRITEBYTECODE="1", OTEL_SDK_DISABLED="true")  # no .pyc under the watched folders
    with tempfile.TemporaryDirectory(prefix="assent-docs-") as out:
        done = subprocess.run(
            [sys.executable, str(GENERATOR), out], cwd=REPO, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise PluginError(f"docs/gen/reference.py failed:\n{done.stderr[-4000:]}")
        for path in sorted(Path(out).rglob("*")):
            if path.is_file():
                uri = path.relative_to(out).as_posix()
                files.append(File.generated(config, uri, content=path.read_bytes()))
    return files
