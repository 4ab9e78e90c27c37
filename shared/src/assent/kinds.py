"""The proposal kinds of both specifications, as data: the one place that says who owns each kind, which
tools reach it, where its requests show, what its buttons say, and what each decision produces.

The message contracts (``Kind``, ``Decision``, ``Outcome``, ``Section``, ``Action``), the tool routing
(:mod:`assent.topics`) and the gateway's decision endpoints are all derived from :data:`KINDS`; a unit
test proves they agree. Adding a kind is a row here and a module in its owner service.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Supersedes = Literal["chat", "turn"]
Addressed = Literal["session", "agent"]


@dataclass(frozen=True)
class Answer:
    """How the gateway's ``POST …/{endpoint}/{seq}`` answers a decision besides its outcome (every kind decided at one
    endpoint answers alike)."""

    route: str | None = None
    """The name of the owner's declared ``GET`` route (in :data:`assent.api.ROUTES`) whose answer, read once the
    outcome is in, a decision that the owner took answers with as ``answer`` (the route's ``session_id`` and ``seq``
    are the request's): a login request's answer carries the session's logins. None: the outcome alone."""
    answered: int = 422
    """The status of a decision on a request resolved already (the seed's ``…/logins/{seq}``: 409)."""


OUTCOME_ALONE = Answer()
"""A decision answers with its outcome alone; a resolved request's is 422."""


@dataclass(frozen=True)
class Options:
    """Choices a kind's decision takes besides the decision itself (a source approval's branch and commit message):
    fields of the decision's body at the gateway, which travel to the owner as ``DecisionMade.options``."""

    model: str
    """The name of the owner's declared model of them (in :data:`assent.api.DECISION_OPTIONS`); each of its fields,
    none of them required, is a field of the body of a decision at the kind's endpoint."""
    decisions: tuple[str, ...]
    """The decisions that take them: a body of another decision that names any is refused (422)."""


@dataclass(frozen=True)
class Origin:
    """Where a kind's proposal was asked for, as its card names it (:attr:`assent.contracts.Card.origin`)."""

    name: str
    chat_linked: bool = True
    """Whether the activity feed links the proposal's chat (its session's pending items), as the Proposals page
    does: an agent's chat is linked; the builder chat is not."""


@dataclass(frozen=True)
class KindSpec:
    """One kind of request.

    ``actions`` maps each action a proposal of this kind may take to its card's apply label (the owner refuses a
    proposal with any other); ``decisions`` maps each decision the kind accepts to the outcome it produces when it
    succeeds, and ``decline`` names the one that writes nothing (its button says ``decline_label``). Every decision
    may also end ``stale`` (409, the request stays pending), ``refused`` (422/404, nothing changed) or ``failed``.
    ``endpoint`` is the gateway path segment that decides it (``/edits/{seq}``, ``/logins/{seq}``): the gateway mounts
    one decision route per endpoint, which takes the decisions of the kinds decided there (:func:`decisions_at`), and
    the choices they declare (:attr:`options`); the kinds decided at one endpoint are decided alike there (the same
    address, options and answer).
    """

    name: str
    owner: str
    tools: tuple[str, ...]
    section: str
    actions: Mapping[str, str]
    decline_label: str
    decisions: Mapping[str, str]
    endpoint: str
    read_tools: tuple[str, ...] = field(default=())
    """Tools of the owner that read the live target (the version a proposal must bind) and propose nothing."""
    decided_alone: bool = False
    """Apply all skips it (a login grant, a source approval; an access change that widens is decided per request)."""
    decline: str = "decline"
    """The decision that resolves a request without writing anything (decline, or discard)."""
    supersedes: Supersedes | None = None
    """Whether a new proposal of the kind may replace a waiting one, and which: ``chat``, the waiting one of the same
    session; ``turn``, the waiting one of the same agent in the same turn. The replaced one is resolved as
    :data:`SUPERSEDED` and needs no answer. None: a proposal never replaces another."""
    widget: str = "studio_edit_request"
    """The ``type`` of the widget its proposals answer the coach with (``studio_edit_request``; a login request's is
    ``studio_connection_access``)."""
    answer: Answer = OUTCOME_ALONE
    """What its endpoint answers besides the outcome, and when the request was resolved already."""
    addressed_by: Addressed = "session"
    """How the gateway's decision route names a request of it: ``session``, by its session and message
    (``/api/studio/sessions/{session_id}/{endpoint}/{seq}``, where a card, the tray, a pending item or the chat decides
    it); ``agent``, by its agent and proposal (``/api/agents/{agent_id}/{endpoint}/{proposal_id}``: the agent's page
    of them, the Proposals page, which has a live stream of its own, and whose decisions the activity feed lists)."""
    options: Options | None = None
    """The choices its decisions take besides the decision (None: none)."""
    reviewers_decline: bool = False
    """Whether people who may review feedback (reviewers, besides those who may decide) may take its :attr:`decline`
    decision, as a source proposal is discarded. Otherwise every decision needs what deciding a request needs: the
    admin or developer role, or to own or edit its agent."""
    origins: tuple[Origin, ...] = ()
    """Where its proposals are asked for, when its cards say (:attr:`assent.contracts.Card.origin`: an agent's chat or
    the builder chat); none: its cards name no origin."""

    @property
    def apply_labels(self) -> tuple[str, ...]:
        return tuple(self.actions.values())


def _kind(
    name: str,
    owner: str,
    tools: tuple[str, ...],
    section: str,
    actions: dict[str, str],
    *,
    decline_label: str = "Decline",
    decisions: dict[str, str] | None = None,
    endpoint: str = "edits",
    read_tools: tuple[str, ...] = (),
    decided_alone: bool = False,
    decline: str = "decline",
    supersedes: Supersedes | None = None,
    widget: str = "studio_edit_request",
    answer: Answer = OUTCOME_ALONE,
    addressed_by: Addressed = "session",
    options: Options | None = None,
    reviewers_decline: bool = False,
    origins: tuple[Origin, ...] = (),
) -> KindSpec:
    decisions = decisions or {"apply": "applied", "decline": "declined"}
    if decline not in decisions:
        raise ValueError(f"kind {name!r} declines with {decline!r}, which is not one of its decisions")
    if options is not None and not set(options.decisions) <= set(decisions):
        raise ValueError(f"kind {name!r} takes options with {options.decisions}, which are not all its decisions")
    return KindSpec(
        name=name,
        owner=owner,
        tools=tools,
        section=section,
        actions=MappingProxyType(actions),
        decline_label=decline_label,
        decisions=MappingProxyType(decisions),
        endpoint=endpoint,
        read_tools=read_tools,
        decided_alone=decided_alone,
        decline=decline,
        supersedes=supersedes,
        widget=widget,
        answer=answer,
        addressed_by=addressed_by,
        options=options,
        reviewers_decline=reviewers_decline,
        origins=origins,
    )


KINDS: Mapping[str, KindSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            _kind(
                "memory",
                "edits",
                ("studio_edit_memory",),
                "Agents",
                {"edit": "Apply edit"},
                read_tools=("studio_read_memory",),
            ),
            _kind(
                "note",
                "edits",
                ("studio_edit_note",),
                "State",
                {"create": "Create note", "edit": "Apply edit", "delete": "Delete note"},
                read_tools=("studio_list_notes", "studio_read_note"),
            ),
            _kind(
                "guild",
                "edits",
                ("studio_edit_guild",),
                "Guild",
                {"edit": "Apply edit"},
                read_tools=("studio_read_guild",),
            ),
            _kind(
                "collection",
                "edits",
                ("studio_edit_collection",),
                "State",
                {"create": "Create table", "edit": "Apply edit", "delete": "Delete table"},
                read_tools=("studio_list_collections", "studio_read_collection"),
            ),
            _kind(
                "routine",
                "routines",
                ("studio_edit_routine",),
                "Agents",
                {"create": "Create routine", "edit": "Apply edit", "delete": "Delete routine"},
                read_tools=("studio_list_routines",),
            ),
            _kind(
                "access",
                "access",
                ("studio_edit_access",),
                "Tools",
                {"edit": "Apply edit"},
                read_tools=("studio_read_access",),
            ),
            _kind(
                "login",
                "connections",
                ("studio_request_connection_access",),
                "Logins",
                {"grant": "Grant read access"},
                decisions={"grant": "granted", "decline": "declined"},
                endpoint="logins",
                read_tools=("studio_call_connection_tool",),
                decided_alone=True,
                widget="studio_connection_access",
                answer=Answer(route="session_connections", answered=409),
            ),
            _kind(
                "draft",
                "edits",
                ("studio_create_task_draft",),
                "Agents",
                {"publish": "Publish"},
                decline_label="Discard",
                decisions={"publish": "published", "discard": "discarded"},
                endpoint="drafts",
                read_tools=("studio_read_task", "studio_list_task_drafts"),
                decline="discard",
                supersedes="turn",
                widget="studio_task_draft",
                answer=Answer(route="read_draft"),
            ),
            _kind(
                "source",
                "deployer",
                ("propose_source_change",),
                "Source",
                {"propose": "Approve and deploy"},
                decline_label="Discard",
                decisions={"approve": "approved", "discard": "discarded"},
                endpoint="proposals",
                read_tools=("list_repo_files", "read_repo_file", "read_docs"),
                decline="discard",
                supersedes="chat",
                decided_alone=True,  # approving commits and deploys: on its own, with its branch, never by Apply all
                addressed_by="agent",
                options=Options("SourceApproval", ("approve",)),
                reviewers_decline=True,
                origins=(Origin("agent"), Origin("builder", chat_linked=False)),
            ),
        )
    }
)
"""Every proposal kind of the Studio and Source specifications."""

FAILURE_OUTCOMES: tuple[str, ...] = ("stale", "refused", "failed")
"""Outcomes any decision may end in besides its own: moved target (409), refused (422/404), failed."""

KIND_NAMES: tuple[str, ...] = tuple(KINDS)
SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(spec.section for spec in KINDS.values()))
ACTIONS: tuple[str, ...] = tuple(dict.fromkeys(action for spec in KINDS.values() for action in spec.actions))
DECISIONS: tuple[str, ...] = tuple(dict.fromkeys(d for spec in KINDS.values() for d in spec.decisions))
WIDGETS: tuple[str, ...] = tuple(dict.fromkeys(spec.widget for spec in KINDS.values()))
"""The ``type`` of every proposal widget (:attr:`KindSpec.widget`)."""
ORIGINS: tuple[str, ...] = tuple(dict.fromkeys(origin.name for spec in KINDS.values() for origin in spec.origins))
"""Every origin a card may name (:attr:`KindSpec.origins`)."""
PAGE_KINDS: tuple[str, ...] = tuple(name for name, spec in KINDS.items() if spec.addressed_by == "agent")
"""The kinds decided on an agent's page, by agent and proposal (:attr:`KindSpec.addressed_by`): the Proposals
page's."""
SUPERSEDED = "superseded"
"""The outcome of a waiting request that a new proposal of its kind replaced (:attr:`KindSpec.supersedes`): it is
resolved without a decision, and a paused turn needs no answer to it."""
RESOLVED_OUTCOMES: tuple[str, ...] = tuple(
    dict.fromkeys(
        [
            *(o for spec in KINDS.values() for o in spec.decisions.values()),
            *([SUPERSEDED] if any(spec.supersedes for spec in KINDS.values()) else []),
        ]
    )
)
"""Outcomes that resolve a request for good (it leaves the pending items)."""
OUTCOMES: tuple[str, ...] = RESOLVED_OUTCOMES + FAILURE_OUTCOMES
OWNERS: tuple[str, ...] = tuple(dict.fromkeys(spec.owner for spec in KINDS.values()))
"""The services that own proposal kinds, in registry order."""

WORKSPACE_OWNER = "edits"
"""The service that owns the workspace directory (orgs, guilds, agents, membership, Tasks) and publishes
every change of it on ``workspace.events``."""


def kind(name: str) -> KindSpec:
    """The spec of kind ``name``; ``KeyError`` when there is none."""
    return KINDS[name]


def kinds_of(owner: str) -> tuple[KindSpec, ...]:
    return tuple(spec for spec in KINDS.values() if spec.owner == owner)


def decisions_at(endpoint: str) -> tuple[str, ...]:
    """The decisions the gateway's ``/{endpoint}/{seq}`` accepts, over every kind decided there."""
    return tuple(dict.fromkeys(d for spec in KINDS.values() if spec.endpoint == endpoint for d in spec.decisions))


def chat_linked(kind: str, origin: str | None) -> bool:
    """Whether the chat a request of ``kind`` was asked for in is linked (:attr:`Origin.chat_linked`); a request
    whose card names no origin was asked for in its session, which is linked."""
    return all(o.chat_linked for o in KINDS[kind].origins if o.name == origin)


def owner_of_tool(tool: str) -> str:
    """The service that answers ``tool``; ``KeyError`` when no kind names it."""
    for spec in KINDS.values():
        if tool in spec.tools or tool in spec.read_tools:
            return spec.owner
    raise KeyError(tool)


def kind_of_tool(tool: str) -> KindSpec:
    for spec in KINDS.values():
        if tool in spec.tools or tool in spec.read_tools:
            return spec
    raise KeyError(tool)
