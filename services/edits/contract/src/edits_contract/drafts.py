"""Task drafts on the public API, owned by the service that owns the ``draft`` kind: a draft's diff against the
agent's Task now, and the operator's edit of it, beside the decision on it (``POST …/drafts/{seq}``, ``publish`` or
``discard``, which the gateway takes for every kind decided at that endpoint).

A draft is made by the coach's ``studio_create_task_draft`` at a message of the session (``seq``, the draft's
``created_message_seq``). Each edit adds a version; the request at ``seq`` follows the newest one, and publishing
writes that version as the agent's Task. Reading needs any role; editing needs the admin or developer role, as
deciding does. Another organisation's session answers 404, as a missing one does.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path
from pydantic import Field

from assent.api.declare import PublicRoute, RequestModel
from assent.api.resolution import Resolution
from assent.api.roles import Permission
from assent.http import NoNul, Omissible

from .kinds import DRAFT
from .workspace import Answer, Instant

OWNER, ENDPOINT = DRAFT.owner, DRAFT.endpoint
SeqPath = Annotated[int, Path(ge=0, le=2_147_483_647)]


class DraftEdit(RequestModel):
    """The draft's whole new text, as a new version; with ``expected_version``, added only while the draft's newest
    version is that one."""

    content: Annotated[str, NoNul]
    expected_version: Omissible[Annotated[int, Field(ge=1, le=2_147_483_647)]] = None


class DraftVersionView(Answer):
    version: int
    author: str
    """``coach`` for the drafted version, the operator's user id for an edit."""
    hash: str
    created_at: Instant | None


class LiveTask(Answer):
    task: str | None
    hash: str | None
    revision: int | None


class DraftLines(Answer):
    added: int
    removed: int


class DraftCard(Answer):
    """A draft beside the agent's Task now: the newest version, its diff, whether the Task moved since the draft was
    made (``stale``: publishing answers 409), the notes it embeds that do not exist yet (publishing answers 409 until
    they do), every version, and how it ended."""

    session_id: str
    seq: int
    draft_id: str
    agent_id: str
    agent_name: str | None
    created_message_seq: int
    status: str
    """pending, published, discarded, or superseded (the coach replaced it in the same turn: it needs no answer)."""
    stale: bool
    version: int
    content: str
    hash: str
    base_hash: str
    rationale: str
    live: LiveTask
    diff: str
    lines: DraftLines
    missing_notes: list[str]
    versions: list[DraftVersionView]
    replaced_by: str | None
    published_by_user_id: str | None
    discarded_by_user_id: str | None
    published_version: int | None
    resolution: Resolution | None = None
    """Once the draft is decided, how: the decisions taken on it, the outcome and its reason, what the coach was told
    (the gateway fills it from its projection; the owner answers null)."""


DRAFT_404 = {404: "No such session, or no Task draft at that message, in the caller's organisation"}
PATH = f"/sessions/{{session_id}}/{ENDPOINT}/{{seq}}"

ROUTES: tuple[PublicRoute, ...] = (
    PublicRoute(
        OWNER,
        "GET",
        PATH,
        "read_draft",
        "The Task draft at that message: its newest version's diff against the agent's Task now, and its versions",
        Permission.READ,
        "studio",
        prefix="/api/studio",
        response=DraftCard,
        params={"seq": SeqPath},
        errors=DRAFT_404,
    ),
    PublicRoute(
        OWNER,
        "PUT",
        PATH,
        "edit_draft",
        "Edit the Task draft at that message: its whole new text becomes its next version",
        Permission.CHANGE_WORKSPACE,
        "studio",
        prefix="/api/studio",
        body=DraftEdit,
        response=DraftCard,
        params={"seq": SeqPath},
        errors={
            **DRAFT_404,
            409: "The draft was published, discarded or replaced already; or expected_version is not its newest",
        },
        rules="the byte cap of a Task; an edit that changes nothing",
    ),
)
"""The public routes of Task drafts."""
