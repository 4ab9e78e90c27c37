"""Queries over the notes: the live notes, their revisions and the ``file_changes`` every write adds.

A repository works inside the caller's transaction (a unit of work's).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Executable, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from assent.domain import Agent
from assent.hashing import content_hash
from edits_contract.workspace import FileChange, NoteRevision

from ..domain.model import WriteOrigin
from ..domain.notes import LiveNote, NotePath
from . import tables as t


def _note(row: Any) -> LiveNote:
    return LiveNote(
        row.note_id,
        row.org_id,
        row.level,
        row.scope_id,
        row.key,
        row.title,
        row.display_path,
        row.content,
        row.version,
        row.hash,
    )


@dataclass(frozen=True)
class Prior:
    """What lived at a note's path before one write: its title and text (``content`` None: no note lived there)."""

    title: str | None
    content: str | None


class NotesRepository:
    """Live notes by organisation and display path, and every write's history."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def note(self, org_id: str, display_path: str, *, for_update: bool = False) -> LiveNote | None:
        query = select(t.notes).where(t.notes.c.org_id == org_id, t.notes.c.display_path == display_path)
        row = (await self.conn.execute(query.with_for_update() if for_update else query)).first()
        return None if row is None else _note(row)

    async def notes_of_org(self, org_id: str) -> list[LiveNote]:
        query = select(t.notes).where(t.notes.c.org_id == org_id).order_by(t.notes.c.display_path)
        return [_note(row) for row in await self.conn.execute(query)]

    async def agents_of_org(self, org_id: str, *, lock: bool = False) -> list[Agent]:
        """The organisation's agents with their Tasks; ``lock`` holds their rows (FOR SHARE) so no Task changes
        until the transaction ends (a delete checks that none embeds the note)."""
        query = select(t.agents).where(t.agents.c.org_id == org_id).order_by(t.agents.c.agent_id)
        if lock:
            query = query.with_for_update(read=True)
        return [
            Agent(r.agent_id, r.org_id, r.guild_id, r.name, r.live, r.task, r.revision)
            for r in await self.conn.execute(query)
        ]

    async def write_note(
        self,
        org_id: str,
        path: NotePath,
        content: str,
        *,
        title: str,
        expected_version: int | None,
        origin: WriteOrigin,
    ) -> int | None:
        """Write a note if the live one is at ``expected_version`` (None: no note is live at the path).

        Answers the new version, or None when the live note is not at ``expected_version`` (a note written
        meanwhile, a concurrent create included). Every write adds a revision and a ``file_changes`` row.
        """
        display_path = path.display_path
        new_hash = content_hash(content)
        statement: Executable
        if expected_version is None:
            statement = (
                insert(t.notes)
                .values(
                    note_id="note_" + uuid.uuid4().hex,
                    org_id=org_id,
                    level=path.level,
                    scope_id=path.scope_id,
                    key=path.key,
                    title=title,
                    display_path=display_path,
                    content=content,
                    version=1,
                    hash=new_hash,
                    updated_by=origin.actor,
                )
                .on_conflict_do_nothing(index_elements=["org_id", "display_path"])
                .returning(t.notes.c.note_id, t.notes.c.version)
            )
            change = "create"
        else:
            statement = (
                t.notes.update()
                .where(
                    t.notes.c.org_id == org_id,
                    t.notes.c.display_path == display_path,
                    t.notes.c.version == expected_version,
                )
                .values(
                    content=content, title=title, version=expected_version + 1, hash=new_hash, updated_by=origin.actor
                )
                .returning(t.notes.c.note_id, t.notes.c.version)
            )
            change = "update"
        row = (await self.conn.execute(statement)).first()
        if row is None:
            return None
        await self._record(row.note_id, org_id, path, row.version, change, title, content, origin)
        return int(row.version)

    async def delete_note(
        self,
        org_id: str,
        path: NotePath,
        *,
        expected_version: int,
        origin: WriteOrigin,
    ) -> int | None:
        """Delete the note if it is live at ``expected_version``; answers the deletion's revision version."""
        row = (
            await self.conn.execute(
                t.notes.delete()
                .where(
                    t.notes.c.org_id == org_id,
                    t.notes.c.display_path == path.display_path,
                    t.notes.c.version == expected_version,
                )
                .returning(t.notes.c.note_id, t.notes.c.version, t.notes.c.title)
            )
        ).first()
        if row is None:
            return None
        version = int(row.version) + 1
        await self._record(row.note_id, org_id, path, version, "delete", row.title, None, origin)
        return version

    async def _record(
        self,
        note_id: str,
        org_id: str,
        path: NotePath,
        version: int,
        change: str,
        title: str,
        content: str | None,
        origin: WriteOrigin,
    ) -> None:
        await self.conn.execute(
            t.note_revisions.insert().values(
                note_id=note_id,
                org_id=org_id,
                display_path=path.display_path,
                version=version,
                change=change,
                title=title,
                content=content,
                hash=None if content is None else content_hash(content),
                author_user_id=origin.actor,
                tool_call_id=origin.tool_call_id,
                tool_name=origin.tool_name,
                studio_session_id=origin.studio_session_id,
                studio_seq=origin.studio_seq,
            )
        )
        await self.conn.execute(
            t.file_changes.insert().values(
                org_id=org_id,
                agent_id=path.scope_id if path.level == "agent" else None,
                path=path.display_path,
                version=version,
                change=change,
                actor_user_id=origin.actor,
                tool_call_id=origin.tool_call_id,
                tool_name=origin.tool_name,
                studio_session_id=origin.studio_session_id,
                studio_seq=origin.studio_seq,
            )
        )

    async def prior(self, org_id: str, display_path: str, tool_call_id: str) -> Prior | None:
        """What lived at ``display_path`` before the write of the request made by ``tool_call_id`` (the revision before
        it at that path); None when no such write is kept."""
        r = t.note_revisions
        written = (
            select(func.min(r.c.revision_id))
            .where(r.c.org_id == org_id, r.c.display_path == display_path, r.c.tool_call_id == tool_call_id)
            .scalar_subquery()
        )
        found = (await self.conn.execute(select(written))).scalar_one_or_none()
        if found is None:
            return None
        query = (
            select(r.c.change, r.c.title, r.c.content)
            .where(r.c.org_id == org_id, r.c.display_path == display_path, r.c.revision_id < found)
            .order_by(r.c.revision_id.desc())
            .limit(1)
        )
        row = (await self.conn.execute(query)).first()
        if row is None or row.change == "delete":
            return Prior(None, None)
        return Prior(row.title, row.content)

    async def history(self, org_id: str, display_path: str) -> list[NoteRevision]:
        """Every write of the notes that lived at ``display_path``, oldest first, and the request behind it."""
        r = t.note_revisions
        query = (
            select(
                r.c.note_id,
                r.c.version,
                r.c.change,
                r.c.title,
                r.c.hash,
                r.c.author_user_id,
                r.c.tool_call_id,
                r.c.tool_name,
                r.c.studio_session_id,
                r.c.studio_seq,
                r.c.created_at,
            )
            .where(r.c.org_id == org_id, r.c.display_path == display_path)
            .order_by(r.c.revision_id)
        )
        return [NoteRevision.model_validate(dict(row)) for row in (await self.conn.execute(query)).mappings()]

    async def file_changes(self, org_id: str, display_path: str) -> list[FileChange]:
        """The ``file_changes`` rows of the notes that lived at ``display_path``, oldest first."""
        c = t.file_changes
        query = (
            select(
                c.c.agent_id,
                c.c.path,
                c.c.version,
                c.c.change,
                c.c.actor_user_id,
                c.c.tool_call_id,
                c.c.tool_name,
                c.c.studio_session_id,
                c.c.studio_seq,
                c.c.created_at,
            )
            .where(c.c.org_id == org_id, c.c.path == display_path)
            .order_by(c.c.change_id)
        )
        return [FileChange.model_validate(dict(row)) for row in (await self.conn.execute(query)).mappings()]
