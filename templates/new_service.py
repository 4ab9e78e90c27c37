"""``make service NAME=<name> [KIND=<kind>]``: write a new service that starts, migrates, serves ``/livez`` and
``/readyz`` and owns a sample kind with its unit tests, and take it in wherever services are listed.

The service ships its public face in a contract package of its own (``services/<name>/contract/``, imported as
``<name>_contract``): the sample kind's row of the kind registry, its topics (its tool calls, its decisions, and
``<name>.events`` with a message announcing each applied change), and a public route that reads the kind's live
state. The registries find it through its entry point (:mod:`assent.owners`): nothing outside ``services/<name>/``
is edited by hand, and only generated files change.

In order, stopping at the first problem:

1. checks the names: ``<name>`` is a lowercase word (a Python package, a PostgreSQL schema and a Kubernetes name
   alike) that no service has, whose packages (``<name>``, ``<name>_contract``) shadow no module of the standard
   library or of the environment, and whose topics no topic has; ``<kind>`` (by default the service's name) is a
   kind the registry does not have yet, whose tools no kind names, whose event's message and route are new;
2. renders ``templates/service`` with copier into ``services/<name>/`` (the service and its contract package);
3. adds the service's row to ``services.toml``, before the public service, with the next port;
4. formats and sorts the new files with ruff (names of any length make lines of any length);
5. locks the new workspace members, the service and its contract (``uv lock --offline``, or ``uv lock`` when uv's
   cache lacks the index pages), checks that no pin moved, then installs them (``uv sync``);
6. renders the kustomize base and the chart's values (``deploy/k8s/render.py``) and exports the contracts
   (``contracts/export.py``: the AsyncAPI documents, the JSON Schemas and the Kafka topics, which the new topics
   join).

When a step after the first fails, every file it wrote or changed is put back as it was.
"""

from __future__ import annotations

import argparse
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
LOCK = REPO / "uv.lock"
K8S_BASE = REPO / "deploy" / "k8s" / "base"
CHART_VALUES = REPO / "deploy" / "helm" / "assent" / "values.yaml"
EXPORTED = (REPO / "contracts" / "asyncapi", REPO / "contracts" / "schemas", REPO / "deploy" / "kafka")
"""What ``contracts/export.py`` writes."""

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
    for package in (name, f"{name}_contract"):
        if importlib.util.find_spec(package) is not None:
            raise Refused(
                f"service name {name!r} would shadow the module {package!r} of this environment; choose another"
            )
    from assent.topics import REGISTRY

    taken = {topic.name for topic in REGISTRY}
    clashing = [topic for topic in (f"{name}.tool-calls", f"{name}.decisions", f"{name}.events") if topic in taken]
    if clashing:
        raise Refused(f"service name {name!r}: the registry has a topic {clashing[0]!r} already; choose another")


def check_kind_name(kind: str, tools: tuple[str, ...]) -> None:
    from assent.api import ROUTES
    from assent.contracts import Message
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
    event = f"{kind_class(kind)}Changed"
    if event in Message.registry:
        raise Refused(f"kind name {kind!r}: its event {event!r} is a message of the contracts already; choose another")
    path = f"/api/workspace/agents/{{agent_id}}/{route_segment(kind)}"
    if any(route.method == "GET" and route.public_path == path for route in ROUTES):
        raise Refused(f"kind name {kind!r}: its route GET {path} is an owner's route already; choose another")


def kind_class(kind: str) -> str:
    """The name the template gives the kind's classes (copier.yml's ``kind_class``)."""
    return "".join(part.capitalize() for part in kind.split("_"))


def route_segment(kind: str) -> str:
    """The last segment of the kind's route (copier.yml's ``route_segment``)."""
    return kind.replace("_", "-")


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


def lock(uv: list[str], members: set[str], before: str) -> str:
    """Lock the new members; the lock's other pins must stay as they were. Returns how it was locked."""
    how = "uv lock --offline"
    result = run(*uv, "lock", "--offline")
    if result.returncode != 0:
        # Offline, uv resolves from the index pages in its cache, which `uv sync --frozen` never fetches.
        how = "uv lock (uv's cache lacked the index pages for --offline)"
        result = run(*uv, "lock")
    must(result, how)
    old, new = pins(before), pins(LOCK.read_text())
    moved = sorted(n for n in old.keys() | new.keys() if n not in members and old.get(n) != new.get(n))
    if moved or not members <= new.keys():
        raise Refused(
            f"locking {', '.join(sorted(members))} moved other pins ({', '.join(moved) or 'none'}); nothing is kept"
        )
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
    generated = [SERVICES_TOML, LOCK, CHART_VALUES, *sorted(K8S_BASE.glob("*.yaml"))]
    generated += sorted(path for root in EXPORTED for path in root.rglob("*") if path.is_file())
    saved = {path: path.read_bytes() for path in generated}
    try:
        run_copy(
            str(TEMPLATE),
            str(folder),
            data={
                "name": name,
                "kind": kind,
                "read_tool": read_tool,
                "edit_tool": edit_tool,
                "section": SECTION,
                "created": f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC",
            },
            defaults=True,
            quiet=True,
        )
        services_text, port = services_with(name, saved[SERVICES_TOML].decode(), services)
        SERVICES_TOML.write_text(services_text)
        must(run(sys.executable, "-m", "ruff", "check", "--fix", "--quiet", folder), "ruff check --fix")
        must(run(sys.executable, "-m", "ruff", "format", "--quiet", folder), "ruff format")
        how = lock(uv, {f"assent-{name}", f"assent-{name}-contract"}, saved[LOCK].decode())
        must(run(*uv, "sync", "--frozen", "--all-packages", "--quiet"), "uv sync")
        must(run(sys.executable, REPO / "deploy" / "k8s" / "render.py"), "deploy/k8s/render.py")
        # A new process: this one has read the registries without the new contract.
        must(run(sys.executable, REPO / "contracts" / "export.py"), "contracts/export.py")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        for root in EXPORTED:  # what the export added
            for path in root.rglob("*"):
                if path.is_file() and path not in saved:
                    path.unlink()
        for path, content in saved.items():
            path.write_bytes(content)
        raise
    written = sorted(str(path.relative_to(REPO)) for path in folder.rglob("*") if path.is_file())
    return [
        f"services/{name}/: {len(written)} files (sources, Dockerfile, alembic.ini and the first migration, tests)",
        f"services/{name}/contract/: the kind {kind!r} ({edit_tool}, {read_tool}; section {SECTION}), the topic "
        f"{name}.events with {kind_class(kind)}Changed, the route GET /api/workspace/agents/{{agent_id}}/"
        f"{route_segment(kind)}",
        f"services.toml: the {name} service, port {port}",
        f"uv.lock: the members assent-{name} and assent-{name}-contract, no other pin moved ({how}); installed in "
        ".venv",
        "deploy/k8s/base/, deploy/helm/assent/values.yaml: rendered again",
        "contracts/, deploy/kafka/: exported again",
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
        f"and section, its events and its routes (services/{args.name}/contract/), and the new route's row in the "
        "auth matrix (tests/test_auth.py)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
