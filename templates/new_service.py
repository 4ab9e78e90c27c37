"""``make service NAME=<name> [KIND=<kind>]``: write a new service that starts, migrates, serves ``/livez`` and
``/readyz`` and owns a sample kind with its unit tests, and take it in wherever services are listed.

In order, stopping at the first problem:

1. checks the names: ``<name>`` is a lowercase word (a Python package, a PostgreSQL schema and a Kubernetes name
   alike) that no service has and that shadows no module of the standard library or of the environment; ``<kind>``
   (by default the service's name) is a kind the registry does not have yet, whose tools no kind names;
2. renders ``templates/service`` with copier into ``services/<name>/``;
3. adds the service's row to ``services.toml``, before the public service, with the next port;
4. adds the sample kind's row to the kind registry (``shared/src/assent/kinds.py``), after its last row;
5. formats and sorts the new files with ruff (names of any length make lines of any length);
6. locks the new workspace member (``uv lock --offline``, or ``uv lock`` when uv's cache lacks the index pages)
   and checks that no pin moved, then installs it (``uv sync``);
7. renders the kustomize base (``deploy/k8s/render.py``).

When a step after the first fails, every file it wrote or changed is put back as it was.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import keyword
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "templates" / "service"
SERVICES_TOML = REPO / "services.toml"
KINDS_PY = REPO / "shared" / "src" / "assent" / "kinds.py"
LOCK = REPO / "uv.lock"
K8S_BASE = REPO / "deploy" / "k8s" / "base"

SERVICE_NAME = re.compile(r"[a-z][a-z0-9]{1,19}")
"""A Python package, a PostgreSQL schema and a Kubernetes name (no ``_``) alike; short enough for every line that
names it to stay within the line length."""
KIND_NAME = re.compile(r"[a-z][a-z0-9_]{1,19}")
SECTION = "Agents"
"""The section of the sample kind's requests (its target is an agent's text)."""


class Refused(Exception):
    """A name the command will not use, or a step that failed; its message says which and why."""


def service_rows() -> list[dict[str, Any]]:
    """The rows of ``services.toml``."""
    with SERVICES_TOML.open("rb") as file:
        return list(tomllib.load(file)["service"])


def check_service_name(name: str, services: list[dict[str, Any]]) -> None:
    if not SERVICE_NAME.fullmatch(name):
        raise Refused(
            f"service name {name!r}: use 2 to 20 lowercase letters and digits, starting with a letter (it is the "
            "Python package, the PostgreSQL schema and the Kubernetes name, which allows no '_')"
        )
    if keyword.iskeyword(name):
        raise Refused(f"service name {name!r} is a Python keyword")
    if name in {str(row["name"]) for row in services} or (REPO / "services" / name).exists():
        raise Refused(f"there is a service {name!r} already (services.toml, services/{name}/)")
    if name in sys.stdlib_module_names:
        raise Refused(f"service name {name!r} would shadow the standard library's module {name!r}; choose another")
    if importlib.util.find_spec(name) is not None:
        raise Refused(f"service name {name!r} would shadow the module {name!r} of this environment; choose another")


def check_kind_name(kind: str, tools: tuple[str, ...]) -> None:
    from assent.kinds import KINDS
    from assent.runtime.tables import TABLE_NAMES

    if not KIND_NAME.fullmatch(kind) or keyword.iskeyword(kind):
        raise Refused(
            f"kind name {kind!r}: use 2 to 20 lowercase letters, digits and '_', starting with a letter, not a keyword"
        )
    if kind in KINDS:
        raise Refused(
            f"the registry has a kind {kind!r} already (owned by {KINDS[kind].owner}); choose another KIND for the "
            "sample, and write the real kinds' modules in place of it"
        )
    if kind in TABLE_NAMES or kind.startswith("alembic_version"):
        raise Refused(f"kind name {kind!r} is the name of a table every service holds; choose another")
    named = {tool: spec.name for spec in KINDS.values() for tool in (*spec.tools, *spec.read_tools)}
    for tool in tools:
        if tool in named:
            raise Refused(f"the tool {tool!r} of a kind {kind!r} is the kind {named[tool]!r}'s already")


def services_with(name: str, text: str, services: list[dict[str, Any]]) -> tuple[str, int]:
    """``services.toml`` with a row for ``name`` before the first public service (owners start first), and its port:
    the next after the highest of the list."""
    port = max((int(row["port"]) for row in services), default=8100) + 1
    row = f'[[service]]\nname = "{name}"\nport = {port}\n\n'
    blocks = [m.start() for m in re.finditer(r"^\[\[service\]\]\s*$", text, flags=re.MULTILINE)]
    public = [start for start, spec in zip(blocks, services, strict=True) if spec.get("public")]
    if public:
        text = text[: public[0]] + row + text[public[0] :]
    else:
        text = text.rstrip("\n") + "\n\n" + row.rstrip("\n") + "\n"
    parsed = [str(spec["name"]) for spec in tomllib.loads(text)["service"]]
    assert name in parsed, "the row did not land in services.toml"
    return text, port


def _rows(node: ast.Tuple) -> bool:
    """Whether ``node`` is the registry's tuple of rows: ``_kind(...)`` calls, one an element."""
    return bool(node.elts) and all(
        isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "_kind" for e in node.elts
    )


def registry_with(kind: str, owner: str, edit_tool: str, read_tool: str, source: str) -> str:
    """The kind registry's source with a row for the sample kind after its last row (the default decisions, apply
    and decline; an edit action)."""
    tree = ast.parse(source)
    rows: ast.Tuple | None = None
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if node.value is not None and any(isinstance(t, ast.Name) and t.id == "KINDS" for t in targets):
                rows = next((n for n in ast.walk(node.value) if isinstance(n, ast.Tuple) and _rows(n)), None)
    if rows is None:
        raise Refused(f"{KINDS_PY.relative_to(REPO)}: no tuple of rows found in KINDS; add the row by hand")
    last = rows.elts[-1]
    assert last.end_lineno is not None
    indent = " " * last.col_offset
    lines = source.splitlines(keepends=True)
    # The row ends its line with its comma (the registry is formatted by ruff, one argument a line).
    if not lines[last.end_lineno - 1].rstrip().endswith(","):
        raise Refused(f"{KINDS_PY.relative_to(REPO)}: the last row does not end its line with a comma")
    row = (
        f"{indent}_kind(\n"
        f'{indent}    "{kind}",\n'
        f'{indent}    "{owner}",\n'
        f'{indent}    ("{edit_tool}",),\n'
        f'{indent}    "{SECTION}",\n'
        f'{indent}    {{"edit": "Apply edit"}},\n'
        f'{indent}    read_tools=("{read_tool}",),\n'
        f"{indent}),\n"
    )
    lines.insert(last.end_lineno, row)
    return "".join(lines)


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(part) for part in command], cwd=REPO, capture_output=True, text=True)


def must(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        raise Refused(f"{what} failed ({result.returncode}):\n{result.stdout}{result.stderr}")


def pins(lock_text: str) -> dict[str, tuple[str, str]]:
    return {
        package["name"]: (package.get("version", ""), repr(package.get("source")))
        for package in tomllib.loads(lock_text).get("package", [])
    }


def lock(uv: list[str], member: str, before: str) -> str:
    """Lock the new member; the lock's other pins must stay as they were. Returns how it was locked."""
    how = "uv lock --offline"
    result = run(*uv, "lock", "--offline")
    if result.returncode != 0:
        # Offline, uv resolves from the index pages in its cache, which `uv sync --frozen` never fetches.
        how = "uv lock (uv's cache lacked the index pages for --offline)"
        result = run(*uv, "lock")
    must(result, how)
    old, new = pins(before), pins(LOCK.read_text())
    moved = sorted(n for n in old.keys() | new.keys() if n != member and old.get(n) != new.get(n))
    if moved or member not in new:
        raise Refused(f"locking {member} moved other pins ({', '.join(moved) or 'none'}); nothing is kept")
    return how


def generate(name: str, kind: str) -> list[str]:
    """Write the service and take it in; the lines of the report."""
    services = service_rows()
    read_tool, edit_tool = f"studio_read_{kind}", f"studio_edit_{kind}"
    check_service_name(name, services)
    check_kind_name(kind, (read_tool, edit_tool))
    from copier import run_copy

    uv = shlex.split(os.environ.get("UV") or shutil.which("uv") or f"{sys.executable} -m uv")

    folder = REPO / "services" / name
    saved = {path: path.read_text() for path in (SERVICES_TOML, KINDS_PY, LOCK, *sorted(K8S_BASE.glob("*.yaml")))}
    try:
        run_copy(
            str(TEMPLATE),
            str(folder),
            data={
                "name": name,
                "kind": kind,
                "read_tool": read_tool,
                "edit_tool": edit_tool,
                "created": f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC",
            },
            defaults=True,
            quiet=True,
        )
        services_text, port = services_with(name, saved[SERVICES_TOML], services)
        SERVICES_TOML.write_text(services_text)
        KINDS_PY.write_text(registry_with(kind, name, edit_tool, read_tool, saved[KINDS_PY]))
        must(run(sys.executable, "-m", "ruff", "check", "--fix", "--quiet", folder), "ruff check --fix")
        must(run(sys.executable, "-m", "ruff", "format", "--quiet", folder), "ruff format")
        how = lock(uv, f"assent-{name}", saved[LOCK])
        must(run(*uv, "sync", "--frozen", "--all-packages", "--quiet"), "uv sync")
        must(run(sys.executable, REPO / "deploy" / "k8s" / "render.py"), "deploy/k8s/render.py")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        for path, text in saved.items():
            path.write_text(text)
        raise
    written = sorted(str(path.relative_to(REPO)) for path in folder.rglob("*") if path.is_file())
    return [
        f"services/{name}/: {len(written)} files (sources, Dockerfile, alembic.ini and the first migration, tests)",
        f"services.toml: the {name} service, port {port}",
        f"{KINDS_PY.relative_to(REPO)}: the kind {kind!r} ({edit_tool}, {read_tool}; section {SECTION})",
        f"uv.lock: the member assent-{name}, no other pin moved ({how}); installed in .venv",
        "deploy/k8s/base/: rendered again",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make service", description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the service's name")
    parser.add_argument("--kind", help="the sample kind's name (default: the service's name)")
    args = parser.parse_args(argv)
    # Imports resolve from the repository's root, as the services' do: a name shadowing one of its top-level folders
    # (tests, bench, ...) is refused too, and this script's own folder is not on the path.
    here = Path(__file__).resolve().parent
    sys.path[:] = [str(REPO), *(entry for entry in sys.path if Path(entry or ".").resolve() != here)]
    try:
        report = generate(args.name, args.kind or args.name)
    except Refused as refused:
        print(f"make service: {refused}", file=sys.stderr)
        return 1
    print("Written:\n" + "\n".join(f"  {line}" for line in report))
    print(
        f"Left to write: the kind's real rules, table and migration in place of the sample's "
        f"(services/{args.name}/src/{args.name}/kinds/, domain/, adapters/, migrations/versions/), its row's labels "
        "and section in the registry, and its routes, if it has any."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
