"""A LangGraph agent that proposes through Assent: it reads an agent's Memory, proposes adding a line, pauses until
people decide the request in Assent, and answers with the decision. The model is scripted (no network) so the
example runs anywhere; a real chat model (any LangChain ``BaseChatModel`` with tool calling) takes its place as is.

    uv run python examples/langgraph_coach.py --org org_acme --guild guild_support --operator olga@example.com \\
        --agent agent_ada [--bootstrap-servers 127.0.0.1:9092] [--topic-prefix P]

Needs ``assent[langgraph]``. tests/test_framework_adapters.py runs it against the real services.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable

from assent.adapters.langgraph import coach_graph, run_turn
from assent.coach import CoachClient, CoachTurn

SCHEMAS = Path(__file__).resolve().parents[1] / "contracts" / "schemas" / "tools"

Step = Callable[[list[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script: each call takes the next step, a function of the messages so far."""

    steps: list[Step]
    taken: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self  # the script names the tools itself

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        step = self.steps[self.taken]
        self.taken += 1
        return ChatResult(generations=[ChatGeneration(message=step(messages))])


def script(agent_id: str, line: str) -> list[Step]:
    """Read the Memory, propose it with ``line`` added, then answer with what people decided."""

    def read(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(content="", tool_calls=[tool_call("studio_read_memory", {"agent_id": agent_id})])

    def propose(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        assert isinstance(last, ToolMessage), last
        memory = json.loads(str(last.content))["output"]
        arguments = {
            "agent_id": agent_id,
            "content": memory["content"] + line + "\n",
            "base_version": memory["version"],
            "reason": "Refund threads got mixed up.",
        }
        return AIMessage(content="", tool_calls=[tool_call("studio_edit_memory", arguments)])

    def answer(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        assert isinstance(last, HumanMessage) and last.name == "assent", last
        decided = json.loads(str(last.content))
        outcomes = ", ".join(decision["outcome"] for decision in decided["decisions"])
        return AIMessage(content=f"People decided: {outcomes}.")

    return [read, propose, answer]


def tool_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}


async def propose_with_langgraph(turn: CoachTurn, model: BaseChatModel, *, timeout: float = 300.0) -> str:
    """Run one turn of the graph; the final answer."""
    graph = coach_graph(model, turn, ["studio_read_memory", "studio_edit_memory"], schemas=SCHEMAS)
    state = await run_turn(
        graph,
        {"messages": [HumanMessage("Ada mixes up refund threads: teach her to quote the order number.")]},
        turn,
        thread_id=turn.turn_id,
        timeout=timeout,
    )
    return str(state["messages"][-1].content)


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
        model = ScriptedChatModel(steps=script(args.agent, args.line))
        print(await propose_with_langgraph(session.begin_turn(), model))


if __name__ == "__main__":
    asyncio.run(main())
