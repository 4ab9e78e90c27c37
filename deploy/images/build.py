"""Build a container image per service of ``services.toml``, from a wheelhouse made on this machine.

    python deploy/images/build.py                      # the wheelhouse, then assent-<service>:<version> for each
    python deploy/images/build.py --base-image IMAGE   # on another base (no registry: deploy/containers)
    python deploy/images/build.py --wheelhouse-only    # only .build/images
    python deploy/images/build.py --dockerfiles        # write each service's Dockerfile from the one pattern

The wheelhouse (``.build/images``) is every image's whole build context: per service, its dependencies exported
from ``uv.lock`` with their hashes; every wheel those name, downloaded here (binary wheels only); and the wheels
of Assent's own packages that service runs, built here: ``assent``, every owner's contract package (each service
finds them all, :mod:`assent.owners`, the gateway too, which depends on none) and the service's own. The images are
therefore built with no network and no source tree, their dependency layers change only when the lock does, and
what they run is installed, not editable. Each service's Dockerfile is the one pattern of
``templates/service/template/Dockerfile.jinja``.

Needs ``uv``, and ``docker`` (any engine ``DOCKER_HOST`` names) unless ``--wheelhouse-only``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = REPO / ".build" / "images"
VERSION = "0.1.0"


PATTERN = REPO / "templates" / "service" / "template" / "Dockerfile.jinja"


def dockerfile(name: str, packages: list[str] | None = None) -> str:
    """Service ``name``'s Dockerfile: the pattern (which ``make service`` renders too) with its name and the Debian
    packages it runs besides Python (``services.toml``'s ``packages``)."""
    from jinja2 import Environment, StrictUndefined

    environment = Environment(keep_trailing_newline=True, undefined=StrictUndefined, autoescape=False)
    return environment.from_string(PATTERN.read_text()).render(name=name, packages=packages or [])


def packages() -> dict[str, list[str]]:
    """The Debian packages each service's image adds (``services.toml``'s ``packages``)."""
    with (REPO / "services.toml").open("rb") as file:
        return {row["name"]: list(row.get("packages", [])) for row in tomllib.load(file)["service"]}


def services() -> dict[str, int]:
    """Each service of ``services.toml`` and its port, in its order."""
    with (REPO / "services.toml").open("rb") as file:
        return {row["name"]: int(row["port"]) for row in tomllib.load(file)["service"]}


def contracts() -> list[str]:
    """The distribution of each owner's contract package (``services/<name>/contract``), by pattern."""
    names = []
    for pyproject in sorted(REPO.glob("services/*/contract/pyproject.toml")):
        with pyproject.open("rb") as file:
            names.append(str(tomllib.load(file)["project"]["name"]))
    return names


def uv() -> list[str]:
    return shlex.split(os.environ.get("UV") or shutil.which("uv") or f"{sys.executable} -m uv")


def run(*argv: str | Path, cwd: Path = REPO) -> None:
    print("+", shlex.join(str(a) for a in argv), file=sys.stderr, flush=True)
    subprocess.run([str(a) for a in argv], cwd=cwd, check=True)


def make_wheelhouse(names: list[str], dest: Path = WHEELHOUSE) -> Path:
    """Write ``dest``: ``requirements/<service>.txt``, ``wheels/`` and ``assent/<service>/`` (see the module)."""
    if dest.exists():
        shutil.rmtree(dest)
    built, wheels, requirements = dest / ".built", dest / "wheels", dest / "requirements"
    for folder in (built, wheels, requirements):
        folder.mkdir(parents=True)
    for package in ("assent", *contracts()):
        run(*uv(), "build", "--quiet", "--wheel", "--package", package, "--out-dir", built)
    for name in names:
        run(*uv(), "build", "--quiet", "--wheel", "--package", f"assent-{name}", "--out-dir", built)
        exported = requirements / f"{name}.txt"
        run(
            *uv(),
            "export",
            "--quiet",
            "--frozen",
            "--no-dev",
            "--no-emit-workspace",
            "--package",
            f"assent-{name}",
            "--format",
            "requirements-txt",
            "--output-file",
            exported,
        )
        # One service after another into one folder: a wheel already there (and matching its hash) is kept.
        run(
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--require-hashes",
            "--dest",
            wheels,
            "-r",
            exported,
        )
        own = dest / "assent" / name
        own.mkdir(parents=True)
        # A service's name holds no "_": its own wheel's pattern matches no contract's.
        (shared,), (service,) = built.glob("assent-*.whl"), built.glob(f"assent_{name}-*.whl")
        for found in (shared, *sorted(built.glob("assent_*_contract-*.whl")), service):
            shutil.copy2(found, own / found.name)
    shutil.rmtree(built)
    return dest


def git(*argv: str) -> str:
    try:
        return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def build_images(ports: dict[str, int], base_image: str | None, tag: str, context: Path = WHEELHOUSE) -> list[str]:
    """``docker build`` each service's image from ``context``; the tags built."""
    revision = git("rev-parse", "HEAD")
    if revision != "unknown" and git("status", "--porcelain", "--untracked-files=no"):
        revision += "-dirty"
    # The commit's time, not the clock's: building the same commit twice gives the same labels (and layers).
    created = git("log", "-1", "--format=%cI")
    tags = []
    for name, port in ports.items():
        image = f"assent-{name}:{tag}"
        args = [
            *("--build-arg", f"ASSENT_HTTP_PORT={port}"),
            *("--build-arg", f"VERSION={VERSION}"),
            *("--build-arg", f"REVISION={revision}"),
            *("--build-arg", f"CREATED={created}"),
        ]
        if base_image:
            args += ["--build-arg", f"BASE_IMAGE={base_image}"]
        run("docker", "build", "--quiet", "-f", REPO / "services" / name / "Dockerfile", *args, "-t", image, context)
        tags.append(image)
    return tags


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make images", description=__doc__.splitlines()[0])
    parser.add_argument("--base-image", help="the image to build on (default: each Dockerfile's pinned base)")
    parser.add_argument("--tag", default=VERSION, help=f"the images' tag (default: {VERSION})")
    parser.add_argument("--wheelhouse-only", action="store_true", help="make .build/images and stop")
    parser.add_argument("--dockerfiles", action="store_true", help="write each service's Dockerfile and stop")
    parser.add_argument("service", nargs="*", help="only these services (default: every one)")
    args = parser.parse_args(argv)
    ports = services()
    unknown = sorted(set(args.service) - set(ports))
    if unknown:
        parser.error(f"not in services.toml: {', '.join(unknown)}")
    if args.service:
        ports = {name: ports[name] for name in args.service}
    if args.dockerfiles:
        for name in ports:
            (REPO / "services" / name / "Dockerfile").write_text(dockerfile(name, packages()[name]))
        return 0
    make_wheelhouse(list(ports))
    if args.wheelhouse_only:
        print(WHEELHOUSE)
        return 0
    for image in build_images(ports, args.base_image, args.tag):
        print(image)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
