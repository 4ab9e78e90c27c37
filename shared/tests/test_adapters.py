"""What the agent frameworks' adapters (``assent.adapters``) give a model, without servers: each tool's published
schema and description, and a result as the model reads it. The whole turns: tests/test_framework_adapters.py."""

from __future__ import annotations

from pathlib import Path

from assent.adapters import decisions_for_model, published_schema, result_for_model
from assent.adapters.langgraph import assent_tools
from assent.adapters.openai_agents import assent_function_tools
from assent.contracts import DecisionSummary, ToolError, ToolResult, TurnContinuation

SCHEMAS = Path(__file__).resolve().parents[2] / "contracts" / "schemas" / "tools"


def test_a_tool_s_schema_is_the_published_one() -> None:
    schema, description = published_schema("studio_edit_memory", SCHEMAS)
    assert schema["type"] == "object"
    assert set(schema["required"]) == {"agent_id", "content", "base_version", "reason"}
    assert not {"$schema", "$id", "title", "x-assent-owner", "x-assent-kind"} & set(schema)
    assert description.startswith("The arguments of studio_edit_memory")


def test_without_the_schemas_a_tool_takes_any_object() -> None:
    assert published_schema("studio_edit_memory", None)[0] == {"type": "object", "properties": {}}
    assert published_schema("no_such_tool", SCHEMAS)[0] == {"type": "object", "properties": {}}


def test_what_a_model_reads_of_results_and_decisions() -> None:
    read = ToolResult(session_id="s", seq=1, tool_call_id="c1", tool="studio_read_memory", ok=True, output={"a": 1})
    assert result_for_model(read) == {"ok": True, "output": {"a": 1}}
    refused = ToolResult(
        session_id="s",
        seq=2,
        tool_call_id="c2",
        tool="studio_edit_memory",
        ok=False,
        error=ToolError(status=409, code="version_moved", message="moved"),
    )
    assert result_for_model(refused) == {
        "ok": False,
        "error": {"status": 409, "code": "version_moved", "message": "moved"},
    }
    decision = DecisionSummary(
        tool_call_id="c3", seq=3, proposal_id="p", kind="memory", target="Ada", outcome="applied"
    )
    continuation = TurnContinuation(session_id="s", turn_id="t", step=0, decisions=(decision,), text="decided")
    assert decisions_for_model(continuation) == {"text": "decided", "decisions": [decision.model_dump(mode="json")]}


def test_each_framework_gets_a_tool_per_name_with_the_published_arguments() -> None:
    names = ["studio_read_memory", "studio_edit_memory"]
    turn = None  # the tools only call the turn when they run
    graph_tools = assent_tools(turn, names, schemas=SCHEMAS)  # type: ignore[arg-type]
    assert [tool.name for tool in graph_tools] == names
    assert graph_tools[1].tool_call_schema is not None
    sdk_tools = assent_function_tools(turn, names, schemas=SCHEMAS)  # type: ignore[arg-type]
    assert [tool.name for tool in sdk_tools] == names
    assert set(sdk_tools[1].params_json_schema["required"]) == {"agent_id", "content", "base_version", "reason"}
    assert sdk_tools[1].strict_json_schema is False
