"""Write the documentation site's reference pages from the code, so that nothing in them is written twice.

    python docs/gen/reference.py OUT    # writes OUT/reference/... (docs/gen/hooks.py runs it as the site builds)

What each page is made from:

- ``reference/http-api.md`` and ``reference/http-api-schemas.md``: the gateway's OpenAPI document, as
  ``gateway.entrypoint.create_app`` builds it (``reference/openapi.json`` is the document itself);
- ``reference/events.md``: the AsyncAPI documents of ``contracts/export.py`` (the topic registry, the messages and
  every tool's arguments; ``reference/asyncapi/<participant>.yaml`` are the documents themselves);
- ``reference/settings.md``: the pydantic-settings classes, ``assent.settings.ServiceSettings`` and each service's
  subclass (``<service>.settings``, for every service of ``services.toml``);
- ``reference/metrics.md``: prometheus_client's registry once the shared runtime and each service's entrypoint are
  imported;
- ``reference/cli.md``: the ``assent`` command's Click group and its exit codes (``assent_cli.exit_codes``);
- ``reference/kinds.md``: the kind registry (``assent.kinds.KINDS``, the rows of the owners' contract packages).

Nothing here connects to anything: settings are read from their classes, never from the environment; the gateway's
app is built, never started, with settings made in memory; the AsyncAPI documents are rendered in memory, as
``tests/test_contracts_published.py`` renders them.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
import tempfile
import tomllib
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

REPO = Path(__file__).resolve().parents[2]
GENERATED = (
    "<!-- Generated from the code as the site builds (docs/gen/reference.py); edit the code, not this page. -->\n\n"
)


# --- text -----------------------------------------------------------------------------------------------------


def markdown(text: str | None) -> str:
    """A docstring's reStructuredText, as far as the code uses it, in Markdown: ``literal`` and :role:`target`
    become code, and a paragraph ending ``::`` is followed by its indented block as a fenced one."""
    if not text:
        return ""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    text = re.sub(r"``(.+?)``", r"`\1`", text, flags=re.S)
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and not line.strip().startswith(".."):
            out.append(line.rstrip()[:-1])
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            while block and not block[0].strip():
                block.pop(0)
            body = [b for b in block if b.strip()]
            indent = min((len(b) - len(b.lstrip()) for b in body), default=0)
            out += ["", "```", *(b[indent:] if b.strip() else "" for b in block), "```", ""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out).strip()


def cell(text: Any) -> str:
    """Text for one cell of a Markdown table: one line, pipes escaped."""
    one = " ".join(markdown(str(text)).split()) if text is not None else ""
    # A pipe inside a code span does not end the cell (the tables extension reads code spans first); one outside does.
    parts = re.split(r"(`[^`]*`)", one)
    return "".join(part if part.startswith("`") else part.replace("|", "\\|") for part in parts)


def table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def code(value: str) -> str:
    return f"`{value}`" if value else ""


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def services() -> list[str]:
    """Every service of ``services.toml``, in its order."""
    with (REPO / "services.toml").open("rb") as file:
        return [str(row["name"]) for row in tomllib.load(file)["service"]]


# --- settings -------------------------------------------------------------------------------------------------


def type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin in (list, tuple, dict, set, frozenset):
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{origin.__name__}[{inner}]"
    if annotation is type(None):
        return "None"
    if annotation is SecretStr:
        return "secret"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    return getattr(annotation, "__name__", str(annotation))


def constraints(field: FieldInfo) -> str:
    found = []
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            found.append(f"≥ {item.ge}")
        elif isinstance(item, annotated_types.Gt):
            found.append(f"> {item.gt}")
        elif isinstance(item, annotated_types.Le):
            found.append(f"≤ {item.le}")
        elif isinstance(item, annotated_types.Lt):
            found.append(f"< {item.lt}")
    return ", ".join(found)


def default_of(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return code(str(value).lower())
    if isinstance(value, Path):
        temp = Path(tempfile.gettempdir())
        if value.is_relative_to(temp):  # the machine's own: say where it is, not what it is here
            return code(f"$TMPDIR/{value.relative_to(temp)}")
        return code(str(value))
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict | list | tuple):
        return code(json.dumps(value))
    if value == "":
        return "empty"
    return code(str(value))


def env_names(name: str, field: FieldInfo, prefix: str) -> list[str]:
    alias = field.validation_alias
    if alias is None:
        return [f"{prefix}{name}".upper()]
    if isinstance(alias, str):
        return [alias]
    return [str(choice) for choice in getattr(alias, "choices", [])]


def setting_rows(cls: type[BaseModel], names: Iterable[str], fallback: Mapping[str, FieldInfo]) -> list[list[str]]:
    prefix = str(cls.model_config.get("env_prefix", ""))
    rows = []
    for name in names:
        field = cls.model_fields[name]
        description = field.description or (fallback[name].description if name in fallback else "")
        kind = type_name(field.annotation)
        extra = constraints(field)
        json_read = typing.get_origin(field.annotation) in (list, dict, tuple) or any(
            isinstance(kind, type) and issubclass(kind, BaseModel)
            for kind in (field.annotation, *typing.get_args(field.annotation))
        )
        rows.append(
            [
                "<br>".join(code(n) for n in env_names(name, field, prefix)),
                code(kind) + (f", {extra}" if extra else "") + (" (JSON)" if json_read else ""),
                default_of(field),
                description or "",
            ]
        )
    return rows


def settings_page() -> str:
    from assent.settings import ServiceSettings

    header = ["Variable", "Type", "Default", "Description"]
    shared = ServiceSettings.model_fields
    parts = [
        GENERATED,
        "# Settings\n\n",
        "Each service reads its settings from the environment once, as it starts, and passes them down; a service "
        "started with a value that does not fit stops at once, naming the variable. Names are not case-sensitive. A "
        "setting of a list, a mapping or a model is JSON. Made from the pydantic-settings classes: "
        "`assent.settings.ServiceSettings`, which every service shares, and each service's subclass.\n\n",
        "## Every service\n\n",
        "`assent.settings.ServiceSettings`. The Kafka security variables (`KAFKA_SECURITY_PROTOCOL` and the rest) "
        "are read by the coach client too (`KafkaSecurity.from_env`).\n\n",
        table(header, setting_rows(ServiceSettings, shared, {})),
    ]
    for service in services():
        module = importlib.import_module(f"{service}.settings")
        classes = [
            c
            for c in vars(module).values()
            if isinstance(c, type) and issubclass(c, ServiceSettings) and c.__module__ == module.__name__
        ]
        for cls in classes:
            own = [n for n in cls.model_fields if n not in shared]
            changed = [
                n
                for n in cls.model_fields
                if n in shared
                and cls.model_fields[n].get_default(call_default_factory=True)
                != shared[n].get_default(call_default_factory=True)
            ]
            parts.append(f"\n## {service}\n\n`{cls.__module__}.{cls.__name__}`")
            parts.append(": the shared settings, and these of its own.\n\n" if own else ": the shared settings.\n\n")
            if own:
                parts.append(table(header, setting_rows(cls, own, {})))
                parts.append("\n")
            if changed:
                parts.append("Its own defaults of shared settings:\n\n")
                parts.append(table(header, setting_rows(cls, changed, shared)))
                parts.append("\n")
    from assent_devstack._progress import StartSettings

    parts.append(
        "\n## Starting on your machine\n\n`assent_devstack._progress.StartSettings`: how long `make run`, `make test`, "
        "`make bench` and the devstack wait for a server or a service to start. A start is waited for as long as it "
        "makes progress (its log grows or it spends CPU); it fails when the process exits, stalls, or reaches the "
        "bound.\n\n"
    )
    parts.append(table(header, setting_rows(StartSettings, StartSettings.model_fields, {})))
    return "".join(parts)


# --- metrics --------------------------------------------------------------------------------------------------


def collectors() -> dict[str, tuple[Any, str]]:
    """Every ``assent_`` family of prometheus_client's registry: its collector, and who serves it (``every``
    service when a module of ``assent`` defines it, else the service whose package does)."""
    from prometheus_client import REGISTRY

    importlib.import_module("assent.runtime")
    for service in services():
        importlib.import_module(f"{service}.entrypoint")
    where: dict[int, str] = {}
    for name, module in list(sys.modules.items()):
        owner = "every" if name.split(".")[0] == "assent" else name.split(".")[0]
        for value in list(vars(module).values()) if module is not None else []:
            where.setdefault(id(value), owner)
    found = {}
    for collector in list(REGISTRY._collector_to_names):
        for metric in collector.describe() if hasattr(collector, "describe") else []:
            if metric.name.startswith("assent_"):
                found[metric.name] = (collector, where.get(id(collector), "every"))
    return found


def metric_rows(found: Mapping[str, tuple[Any, str]], names: Iterable[str]) -> list[list[str]]:
    rows = []
    for name in sorted(names):
        collector = found[name][0]
        (metric,) = collector.describe()
        series = {"counter": f"{name}_total", "histogram": f"{name}_bucket, _sum, _count"}.get(metric.type, name)
        buckets = getattr(collector, "_upper_bounds", None)
        kind = metric.type
        if metric.type == "histogram" and buckets:
            kind += " (" + ", ".join(f"{b:g}" for b in buckets if b != float("inf")) + ")"
        labels = ", ".join(getattr(collector, "_labelnames", ()))
        rows.append([code(series), kind, code(labels) if labels else "", metric.documentation])
    return rows


def metrics_page() -> str:
    found = collectors()
    header = ["Series", "Type (buckets)", "Labels", "Help"]
    parts = [
        GENERATED,
        "# Metrics\n\n",
        "Every service serves Prometheus' text format at `/metrics` (open, like `/livez` and `/readyz`), beside "
        "the client library's own `process_*` and `python_*` families. `topic` is a topic's name without the "
        "deployment's prefix; the scrape job tells the services apart. Made from prometheus_client's registry once "
        "the shared runtime and each service are imported: what each family means and how to read it is in "
        "[Observability](../explanation/observability.md).\n\n",
        "## Every service\n\n",
        table(header, metric_rows(found, [n for n, (_, who) in found.items() if who == "every"])),
    ]
    for service in services():
        names = [n for n, (_, who) in found.items() if who == service]
        if names:
            parts += [f"\n## {service} only\n\n", table(header, metric_rows(found, names))]
    return "".join(parts)


# --- events ---------------------------------------------------------------------------------------------------


def load_export() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("contracts_export", REPO / "contracts" / "export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def schema_type(schema: Mapping[str, Any], link: typing.Callable[[str], str]) -> str:
    """A JSON Schema's type in a few words; a reference is a link made by ``link``."""
    if "$ref" in schema:
        return link(str(schema["$ref"]).rsplit("/", 1)[-1])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(schema_type(s, link) for s in schema[key])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return schema_type(schema["allOf"][0], link)
    if "const" in schema:
        return code(json.dumps(schema["const"]))
    if "enum" in schema:
        return ", ".join(code(json.dumps(v)) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(schema_type({**schema, "type": k}, link) for k in kind)
    if kind == "array":
        items = schema.get("items")
        return "array of " + schema_type(items, link) if isinstance(items, Mapping) else "array"
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        return "object of " + schema_type(schema["additionalProperties"], link)
    words = str(kind or "any")
    if "format" in schema:
        words += f" ({schema['format']})"
    return words


def limits(schema: Mapping[str, Any]) -> str:
    said = []
    for key, word in (
        ("minLength", "length ≥ {}"),
        ("maxLength", "length ≤ {}"),
        ("minimum", "≥ {}"),
        ("maximum", "≤ {}"),
        ("exclusiveMinimum", "> {}"),
        ("exclusiveMaximum", "< {}"),
        ("minItems", "items ≥ {}"),
        ("maxItems", "items ≤ {}"),
        ("pattern", "pattern `{}`"),
    ):
        if key in schema:
            said.append(word.format(schema[key]))
    if "default" in schema:
        said.append(f"default `{json.dumps(schema['default'])}`")
    return "; ".join(said)


def property_rows(schema: Mapping[str, Any], link: typing.Callable[[str], str]) -> list[list[str]]:
    required = set(schema.get("required", ()))
    rows = []
    for name, prop in (schema.get("properties") or {}).items():
        description = prop.get("description") or prop.get("title", "")
        if prop.get("title") == name.replace("_", " ").title():
            description = prop.get("description", "")
        said = limits(prop)
        rows.append(
            [
                code(name),
                schema_type(prop, link),
                "yes" if name in required else "",
                description + (f" ({said})" if said else ""),
            ]
        )
    return rows


def events_page(export: types.ModuleType) -> tuple[str, dict[str, str]]:
    participants: list[str] = export.participants()
    documents = {p: export.asyncapi(p) for p in participants}
    files = {f"reference/asyncapi/{p}.yaml": export._yaml(doc) for p, doc in documents.items()}

    channels: dict[str, dict[str, Any]] = {}
    messages: dict[str, dict[str, Any]] = {}
    shapes: dict[str, dict[str, Any]] = {}
    for participant, doc in documents.items():
        for channel_id, channel in doc["channels"].items():
            seen = channels.setdefault(
                channel_id, {"channel": channel, "send": set(), "receive": set(), "messages": []}
            )
            for message in channel.get("messages", {}):
                if message not in seen["messages"]:
                    seen["messages"].append(message)
        for operation in doc.get("operations", {}).values():
            channel_id = operation["channel"]["$ref"].rsplit("/", 1)[-1]
            channels[channel_id][operation["action"]].add(participant)
        messages.update(doc["components"].get("messages", {}))
        shapes.update(doc["components"].get("schemas", {}))

    def link(name: str) -> str:
        return f"[`{name}`](#{slug(name)})" if name in shapes else code(name)

    order = [c for c in channels if not c.endswith(".dlq")]
    ordered = sorted(
        channels,
        key=lambda c: (order.index(c.removesuffix(".dlq")) if c.removesuffix(".dlq") in order else len(order), c),
    )
    topics = []
    for channel_id in ordered:
        seen = channels[channel_id]
        channel = seen["channel"]
        kafka = channel.get("bindings", {}).get("kafka", {})
        key = re.match(r"Keyed by (\w+)", channel.get("description", ""))
        topics.append(
            [
                code(channel_id),
                code(key.group(1)) if key else "",
                kafka.get("partitions", ""),
                ", ".join(f"[`{m}`](#{slug(m)})" for m in seen["messages"]),
                ", ".join(p for p in participants if p in seen["send"]),
                ", ".join(p for p in participants if p in seen["receive"]),
            ]
        )

    parts = [
        GENERATED,
        "# Events\n\n",
        "The Kafka topics and the messages on them, made from the AsyncAPI 3.0 documents that `make contracts` "
        "exports (`contracts/export.py`, from the topic registry, the messages and every tool's arguments). The "
        "documents themselves: ",
        ", ".join(f"[{p}](asyncapi/{p}.yaml)" for p in participants),
        " (the same files as `contracts/asyncapi/`). Every topic name may carry the deployment's prefix "
        "(`ASSENT_TOPIC_PREFIX`). Messages are UTF-8 JSON objects with the envelope `id` (a UUID, the "
        "deduplication key), `type`, `v`, `ts`, `correlation_id` and `causation_id`; readers ignore fields they do "
        "not know. Headers: `traceparent` and `tracestate` (W3C trace context) and `message-type`. How versions "
        "change: [Connect a coach in another language](../how-to/connect-a-coach.md#versions).\n\n",
        "## Topics\n\n",
        "A topic's dead-letter topic (`<topic>.dlq`, one partition) follows it: those that read the topic send to "
        "it what they cannot handle.\n\n",
        table(["Topic", "Key", "Partitions", "Messages", "Sent by", "Read by"], topics),
        "\n## Messages\n\n",
    ]
    for name in sorted(messages):
        message = messages[name]
        schema = shapes.get(name, {})
        version = schema.get("x-assent-version")
        on = [code(c) for c, seen in channels.items() if name in seen["messages"] and not c.endswith(".dlq")]
        parts.append(f"### {name} {{ #{slug(name)} }}\n\n")
        parts.append(markdown(message.get("summary") or schema.get("description", "")) + "\n\n")
        facts = []
        if version is not None:
            facts.append(f"Version `v` {version}")
        key = message.get("bindings", {}).get("kafka", {}).get("key", {}).get("description")
        if key:
            facts.append(f"key: {key[0].lower() + key[1:].rstrip('.')}")
        if on:
            facts.append("on " + ", ".join(on))
        if facts:
            parts.append("; ".join(facts) + ".\n\n")
        rows = property_rows(schema, link)
        if rows:
            parts.append(table(["Field", "Type", "Required", "Description"], rows) + "\n")
        examples = message.get("examples") or []
        if examples:
            body = json.dumps(examples[0]["payload"], indent=2, ensure_ascii=False)
            parts.append(f'??? example "{examples[0].get("name", "Example")}"\n\n')
            parts.append("    ```json\n" + "".join(f"    {line}\n" for line in body.splitlines()) + "    ```\n\n")

    parts.append(
        "## Tools\n\nA `ToolCall`'s `tool` and the schema of its `arguments`, by tool; `Owner` is the "
        "service whose `<owner>.tool-calls` topic carries it.\n\n"
    )
    tools = export.tool_arguments()
    schemas = {tool: export.tool_schema(tool, owner, model) for tool, (owner, model) in tools.items()}

    def arguments(schema: Mapping[str, Any]) -> str:
        """The arguments' names, or the shapes of which the arguments are one (an action each)."""
        variants = schema.get("oneOf") or schema.get("anyOf") or []
        if variants:
            return "one of " + ", ".join(code(str(v.get("$ref", "")).rsplit("/", 1)[-1]) for v in variants)
        return ", ".join(code(name) for name in schema.get("properties", {})) or "none"

    parts.append(
        table(
            ["Tool", "Owner", "Arguments"],
            [
                [f"[`{tool}`](#{slug('tool-' + tool)})", owner, arguments(schemas[tool])]
                for tool, (owner, _) in sorted(tools.items())
            ],
        )
    )
    for tool, (owner, _) in sorted(tools.items()):
        schema = schemas[tool]
        defs = schema.get("$defs", {})

        def tool_link(name: str) -> str:
            return code(name)

        parts.append(f"\n### {tool} {{ #{slug('tool-' + tool)} }}\n\n")
        description = schema.get("description", "")
        parts.append((markdown(description) + "\n\n") if description else "")
        parts.append(f"Owner: {owner}. Arguments: {arguments(schema)}.\n\n")
        rows = property_rows(schema, tool_link)
        if rows:
            parts.append(table(["Argument", "Type", "Required", "Description"], rows))
        for def_name, definition in defs.items():
            def_rows = property_rows(definition, tool_link)
            if def_rows:
                parts.append(f"\n`{def_name}`: {cell(definition.get('description', ''))}\n\n")
                parts.append(table(["Field", "Type", "Required", "Description"], def_rows))

    parts.append("\n## Shapes\n\nThe objects the messages are made of.\n\n")
    for name in sorted(shapes):
        if name in messages:
            continue
        schema = shapes[name]
        parts.append(f"### {name} {{ #{slug(name)} }}\n\n")
        if schema.get("description"):
            parts.append(markdown(schema["description"]) + "\n\n")
        rows = property_rows(schema, link)
        if rows:
            parts.append(table(["Field", "Type", "Required", "Description"], rows) + "\n")
        elif "enum" in schema or "type" in schema:
            parts.append(f"{schema_type(schema, link)}\n\n")
    return "".join(parts), files


# --- HTTP API -------------------------------------------------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    from gateway.entrypoint import create_app
    from gateway.settings import GatewaySettings

    # Built, never started: no database, broker or Redis is reached. The key only lets the runtime be made.
    settings = GatewaySettings.model_construct(service_key=SecretStr("documentation-" + "x" * 32))
    return create_app(settings).openapi()


def http_pages(document: Mapping[str, Any]) -> dict[str, str]:
    schemas = document.get("components", {}).get("schemas", {})

    def link(name: str) -> str:
        return f"[`{name}`](http-api-schemas.md#{slug(name)})" if name in schemas else code(name)

    tags: dict[str, list[tuple[str, str, Mapping[str, Any]]]] = {}
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            tag = (operation.get("tags") or ["other"])[0]
            tags.setdefault(tag, []).append((method.upper(), path, operation))

    parts = [
        GENERATED,
        "# HTTP API\n\n",
        markdown(document["info"].get("description", "")),
        " Every route of the gateway's public API, made from its OpenAPI document (version "
        f"{document['info']['version']}), which the gateway serves at `/openapi.json` and shows at `/docs`: "
        "[openapi.json](openapi.json). Every request carries `Authorization: Bearer <token>` but the providers' "
        'webhooks; an error\'s body is `{"detail": ...}`, with `code`, `retry`, `error_id` or `decision_id` '
        'where they apply. A `503` with `"retry": true` also carries a `Retry-After` header (seconds): nothing was '
        "recorded, and the same request (with the same `Idempotency-Key`) succeeds once what was unavailable is back: "
        "a database, an owner, or Kafka, which has taken none of the gateway's messages for longer than "
        "`ASSENT_KAFKA_STALL_SECONDS` ([Writes while Kafka takes none](../how-to/run-a-kafka-cluster.md#stall)). "
        "The bodies' schemas: [HTTP API schemas](http-api-schemas.md). Who may call what: "
        "[Who may do what](../explanation/permissions.md).\n\n",
        "| Group | Routes |\n|---|---|\n",
    ]
    parts += [f"| [{tag}](#{slug(tag)}) | {len(operations)} |\n" for tag, operations in tags.items()]
    for tag, operations in tags.items():
        parts.append(f"\n## {tag} {{ #{slug(tag)} }}\n\n")
        for method, path, operation in operations:
            parts.append(f"### `{method} {path}` {{ #{slug(operation.get('operationId', method + path))} }}\n\n")
            summary = operation.get("summary", "")
            description = operation.get("description", "")
            if summary:
                parts.append(f"**{markdown(summary)}**\n\n")
            if description:
                parts.append(markdown(description) + "\n\n")
            parameters = operation.get("parameters", [])
            if parameters:
                rows = [
                    [
                        code(p["name"]),
                        p["in"],
                        schema_type(p.get("schema", {}), link),
                        "yes" if p.get("required") else "",
                        (p.get("description") or "")
                        + (f" ({limits(p.get('schema', {}))})" if limits(p.get("schema", {})) else ""),
                    ]
                    for p in parameters
                ]
                parts.append(table(["Parameter", "In", "Type", "Required", "Description"], rows) + "\n")
            body = operation.get("requestBody")
            if body:
                for media, content in body.get("content", {}).items():
                    parts.append(
                        f"Body ({media}{', required' if body.get('required') else ''}): "
                        f"{schema_type(content.get('schema', {}), link)}\n\n"
                    )
            responses = operation.get("responses", {})
            rows = []
            for status in sorted(responses):
                answer = responses[status]
                bodies = [
                    schema_type(content.get("schema", {}), link)
                    + ("" if media == "application/json" else f" ({media})")
                    for media, content in (answer.get("content") or {}).items()
                ]
                rows.append([code(status), answer.get("description", ""), ", ".join(bodies)])
            parts.append(table(["Status", "When", "Body"], rows) + "\n")

    schema_parts = [
        GENERATED,
        "# HTTP API schemas\n\n",
        "The bodies of the [HTTP API](http-api.md), from its OpenAPI document. A request's schema refuses what it "
        "does not say: no unknown field, no value of another type, no `null` for a field that may only be left "
        "out.\n\n",
    ]
    for name in sorted(schemas):
        schema = schemas[name]
        schema_parts.append(f"## {name} {{ #{slug(name)} }}\n\n")
        if schema.get("description"):
            schema_parts.append(markdown(schema["description"]) + "\n\n")
        rows = property_rows(schema, link)
        if rows:
            schema_parts.append(table(["Field", "Type", "Required", "Description"], rows) + "\n")
        else:
            schema_parts.append(schema_type(schema, link) + "\n\n")
    return {"reference/http-api.md": "".join(parts), "reference/http-api-schemas.md": "".join(schema_parts)}


# --- CLI ------------------------------------------------------------------------------------------------------


def exit_codes() -> list[tuple[int, str, str, str]]:
    """Each exit code of ``assent``: value, name, summary and description, from their one declaration."""
    from assent_cli.exit_codes import ExitCode

    return [(int(code), code.name, code.summary, code.description) for code in ExitCode]


def cli_page() -> str:
    import click

    from assent_cli import config, main

    group = main.cli
    root = click.Context(group, info_name="assent")

    def param_rows(command: click.Command, ctx: click.Context) -> list[list[str]]:
        rows = []
        for param in command.get_params(ctx):
            if isinstance(param, click.Option):
                names = ", ".join(code(o) for o in [*param.opts, *param.secondary_opts])
                kind = "flag" if param.is_flag else param.type.name
                if isinstance(param.type, click.Choice):
                    kind = " | ".join(code(str(c)) for c in param.type.choices)
                default = param.default if param.show_default and param.default is not None else ""
                env = f" (`{param.envvar}`)" if isinstance(param.envvar, str) else ""
                rows.append([names, kind, code(str(default)) if default != "" else "", (param.help or "") + env])
            elif isinstance(param, click.Argument):
                kind = param.type.name if not isinstance(param.type, click.Choice) else "choice"
                rows.append([code(param.human_readable_name), kind, "", "required" if param.required else "optional"])
        return rows

    parts = [
        GENERATED,
        "# CLI\n\n",
        markdown(main.__doc__) + "\n\n",
        markdown(config.__doc__) + "\n\n",
        "## Options of every command\n\n",
        f"`{group.get_usage(root).removeprefix('Usage: ')}`: {markdown(group.help)}\n\n",
        table(["Option", "Type", "Default", "Description"], param_rows(group, root)),
        "\n## Commands\n\n",
        table(
            ["Command", "What it does"],
            [
                [f"[`{name}`](#{slug('assent-' + name)})", (group.commands[name].help or "").split("\n\n")[0]]
                for name in group.list_commands(root)
            ],
        ),
    ]

    def command_section(command: click.Command, ctx: click.Context, level: str) -> None:
        path = ctx.command_path.removeprefix("assent ")
        parts.append(f"\n{level} assent {path} {{ #{slug('assent-' + path.replace(' ', '-'))} }}\n\n")
        parts.append(f"`{command.get_usage(ctx).removeprefix('Usage: ')}`\n\n")
        parts.append(markdown(command.help) + "\n\n")
        rows = param_rows(command, ctx)
        rows = [r for r in rows if "--help" not in r[0]]
        if rows:
            parts.append(table(["Argument or option", "Type", "Default", "Description"], rows))
        if isinstance(command, click.Group):  # its own commands (``assent audit verify``), each a section
            for sub in command.list_commands(ctx):
                command_section(
                    command.commands[sub], click.Context(command.commands[sub], info_name=sub, parent=ctx), "####"
                )

    for name in group.list_commands(root):
        command = group.commands[name]
        command_section(command, click.Context(command, info_name=name, parent=root), "###")
    parts += [
        "\n## Exit codes\n\n",
        "What scripts may rely on (`assent codes` prints them), from `assent_cli.exit_codes`.\n\n",
        table(
            ["Code", "Name", "Meaning", "When"],
            [
                [code(str(value)), code(name), summary, description]
                for value, name, summary, description in exit_codes()
            ],
        ),
    ]
    return "".join(parts)


# --- kinds ----------------------------------------------------------------------------------------------------


def kinds_page() -> str:
    from assent.kinds import KINDS

    rows = []
    for spec in KINDS.values():
        options = ""
        if spec.options is not None:
            fields = ", ".join(code(name) for name in spec.options.model.model_fields)
            options = f"{', '.join(code(d) for d in spec.options.decisions)}: {fields}"
        rows.append(
            [
                code(spec.name),
                spec.owner,
                spec.section,
                ", ".join(code(t) for t in spec.tools),
                ", ".join(code(t) for t in spec.read_tools),
                ", ".join(f"{code(a)}: {label}" for a, label in spec.actions.items()),
                ", ".join(f"{code(d)} → {code(o)}" for d, o in spec.decisions.items())
                + f"; decline: {spec.decline_label}",
                code(f"…/{spec.endpoint}/{{seq}}")
                if spec.addressed_by == "session"
                else code(f"/api/agents/{{agent_id}}/{spec.endpoint}/{{proposal_id}}"),
                options,
                "yes" if spec.decided_alone else "",
                code(spec.supersedes) if spec.supersedes else "",
                ", ".join(code(o.name) + ("" if o.chat_linked else " (chat not linked)") for o in spec.origins),
                "yes" if spec.revertible else "",
            ]
        )
    return "".join(
        [
            GENERATED,
            "# Kinds\n\n",
            "The kind registry (`assent.kinds.KINDS`: the rows each owner declares in its contract package, "
            "`services/<owner>/contract/src/<owner>_contract/kinds.py`): for each kind its owner, the section and "
            "labels the desk shows, the tools that propose it and those that read what it binds, the actions a "
            "proposal may take with each one's apply label, the decisions it takes with the outcome each produces, "
            "where it is decided (below `/api/studio/sessions/{session_id}`, or on the agent's page) and the options "
            "a decision takes there besides (fields of its body), whether Apply all leaves it to its own decision, "
            "which waiting proposal a new one replaces, and the origins its cards name (`card.origin`; the activity "
            "feed links the chat of each but those marked), and whether an applied request of it can be reverted "
            "([Revert an applied change](../how-to/revert-a-change.md)). The contracts, the tool routing and the "
            "gateway's decision routes derive from it. How a kind is built: "
            "[The design](../explanation/design.md#kit).\n\n",
            table(
                [
                    "Kind",
                    "Owner",
                    "Section",
                    "Proposing tools",
                    "Reading tools",
                    "Actions: apply label",
                    "Decisions → outcomes",
                    "Decided at",
                    "Options",
                    "Decided alone",
                    "Replaces",
                    "Origins",
                    "Revertible",
                ],
                rows,
            ),
        ]
    )


# --- all ------------------------------------------------------------------------------------------------------


def pages() -> Iterator[tuple[str, str]]:
    document = openapi_document()
    yield "reference/openapi.json", json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    yield from http_pages(document).items()
    events, files = events_page(load_export())
    yield "reference/events.md", events
    yield from files.items()
    yield "reference/settings.md", settings_page()
    yield "reference/metrics.md", metrics_page()
    yield "reference/cli.md", cli_page()
    yield "reference/kinds.md", kinds_page()


def main() -> int:
    out = Path(sys.argv[1])
    for name, text in pages():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
