"""The owners' contracts: each owner service's public face, shipped in a package of its own and found here.

An owner's contract package (``services/<owner>/contract/``: the distribution ``assent-<owner>-contract``, the import
package ``<owner>_contract``) depends on ``assent`` alone. It declares the owner's kinds (rows of the kind registry),
its topics with their messages, its public routes with their models, and its activity feed, in one
:class:`Contract`, and names it under the entry point group :data:`ENTRY_POINTS`::

    [project.entry-points."assent.contracts"]
    routines = "routines_contract:CONTRACT"

The registries of ``assent`` are made from the contracts installed (:func:`contracts`): the kinds
(:data:`assent.kinds.KINDS`), the topics and the tool routing (:data:`assent.topics.REGISTRY`,
:data:`assent.topics.TOOL_ROUTES`), the public routes and feeds (:data:`assent.api.ROUTES`,
:data:`assent.api.FEEDS`). Nothing in ``assent`` names an owner's contract. The contract packages import what they
declare with from ``assent`` (:class:`~assent.kinds.KindSpec`, :class:`~assent.topics.Topic`,
:class:`~assent.api.PublicRoute`, :class:`~assent.contracts.Message`), so each registry is made the first time it is
read, never while ``assent`` is imported; a contract package must not read one while it is imported either.

Every service finds every contract: the messages every owner shares name the kinds, decisions and sections of all
(a decision on another owner's kind must still be read), and the coach routes each tool to its owner's topic. The
workspace installs them all (``uv sync --all-packages``), and so does every image (``deploy/images/build.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points

from .api.declare import Feed, PublicRoute
from .kinds import WORKSPACE_OWNER, KindSpec
from .topics import Topic

ENTRY_POINTS = "assent.contracts"
"""The entry point group under which each contract package names its :class:`Contract` (the entry's name is the
owner's)."""


@dataclass(frozen=True)
class Contract:
    """What an owner declares to the rest of Assent.

    ``kinds`` are its kinds; an owner of kinds has ``tool_calls`` (the topic its kinds' tools are called on,
    :func:`assent.topics.tool_calls`) and ``decisions`` (where the gateway sends the decisions on its kinds'
    requests, :func:`assent.topics.decisions`). ``topics`` are its own events (messages it alone produces), after
    those. ``routes`` are its public routes, which the gateway serves, and ``feeds`` its entries of the public
    activity feed. Each names ``owner`` as its owner.
    """

    owner: str
    kinds: tuple[KindSpec, ...] = ()
    tool_calls: Topic | None = None
    decisions: Topic | None = None
    topics: tuple[Topic, ...] = ()
    routes: tuple[PublicRoute, ...] = ()
    feeds: tuple[Feed, ...] = ()

    def __post_init__(self) -> None:
        others = [
            *(f"kind {spec.name!r}" for spec in self.kinds if spec.owner != self.owner),
            *(f"route {route.name!r}" for route in self.routes if route.owner != self.owner),
            *(f"feed {feed.path!r}" for feed in self.feeds if feed.owner != self.owner),
            *(f"topic {topic.name!r}" for topic in self.topics if topic.producers != (self.owner,)),
        ]
        if others:
            raise ValueError(f"the contract of {self.owner} declares what is not its own: {', '.join(others)}")
        for role, topic in (("tool_calls", self.tool_calls), ("decisions", self.decisions)):
            if (topic is None) != (not self.kinds):
                raise ValueError(f"the contract of {self.owner}: an owner of kinds, and only one, has {role}")
            if topic is not None and topic.consumers != (self.owner,):
                raise ValueError(f"the contract of {self.owner}: its {role} topic {topic.name!r} is read by others")


_found: tuple[Contract, ...] | None = None
_finding = False


def contracts() -> tuple[Contract, ...]:
    """Every installed owner's contract: the workspace's owner (:data:`~assent.kinds.WORKSPACE_OWNER`) first, every
    owner reading its directory, then the others by name. The order is the registries' (the kinds, the topics, the
    routes), and so the order the documents list them in.

    Raises ``RuntimeError`` when a contract package reads a registry while it is imported (the registry would miss
    it), and ``TypeError`` or ``ValueError`` when an entry point names something else than its owner's contract.
    """
    global _found, _finding
    if _found is not None:
        return _found
    if _finding:
        raise RuntimeError(
            "a registry of assent was read while the owners' contracts were being imported: a contract package "
            "must not read one (KINDS, REGISTRY, ROUTES, ...) at import"
        )
    _finding = True
    try:
        found: dict[str, Contract] = {}
        for entry in entry_points(group=ENTRY_POINTS):
            contract = entry.load()
            if not isinstance(contract, Contract):
                raise TypeError(f"the entry point {entry.name} = {entry.value} is not a Contract")
            if contract.owner != entry.name or entry.name in found:
                raise ValueError(f"the entry point {entry.name} = {entry.value} is the contract of {contract.owner}")
            found[entry.name] = contract
    finally:
        _finding = False
    _found = tuple(sorted(found.values(), key=lambda c: (c.owner != WORKSPACE_OWNER, c.owner)))
    return _found
