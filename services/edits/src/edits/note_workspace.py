"""Direct note writes by people (not proposals): list, read, write, delete and history of notes.

These are the operator's (or a test's) own changes to live notes, the kind of change a pending request must
never overwrite. The same rules hold as for an applied request: the byte cap, the display-path rules, a
version check when one is given, and no delete while a Task of the organisation embeds the note.

Organisations are walls: every function takes ``caller_org``, the organisation of the person the call is made
for (``None`` for a service's own call: no wall). Any other org is answered as an org that does not exist
(404, ``org '<id>' does not exist``), before anything else is read or checked, so the answer says nothing about
the other org's notes, or whether it exists.
"""

from __future__ import annotations

from assent.domain import Refusal
from assent.runtime.uow import SqlUnitOfWork
from assent.runtime.walls import NotFound, org_in, walled
from assent.runtime.writes import record_write
from edits_contract.workspace import Note, NoteDeleted, NoteHistory, NoteSummary

from .adapters.notes import NotesRepository
from .domain import notes
from .domain.model import WriteOrigin
from .workspace import Conflict, Refused


def note_summary(note: notes.LiveNote) -> NoteSummary:
    return NoteSummary(
        display_path=note.display_path,
        level=note.level,
        scope_id=note.scope_id,
        key=note.key,
        title=note.title,
        version=note.version,
        hash=note.hash,
    )


def note_view(note: notes.LiveNote) -> Note:
    return Note(**note_summary(note).model_dump(), content=note.content)


def parse(path: str) -> notes.NotePath:
    parsed = notes.parse_display_path(path)
    if isinstance(parsed, Refusal):
        raise Refused(parsed.message, parsed.code)
    return parsed


def _check_wall(org_id: str, caller_org: str | None) -> None:
    if walled(org_id, caller_org):
        raise NotFound(f"org {org_id!r} does not exist")


async def _check_scope(uow: SqlUnitOfWork, org_id: str, path: notes.NotePath) -> None:
    if await uow.workspace.org(org_id) is None:
        raise NotFound(f"org {org_id!r} does not exist")
    if path.level == "agent":
        agent = await uow.workspace.agent(path.scope_id or "")
        if agent is None or agent.org_id != org_id:
            raise NotFound(f"agent {path.scope_id!r} does not exist in org {org_id!r}")
    elif path.level == "guild":
        guild = await uow.workspace.guild(path.scope_id or "")
        if guild is None or guild.org_id != org_id:
            raise NotFound(f"guild {path.scope_id!r} does not exist in org {org_id!r}")


async def _record(
    uow: SqlUnitOfWork,
    route: str,
    org_id: str,
    path: notes.NotePath,
    action: str,
    actor: str,
    before: notes.LiveNote | None,
    after: notes.LiveNote | None,
    version: int | None,
) -> None:
    """Record the write of the note at ``path`` (its guild or agent, by its level) with its hashes before and after."""
    await record_write(
        uow,
        route,
        org_id=org_id,
        guild_id=path.scope_id if path.level == "guild" else None,
        agent_id=path.scope_id if path.level == "agent" else None,
        kind="note",
        action=action,
        target=f"Note {path.display_path}",
        actor=actor,
        hash_before=None if before is None else before.hash,
        hash_after=None if after is None else after.hash,
        detail=None if version is None else f"version {version}",
    )


async def list_notes(uow: SqlUnitOfWork, org_id: str, *, caller_org: str | None = None) -> list[NoteSummary]:
    await org_in(uow, org_id, caller_org)
    return [note_summary(note) for note in await NotesRepository(uow.conn).notes_of_org(org_id)]


async def read_note(uow: SqlUnitOfWork, org_id: str, path: str, *, caller_org: str | None = None) -> Note:
    _check_wall(org_id, caller_org)
    note = await NotesRepository(uow.conn).note(org_id, parse(path).display_path)
    if note is None:
        raise NotFound(f"there is no note {path!r} in org {org_id!r}")
    return note_view(note)


async def write_note(
    uow: SqlUnitOfWork,
    org_id: str,
    path: str,
    content: str,
    title: str | None,
    expected_version: int | None,
    actor: str,
    max_bytes: int,
    *,
    caller_org: str | None = None,
) -> Note:
    """Create or replace a note; with ``expected_version``, refuse (Conflict) unless the live note is at it."""
    _check_wall(org_id, caller_org)
    parsed = parse(path)
    refusal = notes.check_byte_cap(content, max_bytes, "the note")
    if refusal is not None:
        raise Refused(refusal.message, refusal.code)
    await _check_scope(uow, org_id, parsed)
    repo = NotesRepository(uow.conn)
    live = await repo.note(org_id, parsed.display_path, for_update=True)
    if expected_version is not None and (live is None or live.version != expected_version):
        raise Conflict(
            f"{parsed.display_path!r} is at version {None if live is None else live.version}, not {expected_version}"
        )
    version = await repo.write_note(
        org_id,
        parsed,
        content,
        title=title or (live.title if live is not None else notes.default_title(parsed.key)),
        expected_version=None if live is None else live.version,
        origin=WriteOrigin(actor),
    )
    if version is None:
        raise Conflict(f"a note was written at {parsed.display_path!r} meanwhile")
    note = await repo.note(org_id, parsed.display_path)
    assert note is not None
    await _record(uow, "write_note", org_id, parsed, "create" if live is None else "edit", actor, live, note, version)
    return note_view(note)


async def delete_note(
    uow: SqlUnitOfWork,
    org_id: str,
    path: str,
    expected_version: int | None,
    actor: str,
    *,
    caller_org: str | None = None,
) -> NoteDeleted:
    """Delete a note; refused (Conflict) on a version mismatch or while a Task of the org embeds it."""
    _check_wall(org_id, caller_org)
    parsed = parse(path)
    repo = NotesRepository(uow.conn)
    live = await repo.note(org_id, parsed.display_path, for_update=True)
    if live is None:
        raise NotFound(f"there is no note {path!r} in org {org_id!r}")
    if expected_version is not None and live.version != expected_version:
        raise Conflict(f"{parsed.display_path!r} is at version {live.version}, not {expected_version}")
    refusal = notes.embedded_refusal(
        parsed.display_path, notes.embedding_agents(await repo.agents_of_org(org_id, lock=True), parsed.display_path)
    )
    if refusal is not None:
        raise Conflict(refusal.message)
    version = await repo.delete_note(org_id, parsed, expected_version=live.version, origin=WriteOrigin(actor))
    await _record(uow, "delete_note", org_id, parsed, "delete", actor, live, None, version)
    return NoteDeleted(display_path=parsed.display_path, deleted=True, version=version)


async def note_history(uow: SqlUnitOfWork, org_id: str, path: str, *, caller_org: str | None = None) -> NoteHistory:
    _check_wall(org_id, caller_org)
    parsed = parse(path)
    repo = NotesRepository(uow.conn)
    return NoteHistory(
        display_path=parsed.display_path,
        revisions=await repo.history(org_id, parsed.display_path),
        file_changes=await repo.file_changes(org_id, parsed.display_path),
    )
