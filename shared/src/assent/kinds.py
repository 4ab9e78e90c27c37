"""The proposal kinds, as data: for each kind who owns it, which tools reach it, where its requests show, what its
buttons say, and what each decision produces.

A kind is a :class:`KindSpec`, declared by its owner in the owner's contract package (``<owner>_contract``, a
:class:`~assent.owners.Contract`), beside a plug-in in the owner service. :data:`KINDS` holds every kind of the
contracts installed, in their order (:func:`assent.owners.contracts`). The message contracts (``Kind``,
``Decision``, ``Outcome``, ``Section``, ``Action``), the tool routing (:mod:`assent.topics`) and the gateway's
decision endpoints are all derived from it; a unit test proves they agree.

:data:`KINDS` and the names derived from it (:data:`KIND_NAMES`, :data:`SECTIONS`, :data:`ACTIONS`,
:data:`DECISIONS`, :data:`WIDGETS`, :data:`ORIGINS`, :data:`PAGE_KINDS`, :data:`RESOLVED_OUTCOMES`, :data:`OUTCOMES`,
:data:`OWNERS`) are made the first time one of them is read, not when this module is imported: the contract packages
import :class:`KindSpec` from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

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


def _apply_or_decline() -> Mapping[str, str]:
    return {"apply": "applied", "decline": "declined"}


@dataclass(frozen=True)
class Options:
    """Choices a kind's decision takes besides the decision itself (a source approval's branch and commit message):
    fields of the decision's body at the gateway, which travel to the owner as ``DecisionMade.options``."""

    model: type[BaseModel]
    """The owner's model of them, declared in its contract package beside the kind's row, which refers to it here;
    each of its fields, none of them required, is a field of the body of a decision at the kind's endpoint."""
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
    succeeds (by default apply, applied, and decline, declined), and ``decline`` names the one that writes nothing
    (its button says ``decline_label``). Every decision may also end ``stale`` (409, the request stays pending),
    ``refused`` (422/404, nothing changed) or ``failed``. ``endpoint`` is the gateway path segment that decides it
    (``/edits/{seq}``, ``/logins/{seq}``): the gateway mounts one decision route per endpoint, which takes the
    decisions of the kinds decided there (:func:`decisions_at`), and the choices they declare (:attr:`options`); the
    kinds decided at one endpoint are decided alike there (the same address, options and answer). The mappings are
    read-only once declared.
    """

    name: str
    owner: str
    tools: tuple[str, ...]
    section: str
    actions: Mapping[str, str]
    decline_label: str = "Decline"
    decisions: Mapping[str, str] = field(default_factory=_apply_or_decline)
    endpoint: str = "edits"
    read_tools: tuple[str, ...] = ()
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
    widget_model: type[BaseModel] | None = None
    """Its widget as a coach reads it, when the kind adds fields of its own (a subclass of
    :class:`assent.contracts.ProposalWidget`, read with ``widget.read_as(model)``; exported as
    ``contracts/schemas/widgets/<kind>.json``). None: the shared widget alone."""
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
    revertible: bool = False
    """Whether an applied request of it can be reverted: its owner computes the inverse (the kind's
    :meth:`~assent.runtime.ProposalKind.inverse`) and files it as a new request, decided as any other. The console
    and the CLI offer Revert on an applied request of such a kind only."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "actions", MappingProxyType(dict(self.actions)))
        object.__setattr__(self, "decisions", MappingProxyType(dict(self.decisions)))
        if self.decline not in self.decisions:
            raise ValueError(f"kind {self.name!r} declines with {self.decline!r}, which is not one of its decisions")
        if self.options is not None and not set(self.options.decisions) <= set(self.decisions):
            raise ValueError(
                f"kind {self.name!r} takes options with {self.options.decisions}, which are not all its decisions"
            )

    @property
    def apply_labels(self) -> tuple[str, ...]:
        return tuple(self.actions.values())

    @property
    def applying(self) -> str:
        """The first decision that writes (apply, grant, ...): what reverting one of its requests needs permission
        for, as deciding does."""
        return next(d for d in self.decisions if d != self.decline)

    @property
    def applied_outcomes(self) -> frozenset[str]:
        """The outcomes of the decisions that write: a request resolved with one of them was applied."""
        return frozenset(o for d, o in self.decisions.items() if d != self.decline)


FAILURE_OUTCOMES: tuple[str, ...] = ("stale", "refused", "failed")
"""Outcomes any decision may end in besides its own: moved target (409), refused (422/404), failed."""
SUPERSEDED = "superseded"
"""The outcome of a waiting request that a new proposal of its kind replaced (:attr:`KindSpec.supersedes`): it is
resolved without a decision, and a paused turn needs no answer to it."""

EXPIRE = "expire"
"""The decision a policy's ``expire_after`` rule sends (never a person: no kind's endpoint takes it); every kind
resolves a waiting request with it as :data:`EXPIRED`, writing nothing, as a decline does."""
EXPIRED = "expired"
"""The outcome of a request that waited longer than its policy allows: the coach's continuation lists it as a
decline."""

WORKSPACE_OWNER = "edits"
"""The service that owns the workspace directory (orgs, guilds, agents, membership, Tasks) and publishes
every change of it on ``workspace.events``."""

if TYPE_CHECKING:  # made on first reading, by __getattr__ below
    KINDS: Mapping[str, KindSpec]
    """Every proposal kind of the installed contracts, by name."""
    KIND_NAMES: tuple[str, ...]
    SECTIONS: tuple[str, ...]
    ACTIONS: tuple[str, ...]
    DECISIONS: tuple[str, ...]
    WIDGETS: tuple[str, ...]
    """The ``type`` of every proposal widget (:attr:`KindSpec.widget`)."""
    ORIGINS: tuple[str, ...]
    """Every origin a card may name (:attr:`KindSpec.origins`)."""
    PAGE_KINDS: tuple[str, ...]
    """The kinds decided on an agent's page, by agent and proposal (:attr:`KindSpec.addressed_by`): the Proposals
    page's."""
    RESOLVED_OUTCOMES: tuple[str, ...]
    """Outcomes that resolve a request for good (it leaves the pending items)."""
    OUTCOMES: tuple[str, ...]
    OWNERS: tuple[str, ...]
    """The services that own proposal kinds, in registry order."""


@cache
def _registry() -> dict[str, Any]:
    from .owners import contracts  # the contracts import this module

    kinds: dict[str, KindSpec] = {}
    for contract in contracts():
        for spec in contract.kinds:
            if spec.name in kinds:
                raise ValueError(f"the kind {spec.name!r} is declared by {kinds[spec.name].owner} and {spec.owner}")
            kinds[spec.name] = spec
    specs = kinds.values()
    resolved = tuple(
        dict.fromkeys(
            [
                *(o for spec in specs for o in spec.decisions.values()),
                *([SUPERSEDED] if any(spec.supersedes for spec in specs) else []),
                EXPIRED,
            ]
        )
    )
    return {
        "KINDS": MappingProxyType(kinds),
        "KIND_NAMES": tuple(kinds),
        "SECTIONS": tuple(dict.fromkeys(spec.section for spec in specs)),
        "ACTIONS": tuple(dict.fromkeys(action for spec in specs for action in spec.actions)),
        "DECISIONS": tuple(dict.fromkeys([*(d for spec in specs for d in spec.decisions), EXPIRE])),
        "WIDGETS": tuple(dict.fromkeys(spec.widget for spec in specs)),
        "ORIGINS": tuple(dict.fromkeys(origin.name for spec in specs for origin in spec.origins)),
        "PAGE_KINDS": tuple(spec.name for spec in specs if spec.addressed_by == "agent"),
        "RESOLVED_OUTCOMES": resolved,
        "OUTCOMES": resolved + FAILURE_OUTCOMES,
        "OWNERS": tuple(dict.fromkeys(spec.owner for spec in specs)),
    }


_DERIVED = frozenset(
    {
        "KINDS",
        "KIND_NAMES",
        "SECTIONS",
        "ACTIONS",
        "DECISIONS",
        "WIDGETS",
        "ORIGINS",
        "PAGE_KINDS",
        "RESOLVED_OUTCOMES",
        "OUTCOMES",
        "OWNERS",
    }
)


def __getattr__(name: str) -> Any:
    if name in _DERIVED:
        return _registry()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _kinds() -> Mapping[str, KindSpec]:
    kinds: Mapping[str, KindSpec] = _registry()["KINDS"]
    return kinds


def kind(name: str) -> KindSpec:
    """The spec of kind ``name``; ``KeyError`` when there is none."""
    return _kinds()[name]


def kinds_of(owner: str) -> tuple[KindSpec, ...]:
    return tuple(spec for spec in _kinds().values() if spec.owner == owner)


def decisions_at(endpoint: str) -> tuple[str, ...]:
    """The decisions the gateway's ``/{endpoint}/{seq}`` accepts, over every kind decided there."""
    specs = _kinds().values()
    return tuple(dict.fromkeys(d for spec in specs if spec.endpoint == endpoint for d in spec.decisions))


def chat_linked(kind: str, origin: str | None) -> bool:
    """Whether the chat a request of ``kind`` was asked for in is linked (:attr:`Origin.chat_linked`); a request
    whose card names no origin was asked for in its session, which is linked."""
    return all(o.chat_linked for o in _kinds()[kind].origins if o.name == origin)


def owner_of_tool(tool: str) -> str:
    """The service that answers ``tool``; ``KeyError`` when no kind names it."""
    return kind_of_tool(tool).owner


def kind_of_tool(tool: str) -> KindSpec:
    for spec in _kinds().values():
        if tool in spec.tools or tool in spec.read_tools:
            return spec
    raise KeyError(tool)
