"""The ``collection`` kind: ``studio_edit_collection`` (create, edit, delete), ``studio_list_collections`` and
``studio_read_collection``.

A request targets the collection by id (None until a create is applied) and binds the hash of its name, purpose,
scope, columns and the source guild's access rows. Applying reads it again by id under its row lock and answers 409
when the hash moved (a create: when a table of that name exists meanwhile); then, in the decision's one transaction,
it writes the collection (its records changed set-wise), then each access row, each logged against the collection
with the request behind it (``studio_session_id``, ``studio_seq``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from assent.contracts import CardField, DecisionMade, ProposalBase, ProposalTarget
from assent.domain import Agent, Refusal, Session
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
from edits_contract.collections import AccessLogged, DeleteLogged

from ..adapters.collections import CollectionsRepository
from ..domain import collection_reverts
from ..domain import collections as rules
from ..domain.collections import AccessRow, Directory, LiveCollection, RecordCounts
from ..domain.model import WriteOrigin
from .outcomes import MovedTo


def repo(uow: UnitOfWork) -> CollectionsRepository:
    return uow.store(CollectionsRepository)


async def directory_of(
    uow: UnitOfWork, session: Session, agents: Mapping[str, Agent], rows: Iterable[AccessRow] = ()
) -> Directory:
    """The names the card shows: the source guild, the guilds on the access list, the organisation's agents."""
    guild_ids = {session.source_guild_id, *(r.subject_id for r in rows if r.kind == "guild")}
    names = {}
    for guild_id in sorted(guild_ids):
        guild = await uow.workspace.guild(guild_id)
        if guild is not None and guild.org_id == session.org_id:
            names[guild_id] = guild.name
    return Directory(names, agents, session.source_guild_id)


async def agents_of(uow: UnitOfWork, org_id: str) -> dict[str, Agent]:
    return {a.agent_id: a for a in await uow.workspace.agents_of_org(org_id)}


def text_of(live: LiveCollection, directory: Directory) -> str:
    return rules.as_text(live.name, live.purpose, live.scope, live.columns, live.access, directory)


class AccessRowChange(BaseModel):
    """One access row a request writes: ``mode`` None removes it."""

    model_config = ConfigDict(frozen=True)

    kind: str
    subject_id: str
    mode: str | None


class CollectionEdit(BaseModel):
    """What applying a collection request reads (its ``payload``): the collection (``collection_id`` None: a create),
    where it was asked for, its name, purpose and scope after, its complete new columns (None: kept), the access rows
    it writes, and the text its card shows after."""

    model_config = ConfigDict(frozen=True)

    collection_id: str | None
    org_id: str
    source_guild_id: str
    name: str
    purpose: str
    scope: str
    columns: list[rules.Column] | None
    access: list[AccessRowChange]
    after: str


class TableDeleted(BaseModel):
    """What an applied delete did: the collection, and how many records went with it."""

    model_config = ConfigDict(frozen=True)

    collection_id: str
    records_changed: int


class TableWritten(BaseModel):
    """What an applied create or edit did: the collection, its ``updated_at`` now, and how many records changed."""

    model_config = ConfigDict(frozen=True)

    collection_id: str
    updated_at: str
    records_changed: int


class CollectionKind(ProposalKind):
    name = "collection"
    reads_proposals = False  # its rules read the collections, never the proposals table

    def tools(self) -> dict[str, Tool]:
        return {
            "studio_edit_collection": Tool(rules.CollectionRequest, self.propose),
            "studio_list_collections": Tool(rules.ListCollections, self.list),
            "studio_read_collection": Tool(rules.ReadCollection, self.read),
        }

    # --- read tools ---------------------------------------------------------------------------------

    async def list(self, call: Call, args: rules.ListCollections, uow: UnitOfWork) -> Output:
        """The collections within reach: the source guild's own and the organisation's, each with its updated_at
        and the hash a request binds."""
        session = call.session
        agents = await agents_of(uow, session.org_id)
        listed = []
        for live in await repo(uow).of_org(session.org_id):
            if rules.check_reach(session, live, live.collection_id) is None:
                listed.append(rules.listed(live, await directory_of(uow, session, agents, live.access)))
        return Output(rules.CollectionList(collections=listed).model_dump(mode="json"))

    async def read(self, call: Call, args: rules.ReadCollection, uow: UnitOfWork) -> Output | Refusal:
        """One collection within reach with a page of its records (``offset``, ``limit``, in record order)."""
        session = call.session
        live = await repo(uow).by_ref(session.org_id, args.collection)
        refusal = rules.check_reach(session, live, args.collection)
        if refusal is not None:
            return refusal
        assert live is not None
        directory = await directory_of(uow, session, await agents_of(uow, session.org_id), live.access)
        records = await repo(uow).records(live.collection_id, args.offset, args.limit)
        answer = rules.ReadCollectionAnswer(
            **rules.listed(live, directory).model_dump(),
            text=text_of(live, directory),
            page=rules.RecordsPage(offset=args.offset, limit=args.limit, total=live.records, records=records),
        )
        return Output(answer.model_dump(mode="json"))

    # --- proposing ----------------------------------------------------------------------------------

    async def propose(self, call: Call, request: rules.CollectionRequest, uow: UnitOfWork) -> Proposal | Refusal:
        args = request.root
        session = call.session
        store = repo(uow)
        agents = await agents_of(uow, session.org_id)
        live: LiveCollection | None = None
        reviewed: rules.Reviewed | Refusal
        if isinstance(args, rules.CreateCollection):
            directory = await directory_of(uow, session, agents)
            taken = await store.name_taken(session.org_id, args.name)
            reviewed = rules.review_create(session, args, taken, agents, directory)
        else:
            live = await store.by_ref(session.org_id, args.collection)
            directory = await directory_of(uow, session, agents, live.access if live is not None else ())
            if isinstance(args, rules.EditCollection):
                taken = (
                    live is not None
                    and args.name is not None
                    and await store.name_taken(session.org_id, args.name, other_than=live.collection_id)
                )
                reviewed = rules.review_edit(session, args, live, taken, agents, directory)
            else:
                reviewed = rules.review_delete(session, args, live, directory)
        if isinstance(reviewed, Refusal):
            return reviewed
        counts = RecordCounts() if live is None else await store.counts(live.collection_id, reviewed.plan)
        carriers = (
            rules.task_carriers(agents.values(), reviewed.renamed_from) if reviewed.renamed_from is not None else []
        )
        effects = rules.effects(
            reviewed.action,
            reviewed.name,
            reviewed.plan,
            counts,
            reviewed.rows_after,
            directory,
            renamed_from=reviewed.renamed_from,
            task_carriers=carriers,
            access_edits=reviewed.access_edits,
        )
        before = "" if live is None else text_of(live, directory)
        after = (
            ""
            if reviewed.action == "delete" or reviewed.plan is None
            else rules.as_text(
                reviewed.name, reviewed.purpose, reviewed.scope, reviewed.plan.after, reviewed.rows_after, directory
            )
        )
        columns = args.columns if not isinstance(args, rules.DeleteCollection) else None
        label = f"Table {reviewed.name}" if live is None or live.name == reviewed.name else f"Table {live.name}"
        return Proposal(
            action=reviewed.action,
            target=ProposalTarget(
                kind="collection",
                label=label,
                guild_id=session.source_guild_id if reviewed.scope == "guild" else None,
                ref=reviewed.collection_id,
            ),
            base=ProposalBase(
                version=None if live is None else live.version,
                hash=reviewed.base_hash,
                updated_at=reviewed.base_updated_at,
            ),
            proposed_hash=reviewed.proposed_hash,
            reason=args.reason,
            before=before,
            after=after,
            fields=(
                CardField(
                    name=label.lower(),
                    before=None if live is None else before,
                    after=None if reviewed.action == "delete" else after,
                ),
            ),
            effects=effects,
            payload=CollectionEdit(
                collection_id=reviewed.collection_id,
                org_id=session.org_id,
                source_guild_id=session.source_guild_id,
                name=reviewed.name,
                purpose=reviewed.purpose,
                scope=reviewed.scope,
                columns=columns,
                access=[
                    AccessRowChange(kind=e.kind, subject_id=e.subject_id, mode=e.mode) for e in reviewed.access_edits
                ],
                after=after,
            ).model_dump(mode="json"),
        )

    # --- the card and apply -------------------------------------------------------------------------

    async def _live_of(self, edit: CollectionEdit, uow: UnitOfWork, *, for_update: bool) -> LiveCollection | None:
        """The collection a request targets now: by id, or for a create, one of the name it would take."""
        store = repo(uow)
        if edit.collection_id is None:
            return await store.by_ref(edit.org_id, edit.name, for_update=for_update)
        return await store.get(edit.collection_id, for_update=for_update)

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        edit = CollectionEdit.model_validate(proposal.payload)
        session = Session(proposal.session_id, edit.org_id, edit.source_guild_id, "")
        live = await self._live_of(edit, uow, for_update=False)
        if live is not None and edit.collection_id is None and proposal.status != "pending":
            live = None  # the create was decided: its card shows what it proposed, not the table it made
        agents = await agents_of(uow, session.org_id)
        directory = await directory_of(uow, session, agents, live.access if live is not None else ())
        return LiveView(
            hash=None if live is None else rules.live_hash(live, directory),
            version=None if live is None else live.version,
            fields=(
                CardField(
                    name=proposal.target.get("label", "table").lower(),
                    before=None if live is None else text_of(live, directory),
                    after=None if proposal.action == "delete" else edit.after,
                ),
            ),
        )

    async def inverse(self, proposal: StoredProposal, uow: UnitOfWork) -> Inverse | Refusal:
        """The collection as its change log says it was before the request, proposed over the collection as it is
        now (:func:`edits.domain.collection_reverts.inverse`): a created table is deleted, an edited one edited
        back, a deleted one created again without its records."""
        edit = CollectionEdit.model_validate(proposal.payload)
        collection_id = edit.collection_id or (proposal.resolution or {}).get("collection_id")
        if not isinstance(collection_id, str):
            return Refusal(409, "before_unknown", "the table this request made is not known")
        store = repo(uow)
        changes = await store.changes(edit.org_id, collection_id)
        live = await store.get(collection_id)
        found = collection_reverts.inverse(
            proposal.action, changes, proposal.session_id, proposal.seq, live, edit.source_guild_id
        )
        return found if isinstance(found, Refusal) else Inverse("studio_edit_collection", found)

    async def apply(
        self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork
    ) -> Applied | Stale | Refusal:
        edit = CollectionEdit.model_validate(proposal.payload)
        store = repo(uow)
        org_id = edit.org_id
        session = Session(proposal.session_id, org_id, edit.source_guild_id, decision.actor)
        agents = await agents_of(uow, org_id)
        live = await self._live_of(edit, uow, for_update=True)
        directory = await directory_of(uow, session, agents, live.access if live is not None else ())
        now_hash = None if live is None else rules.live_hash(live, directory)
        if now_hash != proposal.base.get("hash"):
            what = "a table of that name was made meanwhile" if edit.collection_id is None else "it changed"
            return Stale(
                f"table {edit.name!r}: {what} since the coach read it; the request stays pending",
                MovedTo(live_version=None if live is None else live.version).model_dump(mode="json"),
            )
        origin = WriteOrigin(
            actor=decision.actor,
            tool_call_id=proposal.tool_call_id,
            tool_name=proposal.tool,
            studio_session_id=proposal.session_id,
            studio_seq=proposal.seq,
        )
        for row in edit.access:  # the rows' subjects must still be the source guild's live members
            if row.kind == "agent":
                agent = agents.get(row.subject_id)
                if agent is None or not agent.live or agent.guild_id != session.source_guild_id:
                    return Refusal(
                        422,
                        "agent_out_of_reach",
                        f"agent {row.subject_id!r} is no longer a live member of the source guild",
                    )
        changed = 0
        if proposal.action == "delete":
            assert live is not None
            changed = await store.delete(live.collection_id)
            await store.log(
                live.collection_id, org_id, "delete", DeleteLogged(name=live.name, records=changed), origin=origin
            )
            return Applied(
                f"applied; table {live.name} is deleted with its {changed} records",
                live.version,
                TableDeleted(collection_id=live.collection_id, records_changed=changed).model_dump(mode="json"),
            )
        if live is None:  # a create
            plan = rules.plan_columns((), edit.columns or [], edit=False)
            assert not isinstance(plan, Refusal)  # checked when proposed, and the rules are pure
            start = rules.initial_access(edit.scope, org_id, session.source_guild_id)
            guild_id = session.source_guild_id if edit.scope == "guild" else None
            collection_id = await store.create(
                org_id, edit.name, edit.purpose, edit.scope, guild_id, plan.after, start, actor=decision.actor
            )
            if collection_id is None:
                return Stale(f"a table named {edit.name!r} was made meanwhile; the request stays pending")
            made = rules.created(edit.name, edit.purpose, edit.scope, plan.after, start)
            await store.log(collection_id, org_id, "create", made, origin=origin)
        else:
            collection_id = live.collection_id
            plan_or = rules.plan_columns(live.columns, edit.columns, edit=True) if edit.columns is not None else None
            assert not isinstance(plan_or, Refusal)  # the columns are the ones the request was reviewed against
            columns = live.columns if plan_or is None else plan_or.after
            if edit.name != live.name and await store.name_taken(org_id, edit.name, other_than=collection_id):
                return Stale(f"a table named {edit.name!r} was made meanwhile; the request stays pending")
            if edit.name != live.name or edit.purpose != live.purpose or columns != live.columns:
                await store.update(collection_id, edit.name, edit.purpose, columns, actor=decision.actor)
                if plan_or is not None:
                    changed = await store.transform(collection_id, plan_or, actor=decision.actor)
                update = rules.updated(live, edit.name, edit.purpose, columns, plan_or, changed)
                await store.log(collection_id, org_id, "update", update, origin=origin)
        for row in edit.access:
            await store.set_access(collection_id, row.kind, row.subject_id, row.mode)
            await store.log(
                collection_id,
                org_id,
                "access",
                AccessLogged(mode=row.mode),
                origin=origin,
                kind=row.kind,
                subject_id=row.subject_id,
                mode=row.mode,
            )
        after = await store.get(collection_id)
        assert after is not None
        verb = "created" if live is None else "changed"
        return Applied(
            f"applied; table {after.name} is {verb} ({changed} records changed)",
            after.version,
            TableWritten(
                collection_id=collection_id, updated_at=after.updated_at.isoformat(), records_changed=changed
            ).model_dump(mode="json"),
        )
