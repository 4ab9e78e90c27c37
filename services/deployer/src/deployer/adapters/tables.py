"""The deployer's tables, all in its own schema ``deployer``. The shared tables (inbox, outbox, sessions,
proposals and its read copy of the workspace directory) come from the shared history; a source proposal's files,
requester and commit live in the shared ``proposals`` row (its payload and resolution)."""

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Table,
    Text,
    UniqueConstraint,
    false,
    func,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB

from assent.runtime import service_metadata
from assent.runtime.tables import last_update

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
    Column("failed_calls", JSONB, nullable=False, server_default="[]"),
)
"""The chat's waiting proposal when a reply (a turn) started, then the one the reply made: a reply that finishes
after it was decided proposes nothing. ``failed_calls``: the tool call ids of the reply's builder proposals that a
file check refused, in order (the first gets one more try; a call sent again finds its place)."""

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
    *last_update(),
    Column("fix_deploy_id", Text),
    Index("ix_issues_agent_id", "agent_id"),
)
"""An agent's issues with their regression evals (``{path under evals/: text}``), committed with a fix."""

deploy_settings = Table(
    "deploy_settings",
    metadata,
    Column("agent_id", Text, ForeignKey(repositories.c.agent_id), primary_key=True),
    Column("builds_on_push", Boolean, nullable=False, server_default=false()),
    Column("auto_promote", Boolean, nullable=False, server_default=true()),
    Column("target", JSONB),
    Column("webhook_secret", Text),
    Column("last_seen_head", Text),
    *last_update(),
)
"""An agent's Deploys settings: builds on push (with the push webhook's secret), auto-promote, and its deploy
target (``{"kind": ..., ...}``; None: the service's default target). ``last_seen_head``: the production branch's
commit the poller saw last."""

builds = Table(
    "builds",
    metadata,
    Column("build_id", Text, primary_key=True),
    Column("agent_id", Text, ForeignKey(repositories.c.agent_id), nullable=False),
    Column("org_id", Text, nullable=False),
    Column("source_version", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("artifact_digest", Text),
    Column("log", Text, nullable=False, server_default=""),
    Column("error", Text),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("started_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True)),
    UniqueConstraint("agent_id", "source_version", name="uq_builds_agent_id_source_version"),
)
"""One build per commit of an agent (queued, running, succeeded, failed), its log and its artifact's digest."""

build_triggers = Table(
    "build_triggers",
    metadata,
    Column("build_id", Text, ForeignKey(builds.c.build_id), primary_key=True),
    Column("trigger", Text, primary_key=True),
    Column("ref", Text, primary_key=True),
    Column("actor", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
"""What asked for a build: a push (``ref``: the delivery), the poller, an approval (``ref``: the proposal)."""

deploys = Table(
    "deploys",
    metadata,
    Column("deploy_id", Text, primary_key=True),
    Column("agent_id", Text, ForeignKey(repositories.c.agent_id), nullable=False),
    Column("org_id", Text, nullable=False),
    Column("build_id", Text, ForeignKey(builds.c.build_id), nullable=False),
    Column("source_version", Text, nullable=False),
    Column("proposal_id", Text),
    Column("issue_id", Text),
    Column("status", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("auto_promote", Boolean, nullable=False),
    Column("error", Text),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("requested_by", Text, nullable=False),
    Column("promoted_by", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("started_at", DateTime(timezone=True)),
    Column("live_at", DateTime(timezone=True)),
    Index("ix_deploys_agent_id", "agent_id"),
)
"""Each deploy of a commit: ``pending`` (its build runs), ``started`` (the target took it; waiting to be promoted
when auto-promote is off), ``live``, or ``failed`` (did not start; retrying starts it again)."""

jobs = Table(
    "jobs",
    metadata,
    Column("job_id", BigInteger, Identity(), primary_key=True),
    Column("kind", Text, nullable=False),
    Column("ref", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("available_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("last_error", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("kind", "ref", name="uq_jobs_kind_ref"),
    Index("ix_jobs_status_available_at", "status", "available_at"),
)
"""Durable work (``build`` of a build id, ``deploy`` of a deploy id): a worker claims a queued row with
``FOR UPDATE SKIP LOCKED`` and holds it while it works, so a worker killed mid-job leaves it queued for the next."""

activity = Table(
    "activity",
    metadata,
    Column("activity_id", BigInteger, Identity(), primary_key=True),
    Column("org_id", Text, nullable=False),
    Column("agent_id", Text, nullable=False),
    Column("what", Text, nullable=False),
    Column("who", Text),
    Column("detail", Text, nullable=False),
    Column("links", JSONB, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_activity_org_id_at", "org_id", "at"),
)
"""The deployer's entries of the activity feed (deploy, promote, link fix); the gateway merges them with the
decisions it records."""
