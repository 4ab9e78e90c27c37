"""The edits service's tables, all in its own schema ``edits``. The shared tables (inbox, outbox,
sessions, proposals and the workspace directory, which this service owns) come from the shared history."""

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

from assent.runtime import service_metadata
from assent.runtime.tables import last_update, studio_request

SCHEMA = "edits"
metadata, shared = service_metadata(SCHEMA)
inbox, outbox, sessions, proposals = shared.inbox, shared.outbox, shared.sessions, shared.proposals
orgs, guilds, agents = shared.orgs, shared.guilds, shared.agents

memory = Table(
    "memory",
    metadata,
    Column("agent_id", Text, ForeignKey(agents.c.agent_id), primary_key=True),
    Column("content", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("hash", Text, nullable=False),
    *last_update(),
)

memory_revisions = Table(
    "memory_revisions",
    metadata,
    Column("revision_id", BigInteger, Identity(), primary_key=True),
    Column("agent_id", Text, ForeignKey(agents.c.agent_id), nullable=False),
    Column("version", Integer, nullable=False),
    Column("content", Text, nullable=False),
    Column("hash", Text, nullable=False),
    Column("author_user_id", Text, nullable=False),
    *studio_request(),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("agent_id", "version"),
)

file_changes = Table(
    "file_changes",
    metadata,
    Column("change_id", BigInteger, Identity(), primary_key=True),
    Column("org_id", Text, nullable=False),
    Column("agent_id", Text),
    Column("path", Text, nullable=False),
    Column("version", Integer),
    Column("change", Text, nullable=False),
    Column("actor_user_id", Text, nullable=False),
    Column("tool_call_id", Text),
    Column("tool_name", Text),
    *studio_request(),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_file_changes_org_id_path", "org_id", "path"),
)
"""Every write to a file-like target (Memory, notes): who, which version, and the request it came from."""

guild_changes = Table(
    "guild_changes",
    metadata,
    Column("change_id", BigInteger, Identity(), primary_key=True),
    Column("guild_id", Text, ForeignKey(guilds.c.guild_id), nullable=False),
    Column("field", Text, nullable=False),
    Column("changed_by", Text, nullable=False),
    Column("tool_call_id", Text),
    *studio_request(),
    Column("changed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_guild_changes_guild_id", "guild_id"),
)
"""The guild text's change log: who changed which field, never the text itself (guild text keeps no history)."""

collections = Table(
    "collections",
    metadata,
    Column("collection_id", Text, primary_key=True),
    Column("org_id", Text, ForeignKey(orgs.c.org_id), nullable=False),
    Column("name", Text, nullable=False),
    Column("purpose", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("guild_id", Text, ForeignKey(guilds.c.guild_id)),
    Column("columns", JSONB, nullable=False),
    Column("version", Integer, nullable=False),
    *last_update(),
    UniqueConstraint("org_id", "name"),
    CheckConstraint("scope IN ('guild', 'org')", name="ck_collections_scope"),
    CheckConstraint("(scope = 'org') = (guild_id IS NULL)", name="ck_collections_owner"),
)
"""One row per collection: its column list (the dialect of :mod:`edits.domain.collections`) as JSON; the name is
unique in its organisation. ``updated_at`` moves with every change of the definition or the access list."""

collection_records = Table(
    "collection_records",
    metadata,
    Column("record_id", BigInteger, Identity(), primary_key=True),
    Column("collection_id", Text, ForeignKey(collections.c.collection_id, ondelete="CASCADE"), nullable=False),
    Column("data", JSONB, nullable=False),
    *last_update(),
    Index("ix_collection_records_collection_id", "collection_id", "record_id"),
)
"""A collection's records, one JSON object each (column name to value), changed set-wise on a retype or removal."""

collection_access = Table(
    "collection_access",
    metadata,
    Column("collection_id", Text, ForeignKey(collections.c.collection_id, ondelete="CASCADE"), primary_key=True),
    Column("kind", Text, primary_key=True),
    Column("subject_id", Text, primary_key=True),
    Column("mode", Text, nullable=False),
    CheckConstraint("kind IN ('org', 'guild', 'agent')", name="ck_collection_access_kind"),
    CheckConstraint("mode IN ('read', 'write', 'none')", name="ck_collection_access_mode"),
)
"""A collection's access list: at most one row per subject (the organisation, a guild, an agent)."""

collection_changes = Table(
    "collection_changes",
    metadata,
    Column("change_id", BigInteger, Identity(), primary_key=True),
    Column("collection_id", Text, nullable=False),
    Column("org_id", Text, nullable=False),
    Column("change", Text, nullable=False),
    Column("kind", Text),
    Column("subject_id", Text),
    Column("mode", Text),
    Column("detail", JSONB, nullable=False),
    Column("actor_user_id", Text, nullable=False),
    Column("tool_call_id", Text),
    Column("tool_name", Text),
    *studio_request(),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_collection_changes_collection_id", "collection_id", "change_id"),
)
"""Every change of a collection, logged against it: create, update, delete, and each access row written
(``mode`` null: removed), with the request behind it (``studio_session_id``, ``studio_seq``)."""

notes = Table(
    "notes",
    metadata,
    Column("note_id", Text, primary_key=True),
    Column("org_id", Text, ForeignKey(orgs.c.org_id), nullable=False),
    Column("level", Text, nullable=False),
    Column("scope_id", Text),
    Column("key", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("display_path", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("hash", Text, nullable=False),
    *last_update(),
    UniqueConstraint("org_id", "display_path"),
    CheckConstraint("level IN ('agent', 'guild', 'org')", name="ck_notes_level"),
)
"""One row per live note; ``display_path`` (agent/<id>/<key>, guild/<id>/<key>, org/<key>) is unique per org."""

note_revisions = Table(
    "note_revisions",
    metadata,
    Column("revision_id", BigInteger, Identity(), primary_key=True),
    Column("note_id", Text, nullable=False),
    Column("org_id", Text, nullable=False),
    Column("display_path", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("change", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("content", Text),
    Column("hash", Text),
    Column("author_user_id", Text, nullable=False),
    Column("tool_call_id", Text),
    Column("tool_name", Text),
    *studio_request(),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("note_id", "version"),
    Index("ix_note_revisions_org_id_display_path", "org_id", "display_path"),
)
"""Every note write: create and update keep the text; a delete keeps none (content and hash null)."""

task_drafts = Table(
    "task_drafts",
    metadata,
    Column("draft_id", Text, primary_key=True),
    Column("org_id", Text, ForeignKey(orgs.c.org_id), nullable=False),
    Column("agent_id", Text, ForeignKey(agents.c.agent_id), nullable=False),
    Column("session_id", Text, nullable=False),
    Column("created_message_seq", Integer, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("proposal_id", Text, nullable=False, unique=True),
    Column("tool_call_id", Text, nullable=False),
    Column("base_hash", Text, nullable=False),
    Column("rationale", Text, nullable=False),
    Column("status", Text, nullable=False, server_default="pending"),
    Column("replaced_by", Text),
    Column("published_by_user_id", Text),
    Column("discarded_by_user_id", Text),
    Column("published_version", Integer),
    Column("resolved_at", DateTime(timezone=True)),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("session_id", "created_message_seq"),
    Index("ix_task_drafts_agent_id", "agent_id"),
    CheckConstraint("status IN ('pending', 'published', 'discarded', 'superseded')", name="ck_task_drafts_status"),
)
"""One row per Task draft: the coach's message that drafted it (``created_message_seq``, which edits keep), the
Task hash it binds, and how it was resolved (``published_by_user_id``, ``discarded_by_user_id``, ``replaced_by``)."""

task_draft_versions = Table(
    "task_draft_versions",
    metadata,
    Column("draft_id", Text, ForeignKey(task_drafts.c.draft_id), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("content", Text, nullable=False),
    Column("hash", Text, nullable=False),
    Column("author", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
"""Every version of a draft: 1 is the coach's, each edit of the operator adds the next (``author`` its user id)."""
