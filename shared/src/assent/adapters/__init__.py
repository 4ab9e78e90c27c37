"""Adapters that let an agent framework's agent propose through Assent, each built on
:class:`assent.coach.CoachClient` and each an optional extra of the ``assent`` package:

- :mod:`assent.adapters.langgraph` (``pip install assent[langgraph]``): LangGraph tools that publish the coach's
  tool calls, and a node that pauses the graph on the step's requests and resumes it from the turn's continuation,
  so a graph's ``interrupt`` is decided by people in Assent rather than in the graph's process;
- :mod:`assent.adapters.openai_agents` (``pip install assent[openai-agents]``): OpenAI Agents SDK tools whose
  approval is Assent's decision: a call that proposes returns once people have decided, with the outcome.

This module holds what both share: each tool's published argument schema and the text a model reads of a result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from assent.contracts import ToolResult, TurnContinuation


def published_schema(tool: str, schemas: Path | None) -> tuple[dict[str, Any], str]:
    """The JSON Schema of ``tool``'s arguments that the contracts publish (``contracts/schemas/tools/<tool>.json``
    in ``schemas``), and its description; an object of any arguments where it is not at hand (the owner still
    checks them, and answers ``invalid_arguments`` naming each bad one)."""
    path = None if schemas is None else schemas / f"{tool}.json"
    if path is None or not path.is_file():
        return {"type": "object", "properties": {}}, f"The tool {tool} of Assent, answered by its owner."
    schema: dict[str, Any] = json.loads(path.read_text())
    description = str(schema.pop("description", f"The tool {tool} of Assent."))
    for key in ("$schema", "$id", "title", "x-assent-owner", "x-assent-kind"):
        schema.pop(key, None)
    return {"type": "object", **schema}, description


def result_for_model(result: ToolResult) -> dict[str, Any]:
    """What a model reads of a tool's result: its output, or the request it made (pending a decision), or the
    owner's refusal."""
    if not result.ok:
        error = result.error
        return {"ok": False, "error": None if error is None else error.model_dump(mode="json")}
    if result.widget is not None:
        return {
            "ok": True,
            "pending": result.widget.await_operator,
            "seq": result.seq,
            "widget": result.widget.model_dump(mode="json"),
        }
    return {"ok": True, "output": result.output}


def decisions_for_model(continuation: TurnContinuation) -> dict[str, Any]:
    """What a model reads of the decisions that resumed its turn: the continuation's text and each outcome."""
    return {
        "text": continuation.text,
        "decisions": [decision.model_dump(mode="json") for decision in continuation.decisions],
    }
