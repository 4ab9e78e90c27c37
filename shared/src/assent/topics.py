"""The topic registry: the only place topic names are written down.

Each topic is data: its name, what keys it, who produces and consumes it, and the messages it carries.
Deployments may prefix every name (``ASSENT_TOPIC_PREFIX``) so that several systems, or several test runs,
share one cluster without seeing each other's traffic. Every topic has a dead-letter twin ``<name>.dlq``
that receives messages its consumers could not read.
"""

from __future__ import annotations

from dataclasses import dataclass

from .contracts import (
    AgentChanged,
    BuildFinished,
    BuildProgressed,
    BuildStarted,
    ConnectionCatalog,
    DecisionMade,
    DeployFailed,
    DeployLive,
    DeployPromoted,
    DeployStarted,
    GuildChanged,
    IssueFixLinked,
    Message,
    OrgChanged,
    ProposalOutcome,
    ProposalProposed,
    RoutinesChanged,
    RoutineWokeUp,
    SessionClosed,
    SessionOpened,
    SourceCommitted,
    StepEnded,
    ToolCall,
    ToolResult,
    TurnContinuation,
)
from .kinds import KINDS, OWNERS, WORKSPACE_OWNER

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


STUDIO_SESSIONS = Topic(
    "studio.sessions",
    "session_id",
    ("coach", "gateway"),
    (*OWNERS, "gateway"),
    (SessionOpened, SessionClosed),
)


def _tool_calls(owner: str) -> Topic:
    key = "agent_id" if owner == "deployer" else "session_id"
    return Topic(f"{owner}.tool-calls", key, ("coach",), (owner,), (ToolCall,))


TOOL_CALLS: dict[str, Topic] = {owner: _tool_calls(owner) for owner in OWNERS}
"""Each owner service's tool-call topic."""
EDITS_TOOL_CALLS = TOOL_CALLS["edits"]
ACCESS_TOOL_CALLS = TOOL_CALLS["access"]
ROUTINES_TOOL_CALLS = TOOL_CALLS["routines"]
CONNECTIONS_TOOL_CALLS = TOOL_CALLS["connections"]
DEPLOYER_TOOL_CALLS = TOOL_CALLS["deployer"]
STUDIO_TURNS = Topic("studio.turns", "session_id", ("coach",), ("gateway",), (StepEnded,))
TOOL_RESULTS = Topic("studio.tool-results", "session_id", OWNERS, ("coach", "gateway"), (ToolResult,))
PROPOSALS_PROPOSED = Topic("proposals.proposed", "session_id", OWNERS, ("gateway",), (ProposalProposed,))


def _decisions(owner: str) -> Topic:
    return Topic(f"{owner}.decisions", "session_id", ("gateway",), (owner,), (DecisionMade,))


DECISIONS: dict[str, Topic] = {owner: _decisions(owner) for owner in OWNERS}
"""Each owner service's decisions: the gateway publishes a decision on the topic of its kind's owner
(:func:`decisions_of`), so that an owner reads its own decisions only, and an owner added costs the rounds it takes
no part in nothing. (Twenty owners make twenty topics of three partitions each, and their dead-letter twins: a
broker holds many thousands.) Keyed by session, as the session's calls are."""
PROPOSALS_DECIDED = Topic("proposals.decided", "session_id", ("gateway",), OWNERS, (DecisionMade,))
"""Where every owner's decisions went before each owner had its own topic (:data:`DECISIONS`). Nothing publishes
on it now; the owners still read it, so that the decisions a gateway of the earlier release left there are carried
out after an upgrade (each owner passes over the others' decisions unopened), until a later release retires it."""
PROPOSALS_OUTCOMES = Topic("proposals.outcomes", "session_id", OWNERS, ("gateway", "coach"), (ProposalOutcome,))
STUDIO_CONTINUATIONS = Topic("studio.continuations", "session_id", ("gateway",), ("coach",), (TurnContinuation,))
WORKSPACE_EVENTS = Topic(
    "workspace.events",
    "org_id",
    (WORKSPACE_OWNER,),
    tuple(o for o in (*OWNERS, "gateway") if o != WORKSPACE_OWNER),
    (OrgChanged, GuildChanged, AgentChanged),
)
DEPLOYS_EVENTS = Topic(
    "deploys.events",
    "agent_id",
    ("deployer",),
    (),
    (
        SourceCommitted,
        BuildStarted,
        BuildProgressed,
        BuildFinished,
        DeployStarted,
        DeployFailed,
        DeployPromoted,
        DeployLive,
        IssueFixLinked,
    ),
)
"""What the deployer did to an agent's source: commits of approved proposals, builds and their progress, deploys
(started, failed, promoted, live) and fixes linked to issues."""

AGENT_ROUTINES_CHANGED = Topic("agent.routines.changed", "guild_id", ("routines",), (), (RoutinesChanged,))
"""A guild's routines changed (created, edited, deleted; the guild's switch), on the guild's stream."""
ROUTINES_WAKEUPS = Topic("routines.wakeups", "agent_id", ("routines",), ("coach",), (RoutineWokeUp,))
"""A routine woke its agent: once per due time, with the instruction in force; agents' runtimes read it through
the coach client (:meth:`assent.coach.CoachClient.wakeups`)."""

CONNECTIONS_CATALOGS = Topic(
    "connections.catalogs", "connection_id", ("connections",), ("access",), (ConnectionCatalog,)
)
"""Each login's tool catalog whenever it changes: its tools and whether each changes data, by the connections
service's read-only policy, so the access service names connection tools without reading that service's tables."""

REGISTRY: tuple[Topic, ...] = (
    STUDIO_SESSIONS,
    *TOOL_CALLS.values(),
    STUDIO_TURNS,
    TOOL_RESULTS,
    PROPOSALS_PROPOSED,
    *DECISIONS.values(),
    PROPOSALS_DECIDED,
    PROPOSALS_OUTCOMES,
    STUDIO_CONTINUATIONS,
    WORKSPACE_EVENTS,
    DEPLOYS_EVENTS,
    CONNECTIONS_CATALOGS,
    AGENT_ROUTINES_CHANGED,
    ROUTINES_WAKEUPS,
)

TOOL_ROUTES: dict[str, Topic] = {
    tool: TOOL_CALLS[spec.owner] for spec in KINDS.values() for tool in (*spec.read_tools, *spec.tools)
}
"""Which topic carries a call of each tool, derived from the kind registry, so the coach can route without
knowing the services."""


def decisions_of(kind: str) -> Topic:
    """The topic that carries the decisions on requests of ``kind``: its owner's; ``KeyError`` for an unknown kind."""
    return DECISIONS[KINDS[kind].owner]


def route(tool: str) -> Topic:
    """The topic for ``tool``; ``KeyError`` when no service owns it."""
    return TOOL_ROUTES[tool]


def by_name(name: str) -> Topic:
    for topic in REGISTRY:
        if topic.name == name:
            return topic
    raise KeyError(name)
