"""The operator's side of Task drafts (not the coach's): a draft's card, and an edit that adds its next version.

Organisations are walls: every function takes ``caller_org``, the organisation of the person the call is made for
(``None`` for a service's own call: no wall). A session of another organisation is answered as a session that
does not exist (404), before anything else is read, so the answer says nothing about it.
"""

from __future__ import annotations

from assent.contracts import CardField
from assent.hashing import unified_diff
from assent.runtime.uow import UnitOfWork
from assent.runtime.walls import NotFound, walled
from assent.runtime.writes import record_write
from edits_contract.drafts import DraftCard, DraftLines, DraftVersionView, LiveTask

from .adapters.drafts import DraftsRepository
from .domain import drafts
from .kinds.draft import draft_view, missing
from .workspace import Conflict, Refused


async def _draft_at(
    uow: UnitOfWork, session_id: str, seq: int, caller_org: str | None, *, for_update: bool = False
) -> drafts.Draft:
    session = await uow.sessions.get(session_id)
    if session is None or walled(session.org_id, caller_org):
        raise NotFound(f"session {session_id!r} does not exist")
    draft = await uow.store(DraftsRepository).at_seq(session_id, seq, for_update=for_update)
    if draft is None or draft.org_id != session.org_id:
        raise NotFound(f"session {session_id!r} has no Task draft at seq {seq}")
    return draft


async def card(uow: UnitOfWork, draft: drafts.Draft) -> DraftCard:
    """The draft beside the agent's Task now."""
    store = uow.store(DraftsRepository)
    agent = await store.agent(draft.agent_id)
    task = None if agent is None else agent.task
    view = draft_view(draft, task or "")
    # Counted as a card counts a field. The request's (the tray's) is its first version's: a later one does not reach
    # the gateway's projection.
    lines = CardField(name=drafts.TASK_FIELD, before=task, after=draft.newest.content).lines
    return DraftCard(
        session_id=view.session_id,
        seq=draft.created_message_seq,
        draft_id=view.draft_id,
        agent_id=view.agent_id,
        agent_name=None if agent is None else agent.name,
        created_message_seq=view.created_message_seq,
        status=view.status,
        stale=view.stale,
        version=view.version,
        content=view.content,
        hash=view.hash,
        base_hash=view.base_hash,
        rationale=view.rationale,
        live=LiveTask(
            task=task,
            hash=None if task is None else drafts.task_hash(task),
            revision=None if agent is None else agent.revision,
        ),
        diff=unified_diff(task or "", draft.newest.content, drafts.TASK_FIELD),
        lines=DraftLines(added=lines.added, removed=lines.removed),
        missing_notes=await missing(uow, draft.org_id, draft.newest.content),
        versions=[
            DraftVersionView(version=v.version, author=v.author, hash=v.hash, created_at=v.created_at)
            for v in await store.versions(draft.draft_id)
        ],
        replaced_by=view.replaced_by,
        published_by_user_id=view.published_by_user_id,
        discarded_by_user_id=view.discarded_by_user_id,
        published_version=view.published_version,
    )


async def read_draft(uow: UnitOfWork, session_id: str, seq: int, *, caller_org: str | None = None) -> DraftCard:
    return await card(uow, await _draft_at(uow, session_id, seq, caller_org))


async def edit_draft(
    uow: UnitOfWork,
    session_id: str,
    seq: int,
    content: str,
    expected_version: int | None,
    actor: str,
    max_bytes: int,
    *,
    caller_org: str | None = None,
) -> DraftCard:
    """Add the draft's next version, written by ``actor``; the request at ``seq`` then follows it.

    The draft's row is locked, so an edit and a decision on the same draft happen one after the other. The edit is
    a direct write (recorded for the organisation's history, with the draft's hashes before and after), not a
    decision: the request stays pending.
    """
    draft = await _draft_at(uow, session_id, seq, caller_org, for_update=True)
    refusal = drafts.review_edit(draft, content, expected_version, max_bytes)
    if refusal is not None:
        if refusal.status == 409:
            raise Conflict(refusal.message)
        raise Refused(refusal.message, refusal.code)
    store = uow.store(DraftsRepository)
    await store.add_version(draft.draft_id, draft.newest.version + 1, content, actor)
    edited = await store.draft(draft.draft_id)
    assert edited is not None
    agent = await store.agent(draft.agent_id)
    await record_write(
        uow,
        "edit_draft",
        org_id=draft.org_id,
        guild_id=None if agent is None else agent.guild_id,
        agent_id=draft.agent_id,
        kind="draft",
        action="edit",
        target=f"Task of {draft.agent_id if agent is None else agent.name}",
        actor=actor,
        hash_before=draft.newest.hash,
        hash_after=edited.newest.hash,
        detail=f"session {session_id}, seq {seq}: version {edited.newest.version}",
    )
    return await card(uow, edited)
