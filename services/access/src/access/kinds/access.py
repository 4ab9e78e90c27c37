"""The ``access`` kind: ``studio_read_access`` and ``studio_edit_access`` (one agent's own bindings).

The proposal binds the hash of the agent's resolved access as text (every scope's binding of every entry, the
logins it resolves and their tools), so a binding moved at any scope, or a catalog that adds or removes a tool,
makes it stale. Apply reads the access again under the organisation's lock and answers 409 when the hash moved;
then it writes the agent-level bindings only, as the operator, with the proposal's provenance.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from access_contract.routes import AccessLine
from access_contract.widget import AccessChange, AccessEdit, AccessWidgetFields
from assent.contracts import CardField, DecisionMade, ProposalBase, ProposalTarget
from assent.domain import Refusal, check_live_member
from assent.runtime import (
    Applied,
    Call,
    Inverse,
    LiveView,
    Output,
    Proposal,
    ProposalKind,
    Stale,
    StoredProposal,
    Tool,
)
from assent.runtime.uow import UnitOfWork

from ..adapters.repository import AccessRepository
from ..current import current
from ..domain.access import (
    Change,
    EditAccess,
    ReadAccess,
    changed_bindings,
    effects,
    refuse,
    resolve,
    wanted_changes,
    widens,
)
from ..views import line_view


def store(uow: UnitOfWork) -> AccessRepository:
    return uow.store(AccessRepository)


class AccessRead(BaseModel):
    """``studio_read_access``'s answer: the agent's access as lines, and as the text whose hash a request binds."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    hash: str
    text: str
    lines: list[AccessLine]


class BindingsEdit(BaseModel):
    """What applying an access request writes (its ``payload``): the agent's bindings it changes (each as
    :meth:`Change.stored` keeps it), for the agent of that guild and organisation."""

    model_config = ConfigDict(frozen=True)

    org_id: str
    guild_id: str | None
    agent_name: str
    changes: list[dict[str, str | None]]

    def wanted(self) -> list[Change]:
        return [Change.from_stored(c) for c in self.changes]


class AccessMoved(BaseModel):
    """A stale request's agent access as it is now: its hash."""

    model_config = ConfigDict(frozen=True)

    live_hash: str


class BindingsWritten(BaseModel):
    """What an applied access request wrote: its changes, and the hash of the agent's access after them."""

    model_config = ConfigDict(frozen=True)

    changes: list[AccessChange]
    hash: str


def _changes(proposal: StoredProposal) -> list[Change]:
    return BindingsEdit.model_validate(proposal.payload).wanted()


class AccessKind(ProposalKind):
    name = "access"
    reads_proposals = False  # its rules read the bindings and the catalogs, never the proposals table

    def tools(self) -> dict[str, Tool]:
        return {
            "studio_read_access": Tool(ReadAccess, self.read),
            "studio_edit_access": Tool(EditAccess, self.propose),
        }

    async def read(self, call: Call, args: ReadAccess, uow: UnitOfWork) -> Output | Refusal:
        """The agent's effective access, as lines and as the text whose hash a proposal binds."""
        agent = await uow.workspace.agent(args.agent_id)
        refusal = check_live_member(call.session, agent, args.agent_id)
        if refusal is not None:
            return refusal
        assert agent is not None
        now = await current(store(uow), agent)
        answer = AccessRead(
            agent_id=agent.agent_id,
            hash=now.access.hash,
            text=now.access.text(),
            lines=[line_view(line) for line in now.access.lines],
        )
        return Output(answer.model_dump(mode="json"))

    async def propose(self, call: Call, args: EditAccess, uow: UnitOfWork) -> Proposal | Refusal:
        agent = await uow.workspace.agent(args.agent_id)
        refusal = check_live_member(call.session, agent, args.agent_id)
        if refusal is not None:
            return refusal
        assert agent is not None
        now = await current(store(uow), agent)
        changes = wanted_changes(
            now.access, now.bindings, "agent", args.native_tools, args.connections, args.connection_tools
        )
        if isinstance(changes, Refusal):
            return changes
        if not changes:
            return refuse("no_change", "the request changes nothing: the agent already holds every setting it names")
        after = resolve(now.connections, changed_bindings(now.bindings, "agent", changes))
        before_text, after_text = now.access.text(), after.text()
        widening = widens(now.access, after)
        edit = AccessEdit(changes=tuple(AccessChange(**c.as_json()) for c in changes), widens=widening)
        return Proposal(
            action="edit",
            target=ProposalTarget(
                kind="access",
                agent_id=agent.agent_id,
                guild_id=agent.guild_id,
                label=f"Access of {agent.name}",
                ref=agent.agent_id,
            ),
            base=ProposalBase(hash=now.access.hash),
            proposed_hash=after.hash,
            reason=args.reason,
            before=before_text,
            after=after_text,
            fields=(CardField(name="access", before=before_text, after=after_text),),
            effects=effects(agent.name, now.access, after),
            widens=widening,
            widget_fields=AccessWidgetFields(edit=edit),
            payload=BindingsEdit(
                org_id=agent.org_id,
                guild_id=agent.guild_id,
                agent_name=agent.name,
                changes=[c.stored() for c in changes],
            ).model_dump(mode="json"),
        )

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        agent = await uow.workspace.agent(proposal.agent_id or "")
        if agent is None:
            return LiveView(hash=None, version=None, fields=(CardField(name="access", before=None, after=None),))
        now = await current(store(uow), agent)
        after = resolve(now.connections, changed_bindings(now.bindings, "agent", _changes(proposal)))
        return LiveView(
            hash=now.access.hash,
            version=None,
            fields=(CardField(name="access", before=now.access.text(), after=after.text()),),
        )

    async def inverse(self, proposal: StoredProposal, uow: UnitOfWork) -> Inverse | Refusal:
        """Each agent-level binding the request wrote set back to what it said before it (``inherit`` where there was
        none), proposed over the agent's access as it is now."""
        changes = _changes(proposal)
        agent_id = proposal.agent_id or ""
        keys = [(c.kind, c.subject) for c in changes]
        before = await store(uow).settings_before(agent_id, proposal.session_id, proposal.seq, keys)
        agent = await uow.workspace.agent(agent_id)
        if agent is None:
            return refuse("agent_out_of_reach", f"agent {agent_id!r} is no longer a live member of its guild", 409)
        now = await current(store(uow), agent)
        held: dict[tuple[str, str], str] = {
            (b.kind, b.subject): ("on" if b.on else "off") for b in now.bindings if b.scope == "agent"
        }
        if all(held.get(key, "inherit") == setting for key, setting in before.items()):
            return refuse("already_reverted", "the agent's own bindings already read as they did before", 409)
        group = {"native_tool": "native_tools", "connection": "connections", "connection_tool": "connection_tools"}
        settings: dict[str, dict[str, str]] = {name: {} for name in group.values()}
        for change in changes:
            settings[group[change.kind]][change.as_json()["id"]] = before[(change.kind, change.subject)]
        return Inverse("studio_edit_access", {"agent_id": agent_id, **settings})

    async def apply(
        self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork
    ) -> Applied | Stale | Refusal:
        edit, repo = BindingsEdit.model_validate(proposal.payload), store(uow)
        await repo.lock_org(edit.org_id)
        agent = await uow.workspace.agent(proposal.agent_id or "")
        if agent is None or not agent.live or agent.guild_id != edit.guild_id:
            return refuse("agent_out_of_reach", f"agent {proposal.agent_id!r} is no longer a live member of its guild")
        now = await current(repo, agent)
        if now.access.hash != proposal.base.get("hash"):
            return Stale(
                "the agent's access changed since the coach read it (a binding at some scope, or a connection's "
                "tools); the request stays pending",
                AccessMoved(live_hash=now.access.hash).model_dump(mode="json"),
            )
        changes = edit.wanted()
        await repo.write(
            agent.org_id,
            "agent",
            agent.agent_id,
            changes,
            actor=decision.actor,
            session_id=proposal.session_id,
            seq=proposal.seq,
        )
        after = resolve(now.connections, changed_bindings(now.bindings, "agent", changes))
        return Applied(
            f"wrote {len(changes)} binding(s) of agent {agent.agent_id}",
            None,
            BindingsWritten(changes=[AccessChange(**c.as_json()) for c in changes], hash=after.hash).model_dump(
                mode="json"
            ),
        )
