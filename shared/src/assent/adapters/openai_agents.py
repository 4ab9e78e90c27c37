"""The OpenAI Agents SDK through Assent (``pip install assent[openai-agents]``): function tools whose approval is
Assent's decision. A tool that reads answers at once; a tool that proposes publishes the request, ends the step
and returns only once people have decided it in Assent (the console, the CLI, the HTTP API), with the outcome, so
the agent's next model call knows what became of it. The owner applies the change when a person applies it, so the
SDK's own in-process approval (``needs_approval``) has nothing left to approve and is not used.

Usage::

    async with CoachClient(bootstrap, topic_prefix=prefix) as coach:
        session = await coach.open_session(org_id=..., source_guild_id=..., operator_user_id=...)
        turn = session.begin_turn()
        agent = Agent(name="coach", model=..., tools=assent_function_tools(turn, ["studio_read_memory",
                                                                              "studio_edit_memory"]))
        result = await Runner.run(agent, "...")

The SDK runs the tool calls of one model response concurrently; here they take the turn one at a time, and a request
holds it until it is decided, so each request is a step of the turn of its own: the requests of one response are
decided one after another (a later call is published once the earlier request is decided).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from assent.coach import CoachTurn

from . import decisions_for_model, published_schema, result_for_model

__all__ = ["assent_function_tools"]


def assent_function_tools(
    turn: CoachTurn,
    tools: Iterable[str],
    *,
    schemas: Path | None = None,
    timeout: float = 15.0,
    decision_timeout: float = 300.0,
) -> list[FunctionTool]:
    """A function tool per name in ``tools``, each calling it in ``turn``. The tool's output is what a model reads
    of the result (:func:`assent.adapters.result_for_model`, as JSON); for a request, once decided (within
    ``decision_timeout`` seconds), also the continuation's text and decisions
    (:func:`assent.adapters.decisions_for_model`). ``schemas``: the published tools' schemas
    (``contracts/schemas/tools``), which give the model each tool's arguments and description."""
    one_at_a_time = asyncio.Lock()  # a request and its decision hold the turn's step

    def tool(name: str) -> FunctionTool:
        schema, description = published_schema(name, schemas)

        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            parsed = json.loads(arguments or "{}")
            async with one_at_a_time:
                result = await turn.call(name, parsed, timeout=timeout)
                answer = result_for_model(result)
                if not (result.ok and result.widget is not None and result.widget.await_operator):
                    return json.dumps(answer)
                await turn.end_step((result.tool_call_id,))
                continuation = await turn.continuation(timeout=decision_timeout)
            return json.dumps({**answer, "pending": False, **decisions_for_model(continuation)})

        return FunctionTool(
            name=name,
            description=description,
            params_json_schema=schema,
            on_invoke_tool=invoke,
            strict_json_schema=False,  # the published schemas are the owners' own, not OpenAI's strict subset
        )

    return [tool(name) for name in tools]
