"""The ``note`` kind: ``studio_edit_note`` (create, edit, delete), ``studio_list_notes``, ``studio_read_note``."""

from __future__ import annotations

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

from ..adapters.notes import NotesRepository
from ..domain import notes
from ..domain.model import WriteOrigin
from .outcomes import Moved, Written


class ListedNote(BaseModel):
    """A note as ``studio_list_notes`` lists it."""

    model_config = ConfigDict(frozen=True)

    display_path: str
    level: str
    title: str
    version: int
    hash: str


class NoteList(BaseModel):
    """``studio_list_notes``'s answer: the notes within the session's reach."""

    model_config = ConfigDict(frozen=True)

    notes: list[ListedNote]


class NoteRead(BaseModel):
    """``studio_read_note``'s answer: one note with its text."""

    model_config = ConfigDict(frozen=True)

    display_path: str
    level: str
    title: str
    content: str
    version: int
    hash: str


class NoteEdit(BaseModel):
    """What applying a note request writes (its ``payload``): the note's place and title, and its whole new text
    (None: a delete)."""

    model_config = ConfigDict(frozen=True)

    display_path: str
    level: str
    scope_id: str | None
    key: str
    title: str
    content: str | None

    @property
    def path(self) -> notes.NotePath:
        return notes.NotePath(self.level, self.scope_id, self.key)


def repo(uow: UnitOfWork) -> NotesRepository:
    return uow.store(NotesRepository)


async def owner_of(uow: UnitOfWork, path: notes.NotePath) -> Agent | None:
    """The agent an agent note belongs to (None for guild and org notes, or an unknown agent)."""
    return await uow.workspace.agent(path.scope_id or "") if path.level == "agent" else None


async def card_notes(uow: UnitOfWork, org_id: str, action: str, path: notes.NotePath) -> tuple[str, ...]:
    """The card's lines now: who reads the note (create), or which Tasks embed it (delete)."""
    if action == "create":
        if path.level == "guild":
            members = await uow.workspace.agents_of_guild(path.scope_id or "")
            return (notes.readers_line("guild", None, members),)
        return (notes.readers_line(path.level, await owner_of(uow, path), ()),)
    if action == "delete":
        embedders = notes.embedding_agents(await uow.workspace.agents_of_org(org_id), path.display_path)
        line = notes.embedded_line(embedders)
        return () if line is None else (line,)
    return ()


class NoteKind(ProposalKind):
    name = "note"
    reads_proposals = False  # its rules read the targets, never the proposals table

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes

    def tools(self) -> dict[str, Tool]:
        return {
            "studio_edit_note": Tool(notes.NoteRequest, self.propose),
            "studio_list_notes": Tool(notes.ListNotes, self.list),
            "studio_read_note": Tool(notes.ReadNote, self.read),
        }

    # --- read tools ---------------------------------------------------------------------------------

    async def list(self, call: Call, args: notes.ListNotes, uow: UnitOfWork) -> Output:
        session = call.session
        agents = {a.agent_id: a for a in await uow.workspace.agents_of_org(session.org_id)}
        listed = []
        for note in await repo(uow).notes_of_org(session.org_id):
            path = notes.NotePath(note.level, note.scope_id, note.key)
            if notes.within_reach(session, path, agents):
                listed.append(
                    ListedNote(
                        display_path=note.display_path,
                        level=note.level,
                        title=note.title,
                        version=note.version,
                        hash=note.hash,
                    )
                )
        return Output(NoteList(notes=listed).model_dump(mode="json"))

    async def read(self, call: Call, args: notes.ReadNote, uow: UnitOfWork) -> Output | Refusal:
        path = notes.parse_display_path(args.display_path)
        if isinstance(path, Refusal):
            return path
        refusal = notes.check_reach(call.session, path, await owner_of(uow, path))
        if refusal is not None:
            return refusal
        note = await repo(uow).note(call.session.org_id, path.display_path)
        if note is None:
            return Refusal(404, "unknown_note", f"there is no note {path.display_path!r} in this organisation")
        return Output(
            NoteRead(
                display_path=note.display_path,
                level=note.level,
                title=note.title,
                content=note.content,
                version=note.version,
                hash=note.hash,
            ).model_dump(mode="json")
        )

    # --- proposing ----------------------------------------------------------------------------------

    async def propose(self, call: Call, request: notes.NoteRequest, uow: UnitOfWork) -> Proposal | Refusal:
        args = request.root
        session = call.session
        reviewed = await self._review(session, args, uow)
        if isinstance(reviewed, Refusal):
            return reviewed
        edit = NoteEdit(
            display_path=reviewed.display_path,
            level=reviewed.level,
            scope_id=reviewed.scope_id,
            key=reviewed.key,
            title=reviewed.title,
            content=None if reviewed.action == "delete" else reviewed.after,
        )
        return Proposal(
            action=reviewed.action,
            target=ProposalTarget(
                kind="note",
                label=f"Note {reviewed.display_path}",
                agent_id=reviewed.agent_id,
                guild_id=reviewed.scope_id if reviewed.level == "guild" else None,
                path=reviewed.display_path,
            ),
            base=ProposalBase(version=reviewed.base_version, hash=reviewed.base_hash),
            proposed_hash=reviewed.proposed_hash,
            reason=reviewed.reason,
            before=reviewed.before,
            after=reviewed.after,
            fields=(
                CardField(
                    name=reviewed.display_path,
                    before=None if reviewed.action == "create" else reviewed.before,
                    after=None if reviewed.action == "delete" else reviewed.after,
                ),
            ),
            notes=reviewed.notes,
            payload=edit.model_dump(mode="json"),
        )

    async def _review(
        self, session: Session, args: notes.CreateNote | notes.EditNote | notes.DeleteNote, uow: UnitOfWork
    ) -> notes.NoteProposal | Refusal:
        if isinstance(args, notes.CreateNote):
            agent = await uow.workspace.agent(args.agent_id) if args.agent_id is not None else None
            scope = args.agent_id if args.level == "agent" else session.source_guild_id
            live = None
            if notes.check_key(args.key, args.level) is None and (args.level != "agent" or args.agent_id):
                live = await repo(uow).note(
                    session.org_id, notes.display_path(args.level, scope if args.level != "org" else None, args.key)
                )
            members = await uow.workspace.agents_of_guild(session.source_guild_id) if args.level == "guild" else []
            return notes.review_create(session, args, agent, live, members, self.max_bytes)
        path = notes.parse_display_path(args.display_path)
        agent = await owner_of(uow, path) if isinstance(path, notes.NotePath) else None
        live = await repo(uow).note(session.org_id, path.display_path) if isinstance(path, notes.NotePath) else None
        if isinstance(args, notes.EditNote):
            return notes.review_edit(session, args, agent, live, self.max_bytes)
        embedders = notes.embedding_agents(await uow.workspace.agents_of_org(session.org_id), args.display_path)
        return notes.review_delete(session, args, agent, live, embedders)

    # --- the card and apply -------------------------------------------------------------------------

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        edit = NoteEdit.model_validate(proposal.payload)
        path = edit.path
        session = await uow.sessions.get(proposal.session_id)
        org_id = session.org_id if session is not None else ""
        live = await repo(uow).note(org_id, path.display_path)
        return LiveView(
            hash=None if live is None else live.hash,
            version=None if live is None else live.version,
            fields=(
                CardField(
                    name=path.display_path,
                    before=None if live is None else live.content,
                    after=edit.content,
                ),
            ),
            notes=await card_notes(uow, org_id, proposal.action, path),
        )

    async def inverse(self, proposal: StoredProposal, uow: UnitOfWork) -> Inverse | Refusal:
        """What lived at the note's path before the request, proposed over what lives there now: a created note is
        deleted, an edited one gets its text back, a deleted one is created again (or, written there since, edited
        back)."""
        edit = NoteEdit.model_validate(proposal.payload)
        session = await uow.sessions.get(proposal.session_id)
        org_id = session.org_id if session is not None else ""
        prior = await repo(uow).prior(org_id, edit.display_path, proposal.tool_call_id)
        if prior is None:
            return Refusal(409, "before_unknown", f"what {edit.display_path} was before this request is not kept")
        live = await repo(uow).note(org_id, edit.display_path)
        if prior.content is None:
            if live is None:
                return Refusal(409, "already_reverted", f"no note lives at {edit.display_path} any more")
            return Inverse(
                "studio_edit_note",
                {"action": "delete", "display_path": edit.display_path, "base_version": live.version},
            )
        if live is None:
            return Inverse(
                "studio_edit_note",
                {
                    "action": "create",
                    "level": edit.level,
                    "agent_id": edit.scope_id if edit.level == "agent" else None,
                    "key": edit.key,
                    "title": prior.title,
                    "content": prior.content,
                },
            )
        if live.content == prior.content:
            return Refusal(409, "already_reverted", f"{edit.display_path} already reads as it did before this request")
        return Inverse(
            "studio_edit_note",
            {
                "action": "edit",
                "display_path": edit.display_path,
                "content": prior.content,
                "base_version": live.version,
            },
        )

    async def apply(
        self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork
    ) -> Applied | Stale | Refusal:
        edit = NoteEdit.model_validate(proposal.payload)
        path = edit.path
        session = await uow.sessions.get(proposal.session_id)
        if session is None:
            return Refusal(404, "unknown_session", f"session {proposal.session_id!r} is not known")
        org_id = session.org_id
        store = repo(uow)
        live = await store.note(org_id, path.display_path, for_update=True)
        if notes.moved(proposal.base.get("hash"), live):
            base_version = proposal.base.get("version")
            was = "no note was live there" if base_version is None else f"base version {base_version}"
            return Stale(
                f"{path.display_path!r} changed since the coach read it ({was}; live version "
                f"{None if live is None else live.version}); the request stays pending",
                {} if live is None else Moved(live_version=live.version, live_hash=live.hash).model_dump(mode="json"),
            )
        origin = WriteOrigin(
            actor=decision.actor,
            tool_call_id=proposal.tool_call_id,
            tool_name=proposal.tool,
            studio_session_id=proposal.session_id,
            studio_seq=proposal.seq,
        )
        if proposal.action == "delete":
            assert live is not None
            embedders = notes.embedding_agents(await store.agents_of_org(org_id, lock=True), path.display_path)
            refusal = notes.embedded_refusal(path.display_path, embedders)
            if refusal is not None:
                return refusal
            version = await store.delete_note(org_id, path, expected_version=live.version, origin=origin)
            assert version is not None  # the row is locked FOR UPDATE at live.version
            return Applied(
                f"applied; {path.display_path} is deleted", version, Written(hash=None).model_dump(mode="json")
            )
        assert edit.content is not None  # only a delete writes no text
        version = await store.write_note(
            org_id,
            path,
            edit.content,
            title=edit.title if live is None else live.title,
            expected_version=None if live is None else live.version,
            origin=origin,
        )
        if version is None:  # a create that lost to a concurrent one
            return Stale(f"a note was written at {path.display_path!r} meanwhile; the request stays pending")
        return Applied(
            f"applied; {path.display_path} is now version {version}",
            version,
            Written(hash=proposal.proposed_hash).model_dump(mode="json"),
        )
