"""LangGraph through Assent (``pip install assent[langgraph]``): a graph's agent proposes changes with Assent's tools,
and the graph pauses on the requests of each step, as LangGraph's ``interrupt`` does, until people decide them in
Assent (the console, the CLI, the HTTP API); the turn's continuation resumes it.

Usage::

    async with CoachClient(bootstrap, topic_prefix=prefix) as coach:
        session = await coach.open_session(org_id=..., source_guild_id=..., operator_user_id=...)
        turn = session.begin_turn()
        graph = coach_graph(model, turn, ["studio_read_memory", "studio_edit_memory"])
        state = await run_turn(graph, {"messages": [HumanMessage("...")]}, turn, thread_id="t1")

:func:`assent_tools` makes the LangChain tools (each publishes one ``ToolCall`` on its owner's topic and returns
the owner's ``ToolResult`` as JSON), :func:`decisions_node` the node that ends the step and calls ``interrupt`` with
the requests it waits on, and :func:`run_turn` runs the graph, awaiting each continuation and resuming the graph with
``Command(resume=...)``. :func:`coach_graph` wires the three into the usual agent loop (model, tools, decisions); a
graph of its own uses the parts alike. The graph needs a checkpointer (``interrupt`` does): :func:`coach_graph`
uses an in-memory one unless given another.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt

from assent.coach import CoachTurn
from assent.contracts import TurnContinuation

from . import decisions_for_model, published_schema, result_for_model

__all__ = ["assent_tools", "coach_graph", "decisions_node", "needs_decisions", "run_turn"]


def assent_tools(
    turn: CoachTurn, tools: Iterable[str], *, schemas: Path | None = None, timeout: float = 15.0
) -> list[BaseTool]:
    """A LangChain tool per name in ``tools``, each calling it in ``turn`` and returning what a model reads of the
    result (:func:`assent.adapters.result_for_model`, as JSON). ``schemas``: the published tools' schemas
    (``contracts/schemas/tools``), which give the model each tool's arguments and description."""

    def tool(name: str) -> BaseTool:
        schema, description = published_schema(name, schemas)

        async def call(**arguments: Any) -> str:
            result = await turn.call(name, arguments, timeout=timeout)
            return json.dumps(result_for_model(result))

        return StructuredTool.from_function(
            coroutine=call, name=name, description=description, args_schema=schema, infer_schema=False
        )

    return [tool(name) for name in tools]


def needs_decisions(turn: CoachTurn) -> bool:
    """Whether the current step made requests that wait for people."""
    return bool(turn.awaiting_operator())


def decisions_node(turn: CoachTurn) -> Callable[[MessagesState], Awaitable[dict[str, Any]]]:
    """The node that ends the step and pauses the graph (``interrupt``) until :func:`run_turn` resumes it with the
    turn's continuation, which it adds to the messages for the model.

    LangGraph runs a node again from its start when it resumes: the step is ended only while it has requests, so
    the second run publishes nothing and only takes the continuation.
    """

    async def decisions(state: MessagesState) -> dict[str, Any]:
        if turn.awaiting_operator():
            await turn.end_step()
        if turn.paused_step is None:
            return {}
        resumed = interrupt(
            {
                "assent": {
                    "session_id": turn.session.session_id,
                    "turn_id": turn.turn_id,
                    "step": turn.paused_step,
                }
            }
        )
        continuation = TurnContinuation.model_validate(resumed)
        return {"messages": [HumanMessage(content=json.dumps(decisions_for_model(continuation)), name="assent")]}

    return decisions


def coach_graph(
    model: BaseChatModel,
    turn: CoachTurn,
    tools: Iterable[str],
    *,
    schemas: Path | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> Any:
    """The agent loop over ``turn``: the model answers (with tool calls, or not: then the graph ends), the tools
    run, and a step that made requests pauses until they are decided. Returns the compiled graph."""
    found = assent_tools(turn, tools, schemas=schemas)
    bound = model.bind_tools(found)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    def after_agent(state: MessagesState) -> Literal["tools", "__end__"]:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else "__end__"

    def after_tools(state: MessagesState) -> Literal["decisions", "agent"]:
        return "decisions" if needs_decisions(turn) else "agent"

    decide = decisions_node(turn)

    async def decisions(state: MessagesState) -> dict[str, Any]:
        return await decide(state)

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(found))
    graph.add_node("decisions", decisions)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", after_agent)
    graph.add_conditional_edges("tools", after_tools)
    graph.add_edge("decisions", "agent")
    return graph.compile(checkpointer=checkpointer or InMemorySaver())


async def run_turn(
    graph: Any, graph_input: Any, turn: CoachTurn, *, thread_id: str, timeout: float = 300.0
) -> dict[str, Any]:
    """Run ``graph`` on ``graph_input`` to its end: each time it pauses on requests (:func:`decisions_node`), wait
    up to ``timeout`` seconds for the turn's continuation and resume the graph with it. Returns the final state."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    state: dict[str, Any] = await graph.ainvoke(graph_input, config)
    while state.get("__interrupt__"):
        continuation = await turn.continuation(timeout=timeout)
        state = await graph.ainvoke(Command(resume=continuation.model_dump(mode="json")), config)
    return state
