"""The documentation site builds as ``make docs`` builds it: strictly, so a broken link or anchor, a page left out of
the nav, or a reference page the code cannot be read into fails here. No server is needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly_with_its_reference_pages_made_from_the_code(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # The generated pages are in the site, each with what its source declares.
    for page, declared in (
        ("reference/http-api/index.html", "/api/studio/sessions/{session_id}/pending"),
        ("reference/events/index.html", "proposals.outcomes"),
        ("reference/settings/index.html", "ASSENT_SERVICE_KEY"),
        ("reference/metrics/index.html", "assent_messages_handled_total"),
        ("reference/cli/index.html", "Exit codes"),
        ("reference/kinds/index.html", "studio_edit_memory"),
    ):
        assert declared in (site / page).read_text(), page
    assert (site / "reference" / "openapi.json").is_file()
    assert not (REPO / "docs" / "reference" / "settings.md").exists(), "a generated page was written under docs/"
