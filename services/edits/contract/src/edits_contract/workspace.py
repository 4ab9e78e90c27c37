"""The workspace's public routes, owned by the edits service: orgs, guilds and their text, agents and their roles,
Memory, and notes.

Every write records who made it (the caller's user id); every route sees only the caller's organisation (a
person creates only their own org: any other is, to them, an org that does not exist).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema, model_validator

from assent.api.declare import Matching, PublicRoute, QueryModel, RequestModel, no_null_default
from assent.api.roles import Permission
from assent.http import SPACE, Identifier, NoNul, Omissible
from assent.kinds import WORKSPACE_OWNER

OWNER = WORKSPACE_OWNER
TEXT_ABOUT_MAX = 280
"""A guild's short description (``about``), in characters."""
TEXT_DESCRIPTION_MAX = 8000
"""A guild's description, in characters."""
VERSION_MAX = 2_147_483_647

Text = Annotated[str, NoNul]
Version = Annotated[int, Field(ge=0, le=VERSION_MAX)]
Instant = Annotated[
    datetime,
    PlainSerializer(lambda at: at.isoformat(), return_type=str, when_used="json"),
    WithJsonSchema({"format": "date-time", "type": "string"}),
]
"""A moment in an answer: ISO 8601 with its offset written out (``2026-01-02T03:04:05.123456+00:00``)."""


# --- requests -------------------------------------------------------------------------------------------------


class OrgIn(RequestModel):
    org_id: Identifier
    name: Identifier


class GuildIn(RequestModel):
    guild_id: Identifier
    org_id: Identifier
    name: Identifier


class AgentIn(RequestModel):
    """A new agent (its creator owns it) with its Memory and Task; ``guild_id`` null: in no guild."""

    agent_id: Identifier
    org_id: Identifier
    guild_id: Identifier | None
    name: Identifier
    memory: Text = ""
    task: Text = ""


class AgentPatch(RequestModel):
    """Move an agent (``guild_id``; null: no guild), retire it (``live: false``), rename it or set its Task; a field
    left out is kept."""

    guild_id: Identifier | None = None
    live: Omissible[bool] = None
    name: Omissible[Identifier] = None
    task: Omissible[Text] = None


class AgentRolesIn(RequestModel):
    """Who owns and who edits an agent, by user id; owners and editors may change the agent and decide its
    requests."""

    owners: list[Identifier] = Field(default_factory=list, max_length=100)
    editors: list[Identifier] = Field(default_factory=list, max_length=100)


class MemoryIn(RequestModel):
    """Memory's whole new text; with ``expected_version``, written only while Memory is at that version."""

    content: Text
    expected_version: Version | None = None


def _one_field_at_least(schema: dict[str, Any]) -> None:
    no_null_default(schema)
    schema["minProperties"] = 1


class GuildTextIn(RequestModel):
    """A direct change of a guild's short description (``about``), description, or both (one at least)."""

    model_config = ConfigDict(json_schema_extra=_one_field_at_least)
    about: Omissible[Annotated[str, Field(max_length=TEXT_ABOUT_MAX), NoNul]] = None
    description: Omissible[Annotated[str, Field(max_length=TEXT_DESCRIPTION_MAX), NoNul]] = None

    @model_validator(mode="before")
    @classmethod
    def _one_at_least(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data:
            raise ValueError("give about, description, or both")
        return data


NOTE_PATH = (
    r"^(?:org/|guild/[^/\x00-\x1f\x7f]+/|agent/[^/\x00-\x1f\x7f]+/(?![Tt][Aa][Ss][Kk]\.md$|[Mm][Ee][Mm][Oo][Rr][Yy]\.md$))"
    rf"(?![{SPACE}])(?![^/]*\.\.)[^/\\\x00-\x1f\x7f]+\.md$"
)
"""A note's display path (``agent/<agent_id>/<key>``, ``guild/<guild_id>/<key>`` or ``org/<key>``; ``key`` a
``.md`` file name with no folders, not ``..``, not starting with white space; an agent's ``task.md`` and
``memory.md`` are not notes), as the edits service parses it."""
NotePath = Annotated[
    str,
    Field(min_length=1, max_length=500),
    Matching(
        NOTE_PATH,
        "a note's display path: agent/<agent_id>/<key>.md, guild/<guild_id>/<key>.md or org/<key>.md (an agent's "
        "task.md and memory.md are not notes)",
    ),
]


class NoteAt(QueryModel):
    path: NotePath


class NoteDelete(QueryModel):
    path: NotePath
    expected_version: Version | None = None
    """Delete only while the note is at this version."""


class NoteIn(RequestModel):
    """A note's whole text, an optional title (null or left out: keep it, or derive it from the key), and the
    version it must be at (if any)."""

    content: Text
    title: Annotated[str, Field(min_length=1, max_length=200), NoNul] | None = None
    expected_version: Version | None = None


# --- answers --------------------------------------------------------------------------------------------------


class Answer(BaseModel):
    """An answer of the workspace owner's routes: a value, built once and never changed."""

    model_config = ConfigDict(frozen=True)


class Org(Answer):
    org_id: str
    name: str


class Guild(Answer):
    guild_id: str
    org_id: str
    name: str
    about: str
    description: str


class GuildTextChanged(Guild):
    revision: int
    changed: list[str]
    """The fields whose text changed (a field equal to the live text is not a change)."""


class GuildChange(Answer):
    field: str
    changed_by: str
    tool_call_id: str | None
    studio_session_id: str | None
    studio_seq: int | None
    changed_at: Instant


class Memory(Answer):
    agent_id: str
    content: str
    version: int
    hash: str


class MemoryRevision(Answer):
    version: int
    hash: str
    author_user_id: str
    created_at: Instant
    tool_call_id: str | None
    tool_name: str | None
    studio_session_id: str | None
    studio_seq: int | None


class Agent(Answer):
    agent_id: str
    org_id: str
    guild_id: str | None
    name: str
    live: bool
    task: str
    owners: list[str]
    editors: list[str]


class CreatedAgent(Agent):
    memory: Memory


class NoteSummary(Answer):
    display_path: str
    level: str
    scope_id: str | None
    key: str
    title: str
    version: int
    hash: str


class Note(NoteSummary):
    content: str


class NoteDeleted(Answer):
    display_path: str
    deleted: bool
    version: int | None


class NoteRevision(Answer):
    note_id: str
    version: int
    change: str
    title: str
    hash: str | None
    author_user_id: str
    tool_call_id: str | None
    tool_name: str | None
    studio_session_id: str | None
    studio_seq: int | None
    created_at: Instant


class FileChange(Answer):
    agent_id: str | None
    path: str
    version: int | None
    change: str
    actor_user_id: str
    tool_call_id: str | None
    tool_name: str | None
    studio_session_id: str | None
    studio_seq: int | None
    created_at: Instant


class NoteHistory(Answer):
    display_path: str
    revisions: list[NoteRevision]
    file_changes: list[FileChange]


# --- routes ---------------------------------------------------------------------------------------------------

AGENT_404 = {404: "No such agent in the caller's organisation"}
GUILD_404 = {404: "No such guild in the caller's organisation"}
ORG_404 = {404: "No such org, or another organisation's"}
NOTE_404 = {404: "No such org (or another organisation's), or no note at that path"}


def _route(
    method: Any, path: str, name: str, summary: str, permission: Permission, tag: str, **more: Any
) -> PublicRoute:
    return PublicRoute(OWNER, method, path, name, summary, permission, tag, **more)


ORGS = (
    _route(
        "POST",
        "/orgs",
        "create_org",
        "Create the caller's organisation",
        Permission.CHANGE_WORKSPACE,
        "orgs",
        body=OrgIn,
        response=Org,
        status=201,
        errors={404: "Another organisation's id (a person creates only their own)", 409: "The org exists"},
    ),
)

GUILDS = (
    _route(
        "POST",
        "/guilds",
        "create_guild",
        "Create a guild",
        Permission.CHANGE_WORKSPACE,
        "guilds",
        body=GuildIn,
        response=Guild,
        status=201,
        errors={404: "No such org in the caller's organisation", 409: "The guild exists"},
    ),
    _route(
        "GET",
        "/guilds/{guild_id}",
        "get_guild",
        "A guild with its short description (about) and description",
        Permission.READ,
        "guilds",
        response=Guild,
        errors=GUILD_404,
    ),
    _route(
        "PATCH",
        "/guilds/{guild_id}",
        "update_guild_text",
        "Change the guild's text directly, as the operator (not a proposal); the change log records it",
        Permission.CHANGE_WORKSPACE,
        "guilds",
        body=GuildTextIn,
        response=GuildTextChanged,
        errors=GUILD_404,
    ),
    _route(
        "GET",
        "/guilds/{guild_id}/changes",
        "guild_changes",
        "The guild text's change log: who changed which field, and from which request (no content)",
        Permission.READ,
        "guilds",
        response=list[GuildChange],
        errors=GUILD_404,
    ),
)

AGENTS = (
    _route(
        "POST",
        "/agents",
        "create_agent",
        "Create an agent (its creator owns it), with its Memory and Task",
        Permission.CHANGE_WORKSPACE,
        "agents",
        body=AgentIn,
        response=CreatedAgent,
        status=201,
        errors={404: "No such org or guild in the caller's organisation", 409: "The agent exists"},
        rules="Memory over its byte cap (ASSENT_MEMORY_MAX_BYTES, UTF-8)",
    ),
    _route(
        "GET",
        "/agents/{agent_id}",
        "get_agent",
        "An agent",
        Permission.READ,
        "agents",
        response=Agent,
        errors=AGENT_404,
    ),
    _route(
        "PATCH",
        "/agents/{agent_id}",
        "update_agent",
        "Move, retire or rename an agent, or set its Task",
        Permission.CHANGE_AGENT,
        "agents",
        body=AgentPatch,
        response=Agent,
        errors={404: "No such agent, or no such guild, in the caller's organisation"},
    ),
    _route(
        "PUT",
        "/agents/{agent_id}/roles",
        "set_agent_roles",
        "Say who owns and who edits an agent (user ids); an organisation admin's decision",
        Permission.SET_AGENT_ROLES,
        "agents",
        body=AgentRolesIn,
        response=Agent,
        errors=AGENT_404,
    ),
)

MEMORY = (
    _route(
        "GET",
        "/agents/{agent_id}/memory",
        "read_memory",
        "An agent's Memory",
        Permission.READ,
        "memory",
        response=Memory,
        errors=AGENT_404,
    ),
    _route(
        "PUT",
        "/agents/{agent_id}/memory",
        "write_memory",
        "Write Memory directly, as the operator (not a proposal)",
        Permission.CHANGE_AGENT,
        "memory",
        body=MemoryIn,
        response=Memory,
        errors={**AGENT_404, 409: "Memory is not at expected_version"},
        rules="Memory over its byte cap (ASSENT_MEMORY_MAX_BYTES, UTF-8)",
    ),
    _route(
        "GET",
        "/agents/{agent_id}/memory/history",
        "memory_history",
        "Every revision of an agent's Memory and the request behind it, oldest first",
        Permission.READ,
        "memory",
        response=list[MemoryRevision],
        errors=AGENT_404,
    ),
)

NOTES = (
    _route(
        "GET",
        "/orgs/{org_id}/notes",
        "list_notes",
        "Every live note of the organisation (display path, level, title, version, hash)",
        Permission.READ,
        "notes",
        response=list[NoteSummary],
        errors=ORG_404,
    ),
    _route(
        "GET",
        "/orgs/{org_id}/note",
        "read_note",
        "One note by display path, with its text",
        Permission.READ,
        "notes",
        query=NoteAt,
        response=Note,
        errors=NOTE_404,
    ),
    _route(
        "PUT",
        "/orgs/{org_id}/note",
        "write_note",
        "Create or replace a note directly, as the operator (not a proposal)",
        Permission.CHANGE_WORKSPACE,
        "notes",
        query=NoteAt,
        body=NoteIn,
        response=Note,
        errors={
            404: "No such org (or another organisation's), or no such agent or guild of the note's path in it",
            409: "The note is not at expected_version, or was written meanwhile",
        },
        rules="a note over its byte cap (ASSENT_NOTE_MAX_BYTES, UTF-8)",
    ),
    _route(
        "DELETE",
        "/orgs/{org_id}/note",
        "delete_note",
        "Delete a note directly; refused while a Task of the organisation embeds it",
        Permission.CHANGE_WORKSPACE,
        "notes",
        query=NoteDelete,
        response=NoteDeleted,
        errors={**NOTE_404, 409: "The note is not at expected_version, or a Task embeds it"},
    ),
    _route(
        "GET",
        "/orgs/{org_id}/note/history",
        "note_history",
        "Every write of the note at that path: revisions and file changes, with the request behind each",
        Permission.READ,
        "notes",
        query=NoteAt,
        response=NoteHistory,
        errors=ORG_404,
    ),
)

ROUTES: tuple[PublicRoute, ...] = (*ORGS, *GUILDS, *AGENTS, *MEMORY, *NOTES)
"""The workspace owner's public routes."""
