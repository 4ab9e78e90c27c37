"""An in-memory :class:`~assent.runtime.uow.UnitOfWork` for handler unit tests (no broker, no database).

A test builds a :class:`FakeUnitOfWork` with the workspace it needs and the kind stores it passes in
(``stores={EditsRepository: FakeEditsRepository(...)}``), drives an :class:`~assent.runtime.OwnerKit` with messages,
and asserts on what the handler recorded and on :attr:`FakeUnitOfWork.emitted`. There is no transaction:
what a handler wrote stays written, like a commit after every message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from . import topics
from .contracts import (
    AgentChanged,
    GuildChanged,
    Message,
    OrgChanged,
    ProposalProposed,
    SessionClosed,
    SessionContext,
    SessionOpened,
)
from .domain import Agent, Guild, Session
from .runtime.kit import OwnerKit
from .runtime.uow import CallContext, S, StoredProposal
from .topics import Topic

M = TypeVar("M", bound=Message)


class FakeWorkspace:
    """The workspace directory as dicts; ``locked`` lists the guilds read ``for_update``."""

    def __init__(
        self,
        orgs: dict[str, str] | None = None,
        guilds: list[Guild] | None = None,
        agents: list[Agent] | None = None,
    ) -> None:
        self.orgs: dict[str, str] = dict(orgs or {})
        self.guilds: dict[str, Guild] = {g.guild_id: g for g in guilds or []}
        self.agents: dict[str, Agent] = {a.agent_id: a for a in agents or []}
        self.locked: list[str] = []

    async def org(self, org_id: str) -> str | None:
        return self.orgs.get(org_id)

    async def guild(self, guild_id: str, *, for_update: bool = False) -> Guild | None:
        if for_update:
            self.locked.append(guild_id)
        return self.guilds.get(guild_id)

    async def agent(self, agent_id: str) -> Agent | None:
        return self.agents.get(agent_id)

    async def agents_of_guild(self, guild_id: str) -> list[Agent]:
        return sorted((a for a in self.agents.values() if a.guild_id == guild_id), key=lambda a: a.agent_id)

    async def agents_of_org(self, org_id: str) -> list[Agent]:
        return sorted((a for a in self.agents.values() if a.org_id == org_id), key=lambda a: a.agent_id)

    async def apply(self, event: OrgChanged | GuildChanged | AgentChanged) -> bool:
        if isinstance(event, OrgChanged):
            self.orgs[event.org_id] = event.name
            return True
        if isinstance(event, GuildChanged):
            held = self.guilds.get(event.guild_id)
            if held is not None and held.revision >= event.revision:
                return False
            self.guilds[event.guild_id] = Guild(
                event.guild_id, event.org_id, event.name, event.about, event.description, event.revision
            )
            return True
        agent = self.agents.get(event.agent_id)
        if agent is not None and agent.revision >= event.revision:
            return False
        self.agents[event.agent_id] = Agent(
            event.agent_id, event.org_id, event.guild_id, event.name, event.live, event.task, event.revision
        )
        return True


class FakeSessions:
    """Sessions as a dict; a new session's snapshot is its source guild as the workspace holds it then."""

    def __init__(self, workspace: FakeWorkspace, sessions: list[Session] | None = None) -> None:
        self.workspace = workspace
        self.sessions: dict[str, Session] = {s.session_id: s for s in sessions or []}

    def _snapshot(self, guild_id: str, org_id: str) -> dict[str, Any] | None:
        guild = self.workspace.guilds.get(guild_id)
        if guild is None or guild.org_id != org_id:
            return None
        return {"guild_id": guild.guild_id, "name": guild.name, "about": guild.about, "description": guild.description}

    def _insert(self, session_id: str, org_id: str, guild_id: str, operator: str) -> None:
        if session_id not in self.sessions:
            self.sessions[session_id] = Session(
                session_id, org_id, guild_id, operator, False, self._snapshot(guild_id, org_id)
            )

    async def get(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    async def ensure(self, session_id: str, context: SessionContext) -> None:
        self._insert(session_id, context.org_id, context.source_guild_id, context.operator_user_id)

    async def record(self, message: SessionOpened | SessionClosed) -> None:
        if isinstance(message, SessionOpened):
            self._insert(message.session_id, message.org_id, message.source_guild_id, message.operator_user_id)
        elif message.session_id in self.sessions:
            self.sessions[message.session_id] = dataclasses.replace(self.sessions[message.session_id], closed=True)

    async def set_snapshot(self, session_id: str, snapshot: dict[str, Any]) -> None:
        if session_id in self.sessions:
            self.sessions[session_id] = dataclasses.replace(
                self.sessions[session_id], source_guild_snapshot=dict(snapshot)
            )


class FakeProposals:
    """Proposals as a dict; every read hands out a copy, as a database would."""

    def __init__(self) -> None:
        self.proposals: dict[str, StoredProposal] = {}
        self.round_trips: list[tuple[str, int]] = []
        """Each write as the database would get it: ("add" or "update", how many proposals)."""
        self.with_outbox: list[str] = []
        """The writes ("add" or "update") held to go with the outbox rows at commit (``last=True``)."""

    async def get(self, proposal_id: str, *, for_update: bool = False) -> StoredProposal | None:
        held = self.proposals.get(proposal_id)
        return None if held is None else dataclasses.replace(held)

    async def get_many(self, proposal_ids: Sequence[str], *, for_update: bool = False) -> dict[str, StoredProposal]:
        return {i: dataclasses.replace(self.proposals[i]) for i in proposal_ids if i in self.proposals}

    async def by_tool_call(self, tool_call_id: str) -> StoredProposal | None:
        for held in self.proposals.values():
            if held.tool_call_id == tool_call_id:
                return dataclasses.replace(held)
        return None

    async def at_seq(self, session_id: str, seq: int) -> StoredProposal | None:
        for held in self.proposals.values():
            if held.session_id == session_id and held.seq == seq:
                return dataclasses.replace(held)
        return None

    def clashing(self, session_id: str, seq: int, tool_call_id: str) -> list[StoredProposal]:
        """Proposals of this tool call, or at this session's ``seq``."""
        return [
            dataclasses.replace(held)
            for held in self.proposals.values()
            if held.tool_call_id == tool_call_id or (held.session_id == session_id and held.seq == seq)
        ]

    async def add(self, proposal: StoredProposal) -> None:
        self.round_trips.append(("add", 1))
        self._add(proposal)

    async def add_many(self, proposals: Sequence[StoredProposal], *, last: bool = False) -> None:
        if proposals:
            self.round_trips.append(("add", len(proposals)))
            if last:
                self.with_outbox.append("add")
        for proposal in proposals:
            self._add(proposal)

    def _add(self, proposal: StoredProposal) -> None:
        if proposal.proposal_id in self.proposals or any(
            held.tool_call_id == proposal.tool_call_id for held in self.proposals.values()
        ):
            raise ValueError(f"proposal {proposal.proposal_id!r} is already recorded")  # a unique violation
        self.proposals[proposal.proposal_id] = dataclasses.replace(proposal)

    async def update(self, proposal_id: str, **fields: Any) -> None:
        self.round_trips.append(("update", 1))
        self._update(proposal_id, fields)

    async def update_many(self, changes: Sequence[tuple[str, dict[str, Any]]], *, last: bool = False) -> None:
        if changes:
            self.round_trips.append(("update", len(changes)))
            if last:
                self.with_outbox.append("update")
        for proposal_id, fields in changes:
            self._update(proposal_id, fields)

    def _update(self, proposal_id: str, fields: dict[str, Any]) -> None:
        held = self.proposals.get(proposal_id)
        if held is not None:
            self.proposals[proposal_id] = dataclasses.replace(held, **fields)


class FakeUnitOfWork:
    """The :class:`~assent.runtime.uow.UnitOfWork` protocol in memory.

    ``emitted`` holds ``(topic name, key, message)`` in emit order; ``locked_sessions`` each
    ``lock_session`` call; ``committed`` the ``on_commit`` callbacks (:meth:`commit` runs them);
    ``store(kind)`` returns the fake passed in ``stores`` for that repository class.
    """

    def __init__(
        self,
        *,
        workspace: FakeWorkspace | None = None,
        sessions: list[Session] | None = None,
        stores: dict[type[Any], Any] | None = None,
    ) -> None:
        self.workspace = workspace or FakeWorkspace()
        self.sessions = FakeSessions(self.workspace, sessions)
        self.proposals = FakeProposals()
        self.stores: dict[type[Any], Any] = dict(stores or {})
        self.emitted: list[tuple[str, str, Message]] = []
        self.locked_sessions: list[str] = []
        self.committed: list[Callable[[], Awaitable[None]]] = []
        self.waits_for_publication = False
        """Whether the handler asked its answer to wait for Kafka (:meth:`answer_once_published`)."""

    def store(self, kind: type[S]) -> S:
        return cast(S, self.stores[kind])  # made by that class (a fake for it, in tests)

    async def call_contexts(self, calls: Sequence[tuple[str, int, str]]) -> list[CallContext]:
        return [
            CallContext(await self.sessions.get(session_id), self.proposals.clashing(session_id, seq, tool_call_id))
            for session_id, seq, tool_call_id in calls
        ]

    async def emit(self, topic: Topic, key: str, message: Message) -> None:
        self.emitted.append((topic.name, key, message))

    async def lock_session(self, session_id: str) -> None:
        self.locked_sessions.append(session_id)

    def on_commit(self, callback: Callable[[], Awaitable[None]]) -> None:
        self.committed.append(callback)

    def answer_once_published(self) -> None:
        self.waits_for_publication = True

    async def commit(self) -> None:
        """What the runtime does after a commit: run the ``on_commit`` callbacks, once."""
        callbacks, self.committed = self.committed, []
        for callback in callbacks:
            await callback()

    def messages(self, kind: type[M], topic: str | None = None) -> list[M]:
        """What was emitted of type ``kind`` (on ``topic`` when given), in order."""
        return [m for t, _, m in self.emitted if isinstance(m, kind) and (topic is None or t == topic)]

    def clear(self) -> None:
        """Forget what was emitted so far (the next message's events start from an empty list)."""
        self.emitted.clear()
        self.locked_sessions.clear()


@dataclass(frozen=True)
class ShownLines:
    """A request's line counts as the operator is shown them: the tray's ``(added, removed)`` and its card's
    ``(field, added, removed)`` per field."""

    tray: tuple[int, int]
    card: list[tuple[str, int, int]]

    @property
    def card_total(self) -> tuple[int, int]:
        return sum(added for _, added, _ in self.card), sum(removed for _, _, removed in self.card)


async def shown_line_counts(kit: OwnerKit, uow: FakeUnitOfWork, proposal_id: str) -> ShownLines:
    """The tray's line counts of a request, those of the ``ProposalProposed`` its owner announced, beside its card's
    now: per field of the owner's live side, counted as the gateway's card counts each beside its diff
    (:attr:`~assent.contracts.CardField.lines`). While the target is as the proposal read it, the card's add up to
    the tray's (:attr:`ShownLines.card_total`)."""
    (proposed,) = [
        m for m in uow.messages(ProposalProposed, topics.PROPOSALS_PROPOSED.name) if m.proposal_id == proposal_id
    ]
    live = await kit.live_card(proposal_id, uow)
    assert live is not None, f"the owner does not know {proposal_id!r}"
    return ShownLines(
        (proposed.lines.added, proposed.lines.removed),
        [(field.name, field.lines.added, field.lines.removed) for field in live.fields],
    )
