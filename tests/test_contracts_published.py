"""The published contracts (contracts/): they are what the code says, they are valid AsyncAPI 3 and JSON Schema, the
golden examples fit them; the tool call of contracts/README.md, sent with Kafka's own console producer, is answered;
and a tool call that cannot be read is answered with an error naming the bad field whenever its envelope can be read
(only what cannot be answered is dead-lettered).

The AsyncAPI documents are checked against the official AsyncAPI 3.0.0 JSON Schema, vendored in
``tests/data/asyncapi-3.0.0.schema.json`` (``schemas/3.0.0-without-$id.json`` of @asyncapi/specs 6.11.1,
Apache-2.0).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import re
import shlex
import shutil
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from aiokafka import AIOKafkaProducer

from assent.contracts import MalformedMessage, Message, ToolCall, parse_message
from assent.contracts.envelope import examples_folder
from assent.runtime.malformed_calls import MALFORMED_TOOL_CALL, answer_malformed_call
from assent.topics import REGISTRY, TOOL_RESULTS, TOOL_ROUTES
from contracts import export
from tests.conftest import Stack, new_world, wait_for

REPO = Path(__file__).resolve().parents[1]
# Every message's examples, shared's and the owners' (reading REGISTRY imported every contract package).
EXAMPLES = sorted(
    path for folder in {examples_folder(m) for m in Message.registry.values()} for path in folder.glob("*.json")
)
ASYNCAPI_SCHEMA = json.loads((REPO / "tests" / "data" / "asyncapi-3.0.0.schema.json").read_text())
MESSAGES = REPO / "contracts" / "schemas" / "messages"
TOOLS = REPO / "contracts" / "schemas" / "tools"


def example(type_: str) -> dict[str, Any]:
    return json.loads(next(p for p in EXAMPLES if p.name == f"{type_}.v1.json").read_text())


# --- the files are what the code says -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered() -> dict[Path, str]:
    return export.render()


def test_the_exported_files_are_what_the_code_says(rendered: dict[Path, str]) -> None:
    stale = export.differences(rendered)
    assert stale == [], f"out of date with the code (run: make contracts): {stale}"


def test_a_file_that_differs_from_the_code_is_found(rendered: dict[Path, str]) -> None:
    files = rendered
    schema = MESSAGES / "ToolCall.json"
    changed = {**files, schema: files[schema].replace('"seq"', '"sequence"')}
    assert export.differences(changed) == ["contracts/schemas/messages/ToolCall.json"]


def test_every_message_and_every_routed_tool_is_exported() -> None:
    assert {p.stem for p in MESSAGES.glob("*.json")} == {m.__name__ for topic in REGISTRY for m in topic.messages}
    exported = {p.stem: json.loads(p.read_text()) for p in TOOLS.glob("*.json")}
    assert set(exported) == set(TOOL_ROUTES)
    for tool, schema in exported.items():
        assert TOOL_ROUTES[tool].name == f"{schema['x-assent-owner']}.tool-calls", tool


# --- JSON Schema ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_golden_example_fits_its_exported_schema(path: Path) -> None:
    message = json.loads(path.read_text())
    schema = json.loads((MESSAGES / f"{message['type']}.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(message)) == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda m: m.pop("session_id"), "session_id"),
        (lambda m: m.pop("type"), "type"),
        (lambda m: m.update(seq=-1), "seq"),
        (lambda m: m.update(arguments=[1, 2]), "arguments"),
        (lambda m: m.update(v=2), "v"),
        (lambda m: m.update(tool_call_id=""), "tool_call_id"),
    ],
)
def test_the_schema_refuses_what_a_reader_refuses(change: Any, field: str) -> None:
    message = example("ToolCall")
    change(message)
    schema = json.loads((MESSAGES / "ToolCall.json").read_text())
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(message))
    assert {str(e.path[0]) if e.path else e.message.split("'")[1] for e in errors} == {field}
    with pytest.raises(MalformedMessage):
        parse_message(json.dumps(message))


def test_the_golden_tool_calls_fit_their_tools_argument_schemas() -> None:
    calls = [json.loads(p.read_text()) for p in EXAMPLES if p.name.startswith("ToolCall.")]
    assert len(calls) == 2
    for call in calls:
        schema = json.loads((TOOLS / f"{call['tool']}.json").read_text())
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(call["arguments"])) == []
        assert list(jsonschema.Draft202012Validator(schema).iter_errors({})) != [], call["tool"]


# --- AsyncAPI -----------------------------------------------------------------------------------------------------


@functools.cache
def _documents() -> dict[str, dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where PyYAML has it: several times faster
    return {
        p.stem: yaml.load(p.read_text(), Loader=loader)
        for p in sorted((REPO / "contracts" / "asyncapi").glob("*.yaml"))
    }


def documents() -> dict[str, dict[str, Any]]:
    """The AsyncAPI documents as checked in (a copy each time: a test may change one)."""
    return copy.deepcopy(_documents())


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


def resolve(document: dict[str, Any], ref: str) -> Any:
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def test_each_document_is_valid_asyncapi_3_and_every_reference_resolves() -> None:
    validator = jsonschema.Draft7Validator(ASYNCAPI_SCHEMA)
    docs = documents()
    assert set(docs) == set(export.participants())
    for name, document in docs.items():
        assert [e.message for e in validator.iter_errors(document)] == [], name
        for ref in refs(document):
            assert ref.startswith("#/"), (name, ref)
            resolve(document, ref)  # raises KeyError when it points nowhere
    broken = docs["coach"]
    next(iter(broken["operations"].values()))["action"] = "publish"  # AsyncAPI 2's word, not 3's
    assert list(validator.iter_errors(broken)) != []


def test_each_document_has_the_operations_the_registry_gives_its_participant() -> None:
    docs = documents()
    for name, document in docs.items():
        expected = {f"send_{t.name}" for t in REGISTRY if name in t.producers}
        expected |= {f"receive_{t.name}" for t in REGISTRY if name in t.consumers}
        if name != export.COACH:
            expected |= {f"send_{t.dlq_name()}" for t in REGISTRY if name in t.consumers}
        assert set(document["operations"]) == expected, name
    coach = docs["coach"]
    assert coach["channels"]["edits.tool-calls"]["address"] == "{prefix}edits.tool-calls"
    assert list(coach["channels"]["edits.tool-calls"]["messages"]) == ["ToolCall"]
    assert coach["operations"]["receive_studio.tool-results"]["action"] == "receive"
    tool_call = coach["components"]["messages"]["ToolCall"]
    assert tool_call["bindings"]["kafka"]["key"]["description"] == "The message's session_id."
    assert [e["name"] for e in tool_call["examples"]] == ["ToolCall_v1_2", "ToolCall_v1"]
    payload = resolve(coach, tool_call["payload"]["$ref"])
    assert payload["required"][0] == "type" and "session_id" in payload["required"]
    for item in coach["components"]["messages"]["ToolCall"]["examples"]:
        schema = {**payload, "components": coach["components"]}
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(item["payload"])) == []


# --- a call that cannot be read (no broker) --------------------------------------------------------------------


def _unreadable(message: dict[str, Any]) -> MalformedMessage:
    try:
        parse_message(json.dumps(message), accept=(ToolCall,))
    except MalformedMessage as exc:
        return exc
    raise AssertionError("the message was read")


@pytest.mark.parametrize(
    ("change", "answered"),
    [
        (lambda m: m.pop("step"), "step: Field required"),
        (lambda m: m.update(arguments="x"), "arguments: Input should be a valid dictionary"),
        (lambda m: m["session"].pop("org_id"), "session.org_id: Field required"),
        (lambda m: m.update(v=2), "unsupported version 2 of 'ToolCall' (current is 1)"),
        (lambda m: (m.pop("type"), m.pop("turn_id")), "type: Field required; turn_id: Field required"),
        (lambda m: m.pop("tool_call_id"), None),  # no envelope: dead-lettered
        (lambda m: m.update(seq="eight"), None),
        (lambda m: m.update(session_id=""), None),
        (lambda m: m.update(type="ToolResult", ok="yes"), None),  # another message: dead-lettered
    ],
)
def test_a_call_is_answered_with_the_bad_field_named_whenever_its_envelope_can_be_read(
    change: Any, answered: str | None
) -> None:
    message = json.loads(next(p for p in EXAMPLES if p.name == "ToolCall.v1.2.json").read_text())
    change(message)
    raw = json.dumps(message).encode()
    reply = answer_malformed_call(raw, _unreadable(message), "edits.tool-calls/0/7")
    if answered is None:
        assert reply is None
        return
    assert reply is not None
    topic, key, result = reply
    assert (topic, key) == (TOOL_RESULTS, "ses_1")
    assert (result.session_id, result.seq, result.tool_call_id, result.tool, result.ok) == (
        "ses_1",
        8,
        "call_2",
        "propose_source_change",
        False,
    )
    assert result.error is not None
    assert (result.error.status, result.error.code) == (422, MALFORMED_TOOL_CALL)
    assert result.error.message == f"the tool call cannot be read: {answered}"
    assert result.causation_id == uuid.UUID(message["id"])
    again = answer_malformed_call(raw, _unreadable(message), "edits.tool-calls/0/7")
    assert again is not None and again[2].id == result.id  # delivered again: the same answer, dropped as a duplicate


def test_bytes_that_are_not_json_are_not_answered() -> None:
    for raw in (b"\xff", b"[1]", b'"ToolCall"'):
        try:
            parse_message(raw, accept=(ToolCall,))
        except MalformedMessage as exc:
            assert answer_malformed_call(raw, exc, "t/0/0") is None
        else:
            raise AssertionError(raw)


# --- against the real services ----------------------------------------------------------------------------------

integration = pytest.mark.integration


def readme_example() -> tuple[str, list[str]]:
    """The line contracts/README.md pipes into the console producer, and the producer's arguments."""
    text = (REPO / "contracts" / "README.md").read_text()
    block = re.search(r"<!-- tested by tests/test_contracts_published.py.*?-->\n```sh\n(.*?)```", text, re.S)
    assert block is not None
    words = shlex.split(block.group(1).replace("\\\n", " "))
    assert words[0] == "echo" and words[2] == "|" and words[3] == "kafka-console-producer.sh"
    return words[1], words[4:]


def _with(arguments: list[str], option: str, value: str) -> list[str]:
    at = arguments.index(option)
    return [*arguments[: at + 1], value, *arguments[at + 2 :]]


async def tool_result(stack: Stack, tool_call_id: str) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        for record in await stack.records(stack.topic(TOOL_RESULTS.name)):
            result = json.loads(record.value or b"{}")
            if result.get("tool_call_id") == tool_call_id:
                return result
        return None

    answer: dict[str, Any] = await wait_for(found, timeout=30)
    return answer


@integration
async def test_the_readme_tool_call_sent_with_kafkas_console_producer_is_answered(stack: Stack) -> None:
    from assent_devstack._kafka import default_kafka_libs

    libs = default_kafka_libs()
    if shutil.which("java") is None or not any(libs.glob("kafka_2.13-*.jar")):
        pytest.skip("Kafka's jars (and Java) are not on this machine: the console producer cannot run")
    async with stack.http() as http:
        world = await new_world(http)
    line, arguments = readme_example()
    n = uuid.uuid4().hex[:8]
    for old, new in (
        ("ses_demo", f"ses_{n}"),
        ("call_demo_1", f"call_{n}"),
        ("org_acme", world.org_id),
        ("guild_support", world.guild_id),
        ("agent_ada", world.agent_id),
    ):
        line = line.replace(old, new)
    arguments = _with(arguments, "--bootstrap-server", stack.endpoints.kafka)
    arguments = _with(arguments, "--topic", stack.topic("edits.tool-calls"))
    producer = await asyncio.create_subprocess_exec(
        "java",
        "-cp",
        f"{libs}/*",
        "kafka.tools.ConsoleProducer",
        *arguments,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await producer.communicate(line.encode() + b"\n")
    assert producer.returncode == 0, output.decode(errors="replace")[-2000:]

    result = await tool_result(stack, f"call_{n}")
    assert (result["session_id"], result["seq"], result["tool"], result["ok"]) == (
        f"ses_{n}",
        1,
        "studio_read_memory",
        True,
    )
    assert result["output"]["agent_id"] == world.agent_id
    assert result["output"]["content"] == "Prefer short answers.\n"
    # The record's key is the session, as the README's line says: its results stay in order with its calls.
    records = await stack.records(
        stack.topic("edits.tool-calls"), lambda r: b'"tool_call_id":"call_' + n.encode() in (r.value or b"")
    )
    assert [r.key for r in records] == [f"ses_{n}".encode()]


@integration
async def test_a_malformed_call_is_answered_with_the_bad_field_and_only_an_unreadable_one_is_dead_lettered(
    stack: Stack,
) -> None:
    n = uuid.uuid4().hex[:8]
    session = f"ses_{n}"
    base = {
        "type": "ToolCall",
        "v": 1,
        "session_id": session,
        "turn_id": "turn_1",
        "step": 0,
        "tool": "studio_read_memory",
        "arguments": {"agent_id": "agent_x"},
        "session": {"org_id": f"org_{n}", "source_guild_id": f"guild_{n}", "operator_user_id": "user_1"},
    }
    unreadable = {**base, "seq": 1, "id": str(uuid.uuid4())}  # no tool_call_id: nobody to answer
    not_a_call = {**base, "type": "ToolResult", "seq": 2, "tool_call_id": f"call_{n}_r", "ok": True}
    missing_step = {k: v for k, v in base.items() if k != "step"} | {"seq": 3, "tool_call_id": f"call_{n}_a"}
    newer = {**base, "v": 2, "seq": 4, "tool_call_id": f"call_{n}_b"}
    producer = AIOKafkaProducer(bootstrap_servers=stack.endpoints.kafka)
    await producer.start()
    try:
        # One key, so one partition, read in this order: once the last is answered, the first two were handled.
        for message in (unreadable, not_a_call, missing_step, newer):
            await producer.send_and_wait(
                stack.topic("edits.tool-calls"), json.dumps(message).encode(), key=session.encode()
            )
    finally:
        await producer.stop()

    answered = await tool_result(stack, f"call_{n}_b")
    assert answered["ok"] is False
    assert answered["error"] == {
        "status": 422,
        "code": MALFORMED_TOOL_CALL,
        "message": "the tool call cannot be read: unsupported version 2 of 'ToolCall' (current is 1)",
    }
    first = await tool_result(stack, f"call_{n}_a")
    assert (first["session_id"], first["seq"], first["tool"]) == (session, 3, "studio_read_memory")
    assert first["error"]["message"] == "the tool call cannot be read: step: Field required"

    results = await stack.records(stack.topic(TOOL_RESULTS.name), lambda r: session.encode() in (r.value or b""))
    assert sorted(json.loads(r.value or b"")["seq"] for r in results) == [3, 4]
    dead = await stack.records(stack.topic("edits.tool-calls.dlq"), lambda r: session.encode() in (r.value or b""))
    assert [json.loads(r.value or b"")["seq"] for r in dead] == [1, 2]
    reasons = [dict(r.headers)["x-dlq-reason"] for r in dead]
    assert reasons == [b"malformed", b"malformed"]
    assert b"tool_call_id" in dict(dead[0].headers)["x-dlq-error"]
