"""The topic registry: every topic's name is written down once, here or in its owner's contract package.

Each topic is data: its name, what keys it, who produces and consumes it, and the messages it carries.
Deployments may prefix every name (``ASSENT_TOPIC_PREFIX``) so that several systems, or several test runs,
share one cluster without seeing each other's traffic. Every topic has a dead-letter twin ``<name>.dlq``
that receives messages its consumers could not read.

The topics every owner takes part in are declared here; an owner's own topics (its tool calls, its decisions and
its events) are declared in its contract package (:mod:`assent.owners`). :data:`REGISTRY` holds them all, in one
order: the sessions, every owner's tool calls, the turns, the results and proposals, every owner's decisions, the
outcomes and continuations, the workspace's events, the direct writes, then each owner's events. It, :data:`TOOL_CALLS`,
:data:`DECISIONS`, :data:`TOOL_ROUTES` and the shared topics that name every owner among their producers or
consumers (:data:`STUDIO_SESSIONS`, :data:`TOOL_RESULTS`, :data:`PROPOSALS_PROPOSED`, :data:`PROPOSALS_DECIDED`,
:data:`PROPOSALS_OUTCOMES`, :data:`WORKSPACE_EVENTS`, :data:`WORKSPACE_WRITES`) are made the first time one of them
is read, once the contracts are found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from . import kinds
from .contracts import (
    AgentChanged,
    DecisionMade,
    GuildChanged,
    Message,
    OrgChanged,
    ProposalOutcome,
    ProposalProposed,
    SessionClosed,
    SessionOpened,
    StepEnded,
    ToolCall,
    ToolResult,
    TurnContinuation,
    WorkspaceWritten,
)

DLQ_SUFFIX = ".dlq"


@dataclass(frozen=True)
class Topic:
    """One topic as declared: the services create it with ``partitions`` and ``config`` (Kafka's topic-level
    settings, as ``(name, value)`` pairs) before anything else names it (:func:`assent.messaging.ensure_topics`).

    Its messages are keyed by ``key``: a key's messages stay in one partition, in order, as long as the number of
    partitions does not change.
    """

    name: str
    key: str
    producers: tuple[str, ...]
    consumers: tuple[str, ...]
    messages: tuple[type[Message], ...]
    partitions: int = 3
    config: tuple[tuple[str, str], ...] = ()

    def full_name(self, prefix: str = "") -> str:
        return f"{prefix}{self.name}"

    def dlq_name(self, prefix: str = "") -> str:
        return f"{prefix}{self.name}{DLQ_SUFFIX}"


@dataclass(frozen=True)
class TopicPolicy:
    """How a deployment's cluster holds every topic of the registry: what the services create topics with
    (``ASSENT_TOPIC_*``, :meth:`assent.settings.ServiceSettings.topic_policy`) and what ``deploy/kafka`` ships.

    ``partitions`` None keeps each topic's declared count; a dead-letter topic always has one partition.
    ``min_insync_replicas`` and ``retention_ms`` (-1: forever) None leave the broker's default; set, they are
    the topic-level ``min.insync.replicas`` and ``retention.ms`` of every topic and its dead-letter twin, over
    what a topic's own ``config`` says of them.
    """

    partitions: int | None = None
    replication_factor: int = 1
    min_insync_replicas: int | None = None
    retention_ms: int | None = None

    def __post_init__(self) -> None:
        if self.partitions is not None and self.partitions < 1:
            raise ValueError(f"topics need at least one partition, not {self.partitions}")
        if self.replication_factor < 1:
            raise ValueError(f"the replication factor must be at least 1, not {self.replication_factor}")
        if self.min_insync_replicas is not None and not 1 <= self.min_insync_replicas <= self.replication_factor:
            raise ValueError(
                f"min.insync.replicas ({self.min_insync_replicas}) must be between 1 and the replication factor "
                f"({self.replication_factor}): with more, no write with acks=all would ever succeed"
            )
        if self.retention_ms is not None and self.retention_ms < -1:
            raise ValueError(f"retention.ms is -1 (forever) or a number of milliseconds, not {self.retention_ms}")

    def partitions_of(self, topic: Topic) -> int:
        return topic.partitions if self.partitions is None else self.partitions

    def config_of(self, topic: Topic) -> dict[str, str]:
        """The topic-level settings ``topic`` (and its dead-letter twin) is created with."""
        config = dict(topic.config)
        if self.min_insync_replicas is not None:
            config["min.insync.replicas"] = str(self.min_insync_replicas)
        if self.retention_ms is not None:
            config["retention.ms"] = str(self.retention_ms)
        return config


def tool_calls(owner: str, key: str = "session_id") -> Topic:
    """The topic ``owner``'s kinds' tools are called on (:attr:`assent.owners.Contract.tool_calls`), keyed by the
    session (or, where the owner orders calls otherwise, ``key``)."""
    return Topic(f"{owner}.tool-calls", key, ("coach",), (owner,), (ToolCall,))


def decisions(owner: str) -> Topic:
    """Where the gateway publishes the decisions on ``owner``'s kinds' requests
    (:attr:`assent.owners.Contract.decisions`): an owner reads its own decisions only, and an owner added costs the
    rounds it takes no part in nothing. (Twenty owners make twenty topics of three partitions each, and their
    dead-letter twins: a broker holds many thousands.) Keyed by session, as the session's calls are."""
    return Topic(f"{owner}.decisions", "session_id", ("gateway",), (owner,), (DecisionMade,))


STUDIO_TURNS = Topic("studio.turns", "session_id", ("coach",), ("gateway",), (StepEnded,))
STUDIO_CONTINUATIONS = Topic("studio.continuations", "session_id", ("gateway",), ("coach",), (TurnContinuation,))

if TYPE_CHECKING:  # made on first reading, by __getattr__ below
    STUDIO_SESSIONS: Topic
    TOOL_CALLS: Mapping[str, Topic]
    """Each owner service's tool-call topic."""
    TOOL_RESULTS: Topic
    PROPOSALS_PROPOSED: Topic
    DECISIONS: Mapping[str, Topic]
    """Each owner service's decisions: the gateway publishes a decision on the topic of its kind's owner
    (:func:`decisions_of`)."""
    PROPOSALS_DECIDED: Topic
    """Where every owner's decisions went before each owner had its own topic (:data:`DECISIONS`). Nothing
    publishes on it now; the owners still read it, so that the decisions a gateway of the earlier release left
    there are carried out after an upgrade (each owner passes over the others' decisions unopened), until a later
    release retires it."""
    PROPOSALS_OUTCOMES: Topic
    WORKSPACE_EVENTS: Topic
    WORKSPACE_WRITES: Topic
    """Every owner's direct writes of the workspace (:class:`~assent.contracts.WorkspaceWritten`, emitted with
    :func:`assent.runtime.writes.record_write`), which the gateway files in each organisation's history."""
    REGISTRY: tuple[Topic, ...]
    TOOL_ROUTES: Mapping[str, Topic]
    """Which topic carries a call of each tool, derived from the kind registry, so the coach can route without
    knowing the services."""


@cache
def _registry() -> dict[str, Any]:
    from .owners import contracts  # the contracts import this module

    found = contracts()
    owners = kinds.OWNERS
    tool_call_topics = {c.owner: c.tool_calls for c in found if c.tool_calls is not None}
    decision_topics = {c.owner: c.decisions for c in found if c.decisions is not None}
    shared = {
        "STUDIO_SESSIONS": Topic(
            "studio.sessions", "session_id", ("coach", "gateway"), (*owners, "gateway"), (SessionOpened, SessionClosed)
        ),
        "TOOL_RESULTS": Topic("studio.tool-results", "session_id", owners, ("coach", "gateway"), (ToolResult,)),
        "PROPOSALS_PROPOSED": Topic("proposals.proposed", "session_id", owners, ("gateway",), (ProposalProposed,)),
        "PROPOSALS_DECIDED": Topic("proposals.decided", "session_id", ("gateway",), owners, (DecisionMade,)),
        "PROPOSALS_OUTCOMES": Topic(
            "proposals.outcomes", "session_id", owners, ("gateway", "coach"), (ProposalOutcome,)
        ),
        "WORKSPACE_EVENTS": Topic(
            "workspace.events",
            "org_id",
            (kinds.WORKSPACE_OWNER,),
            tuple(o for o in (*owners, "gateway") if o != kinds.WORKSPACE_OWNER),
            (OrgChanged, GuildChanged, AgentChanged),
        ),
        "WORKSPACE_WRITES": Topic("workspace.writes", "org_id", owners, ("gateway",), (WorkspaceWritten,)),
    }
    registry = (
        shared["STUDIO_SESSIONS"],
        *tool_call_topics.values(),
        STUDIO_TURNS,
        shared["TOOL_RESULTS"],
        shared["PROPOSALS_PROPOSED"],
        *decision_topics.values(),
        shared["PROPOSALS_DECIDED"],
        shared["PROPOSALS_OUTCOMES"],
        STUDIO_CONTINUATIONS,
        shared["WORKSPACE_EVENTS"],
        shared["WORKSPACE_WRITES"],
        *(topic for contract in found for topic in contract.topics),
    )
    names = [topic.name for topic in registry]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"topics declared twice: {', '.join(twice)}")
    return {
        **shared,
        "TOOL_CALLS": MappingProxyType(tool_call_topics),
        "DECISIONS": MappingProxyType(decision_topics),
        "REGISTRY": registry,
        "TOOL_ROUTES": MappingProxyType(
            {
                tool: tool_call_topics[spec.owner]
                for spec in kinds.KINDS.values()
                for tool in (*spec.read_tools, *spec.tools)
            }
        ),
    }


_DERIVED = frozenset(
    {
        "STUDIO_SESSIONS",
        "TOOL_CALLS",
        "TOOL_RESULTS",
        "PROPOSALS_PROPOSED",
        "DECISIONS",
        "PROPOSALS_DECIDED",
        "PROPOSALS_OUTCOMES",
        "WORKSPACE_EVENTS",
        "WORKSPACE_WRITES",
        "REGISTRY",
        "TOOL_ROUTES",
    }
)


def __getattr__(name: str) -> Any:
    if name in _DERIVED:
        return _registry()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def decisions_of(kind: str) -> Topic:
    """The topic that carries the decisions on requests of ``kind``: its owner's; ``KeyError`` for an unknown kind."""
    topics: Mapping[str, Topic] = _registry()["DECISIONS"]
    return topics[kinds.kind(kind).owner]


def route(tool: str) -> Topic:
    """The topic for ``tool``; ``KeyError`` when no service owns it."""
    routes: Mapping[str, Topic] = _registry()["TOOL_ROUTES"]
    return routes[tool]


def by_name(name: str) -> Topic:
    registry: tuple[Topic, ...] = _registry()["REGISTRY"]
    for topic in registry:
        if topic.name == name:
            return topic
    raise KeyError(name)
