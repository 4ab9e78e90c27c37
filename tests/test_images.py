"""Each service's Dockerfile is the one pattern (templates/service/template/Dockerfile.jinja), and `make images`
builds one image per listed service. The images themselves are built and run by `make test-containers`."""

from __future__ import annotations

import importlib.util
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("images_build", REPO / "deploy" / "images" / "build.py")
assert _spec is not None and _spec.loader is not None
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)

with (REPO / "services.toml").open("rb") as _file:
    ROWS = tomllib.load(_file)["service"]


@pytest.mark.parametrize("row", ROWS, ids=[row["name"] for row in ROWS])
def test_each_dockerfile_is_the_pattern_with_its_service(row: dict) -> None:
    name = row["name"]
    written = (REPO / "services" / name / "Dockerfile").read_text()
    assert written == build.dockerfile(name, row.get("packages", [])), (
        f"services/{name}/Dockerfile is not the pattern's: `uv run python deploy/images/build.py --dockerfiles`"
    )
    # What the pattern promises, read off the file as docker will: a pinned base, two stages, the dependencies
    # installed (with hashes) before Assent's own wheels, a numeric non-root user, the service as the entrypoint.
    lines = [line for line in written.splitlines() if line and not line.startswith("#")]
    base = next(line for line in lines if line.startswith("ARG BASE_IMAGE="))
    assert "@sha256:" in base
    froms = [line for line in lines if line.startswith("FROM ")]
    assert froms == ["FROM ${BASE_IMAGE} AS build", "FROM ${BASE_IMAGE}"]
    copies = [line.split()[1] for line in lines if line.startswith("COPY ") and "--from" not in line]
    assert copies == ["wheels/", f"requirements/{name}.txt", f"assent/{name}/"]
    assert "--require-hashes" in written and "--no-index" in written
    assert "USER 10001:10001" in lines
    assert lines[lines.index("USER 10001:10001") - 1 :].count("USER 10001:10001") == 1
    assert f'ENTRYPOINT ["python", "-m", "{name}"]' in lines
    for label in ("title", "version", "revision", "created", "base.name"):
        assert f"org.opencontainers.image.{label}=" in written
    for package in row.get("packages", []):
        assert f"--no-install-recommends {package}" in written


def test_make_images_builds_each_listed_service_with_its_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The docker builds `make images` runs, one per service with its port, recorded by a `docker` on PATH that
    writes its arguments down (the wheelhouse is not made: the container suite makes and uses it)."""
    recorder = tmp_path / "docker"
    log = tmp_path / "calls"
    recorder.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\n')
    recorder.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    built = build.build_images(build.services(), "assent/python:3.11-bookworm", "7.7.7", context=tmp_path)
    assert built == [f"assent-{row['name']}:7.7.7" for row in ROWS]
    calls = log.read_text().splitlines()
    assert len(calls) == len(ROWS)
    for row, call in zip(ROWS, calls, strict=True):
        assert call.startswith(f"build --quiet -f {REPO}/services/{row['name']}/Dockerfile ")
        assert f"--build-arg ASSENT_HTTP_PORT={row['port']} " in call
        assert "--build-arg BASE_IMAGE=assent/python:3.11-bookworm " in call
        assert call.endswith(f"-t assent-{row['name']}:7.7.7 {tmp_path}")
    dry = subprocess.run(["make", "-n", "--no-print-directory", "images"], cwd=REPO, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "deploy/images/build.py" in dry.stdout
