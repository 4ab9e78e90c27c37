"""The MCP face's tool list: every tool of the kind registry, each with the schema its contract publishes, and a list
that MCP's own types accept at every protocol version the SDK speaks."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
from mcp.server.runner import _dump_result
from mcp_types import methods
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

from assent.topics import TOOL_ROUTES
from gateway.mcp_face import OPEN_SESSION, WAIT, default_schemas, registry_tools

SCHEMAS = Path(__file__).resolve().parents[3] / "contracts" / "schemas" / "tools"


def test_every_registry_tool_is_listed_with_its_published_schema() -> None:
    assert default_schemas() == SCHEMAS
    tools = {tool.name: tool for tool in registry_tools(SCHEMAS)}
    assert set(tools) == set(TOOL_ROUTES)
    for name, tool in tools.items():
        published = json.loads((SCHEMAS / f"{name}.json").read_text())
        assert tool.input_schema["type"] == "object", name
        assert tool.input_schema.get("properties") == published.get("properties"), name
        assert tool.input_schema.get("required") == published.get("required"), name
        assert tool.description == published["description"], name


def test_without_the_published_schemas_each_tool_takes_an_object() -> None:
    assert {tool.input_schema["type"] for tool in registry_tools(None)} == {"object"}


def test_the_list_is_valid_mcp_at_every_version() -> None:
    result = _dump_result(types.ListToolsResult(tools=[OPEN_SESSION, WAIT, *registry_tools(SCHEMAS)]))
    for version in SUPPORTED_PROTOCOL_VERSIONS:
        methods.serialize_server_result("tools/list", version, result)
