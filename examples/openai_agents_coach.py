"""An OpenAI Agents SDK agent that proposes through Assent: it reads an agent's Memory and proposes adding a line;
the proposing tool returns once people have decided the request in Assent, and the agent answers with the outcome.
The model is scripted (no network) so the example runs anywhere; any model of the SDK takes its place as is.

    uv run python examples/openai_agents_coach.py --org org_acme --guild guild_support --operator olga@example.com \\
        --agent agent_ada [--bootstrap-servers 127.0.0.1:9092] [--topic-prefix P]

Needs ``assent[openai-agents]``. tests/test_framework_adapters.py runs it against the real services.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, ModelSettings, ModelTracing, RunConfig, Runner, Usage
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from assent.adapters.openai_agents import assent_function_tools
from assent.coach import CoachClient, CoachTurn

SCHEMAS = Path(__file__).resolve().parents[1] / "contracts" / "schemas" / "tools"

Step = Callable[[list[Any]], TResponseOutputItem]


class ScriptedModel(Model):
    """A model that answers from a script: each call takes the next step, a function of the input items so far."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.taken = 0

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        step = self.steps[self.taken]
        self.taken += 1
        items = [{"type": "message", "role": "user", "content": input}] if isinstance(input, str) else list(input)
        return ModelResponse(output=[step(items)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the scripted model answers whole responses only")


def script(agent_id: str, line: str) -> list[Step]:
    """Read the Memory, propose it with ``line`` added, then answer with what people decided."""

    def read(items: list[Any]) -> TResponseOutputItem:
        return function_call("studio_read_memory", {"agent_id": agent_id})

    def propose(items: list[Any]) -> TResponseOutputItem:
        memory = json.loads(last_output(items))["output"]
        arguments = {
            "agent_id": agent_id,
            "content": memory["content"] + line + "\n",
            "base_version": memory["version"],
            "reason": "Refund threads got mixed up.",
        }
        return function_call("studio_edit_memory", arguments)

    def answer(items: list[Any]) -> TResponseOutputItem:
        decided = json.loads(last_output(items))
        outcomes = ", ".join(decision["outcome"] for decision in decided["decisions"])
        return ResponseOutputMessage(
            id=f"msg_{uuid.uuid4().hex[:12]}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=f"People decided: {outcomes}.", annotations=[])],
        )

    return [read, propose, answer]


def function_call(name: str, arguments: dict[str, Any]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", call_id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=json.dumps(arguments)
    )


def last_output(items: list[Any]) -> str:
    """The output of the last function call among the input items."""
    outputs = [item for item in items if isinstance(item, dict) and item.get("type") == "function_call_output"]
    return str(outputs[-1]["output"])


async def propose_with_agents_sdk(turn: CoachTurn, model: Model, *, timeout: float = 300.0) -> str:
    """Run one turn of the agent; its final answer."""
    agent: Agent[None] = Agent(
        name="Support coach",
        instructions="Improve the support agents' Memory; every change is proposed and decided by people.",
        model=model,
        tools=list(
            assent_function_tools(
                turn, ["studio_read_memory", "studio_edit_memory"], schemas=SCHEMAS, decision_timeout=timeout
            )
        ),
    )
    result = await Runner.run(
        agent,
        "Ada mixes up refund threads: teach her to quote the order number.",
        run_config=RunConfig(tracing_disabled=True),  # the SDK's traces would go to OpenAI's servers
    )
    return str(result.final_output)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic-prefix", default="")
    parser.add_argument("--org", required=True)
    parser.add_argument("--guild", required=True)
    parser.add_argument("--operator", required=True)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--line", default="Quote the order number.")
    args = parser.parse_args()
    async with CoachClient(args.bootstrap_servers, topic_prefix=args.topic_prefix) as coach:
        session = await coach.open_session(org_id=args.org, source_guild_id=args.guild, operator_user_id=args.operator)
        print(f"session {session.session_id}: decide its request in Assent", flush=True)
        model = ScriptedModel(script(args.agent, args.line))
        print(await propose_with_agents_sdk(session.begin_turn(), model))


if __name__ == "__main__":
    asyncio.run(main())
