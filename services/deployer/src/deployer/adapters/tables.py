"""The deployer's tables, all in its own schema ``deployer``. The shared tables (inbox, outbox, sessions,
proposals and its read copy of the workspace directory) come from the shared history; a source proposal's files,
requester and commit live in the shared ``proposals`` row (its payload and resolution)."""

from sqlalchemy import BigInteger, Column, DateTime, ForeignKey, Identity, Index, Integer, Table, Text, func
from sqlalchemy.dialects.postgresql import JSONB

from assent.runtime import service_metadata

SCHEMA = "deployer"
metadata, shared = service_metadata(SCHEMA)
inbox, outbox, sessions, proposals = shared.inbox, shared.outbox, shared.sessions, shared.proposals
orgs, guilds, agents = shared.orgs, shared.guilds, shared.agents

repositories = Table(
    "repositories",
    metadata,
    Column("agent_id", Text, primary_key=True),
    Column("org_id", Text, nullable=False),
    Column("mode", Text, nullable=False),
    Column("branch", Text, nullable=False),
    Column("url", Text),
    Column("provider", Text),
    Column("created_by", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
"""Where each agent's source lives: hosted (a bare repository of the deployer) or external (a remote)."""

deployments = Table(
    "deployments",
    metadata,
    Column("deployment_id", BigInteger, Identity(), primary_key=True),
    Column("agent_id", Text, ForeignKey(repositories.c.agent_id), nullable=False),
    Column("source_version", Text),
    Column("deployed_by", Text, nullable=False),
    Column("deployed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_deployments_agent_id", "agent_id"),
)
"""Each deployment of an agent and the source version (commit) it runs; None: an old deploy that recorded none.
The latest is the active production deployment."""

chats = Table(
    "chats",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("waiting_proposal_id", Text),
)
"""The latest proposal of each chat (a chat is a session; resetting the chat starts a new one)."""

chat_turns = Table(
    "chat_turns",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("turn_id", Text, primary_key=True),
    Column("baseline_proposal_id", Text),
)
"""The chat's waiting proposal when a reply (a turn) started, then the one the reply made: a reply that finishes
after it was decided proposes nothing."""

chat_reads = Table(
    "chat_reads",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("path", Text, primary_key=True),
    Column("hash", Text),
    Column("source_version", Text, nullable=False),
)
"""The files a chat has read whole (a file it never read cannot be deleted)."""

issues = Table(
    "issues",
    metadata,
    Column("issue_id", Text, primary_key=True),
    Column("agent_id", Text, nullable=False),
    Column("org_id", Text, nullable=False),
    Column("number", Integer, nullable=False),
    Column("title", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("evals", JSONB, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_by", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_issues_agent_id", "agent_id"),
)
"""An agent's issues with their regression evals (``{path under evals/: text}``), committed with a fix."""
