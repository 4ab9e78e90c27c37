"""builds deploys jobs activity

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOW = sa.text("now()")


def upgrade() -> None:
    op.add_column("issues", sa.Column("fix_deploy_id", sa.Text(), nullable=True), schema="deployer")
    op.create_table(
        "deploy_settings",
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("builds_on_push", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("auto_promote", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("target", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("webhook_secret", sa.Text(), nullable=True),
        sa.Column("last_seen_head", sa.Text(), nullable=True),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["deployer.repositories.agent_id"]),
        sa.PrimaryKeyConstraint("agent_id"),
        schema="deployer",
    )
    op.create_table(
        "builds",
        sa.Column("build_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("source_version", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("artifact_digest", sa.Text(), nullable=True),
        sa.Column("log", sa.Text(), server_default="", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["deployer.repositories.agent_id"]),
        sa.PrimaryKeyConstraint("build_id"),
        sa.UniqueConstraint("agent_id", "source_version", name="uq_builds_agent_id_source_version"),
        schema="deployer",
    )
    op.create_table(
        "build_triggers",
        sa.Column("build_id", sa.Text(), nullable=False),
        sa.Column("trigger", sa.Text(), nullable=False),
        sa.Column("ref", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.ForeignKeyConstraint(["build_id"], ["deployer.builds.build_id"]),
        sa.PrimaryKeyConstraint("build_id", "trigger", "ref"),
        schema="deployer",
    )
    op.create_table(
        "deploys",
        sa.Column("deploy_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("build_id", sa.Text(), nullable=False),
        sa.Column("source_version", sa.Text(), nullable=False),
        sa.Column("proposal_id", sa.Text(), nullable=True),
        sa.Column("issue_id", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("auto_promote", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("requested_by", sa.Text(), nullable=False),
        sa.Column("promoted_by", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("live_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["deployer.repositories.agent_id"]),
        sa.ForeignKeyConstraint(["build_id"], ["deployer.builds.build_id"]),
        sa.PrimaryKeyConstraint("deploy_id"),
        schema="deployer",
    )
    op.create_index("ix_deploys_agent_id", "deploys", ["agent_id"], unique=False, schema="deployer")
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("ref", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("available_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.PrimaryKeyConstraint("job_id"),
        sa.UniqueConstraint("kind", "ref", name="uq_jobs_kind_ref"),
        schema="deployer",
    )
    op.create_index("ix_jobs_status_available_at", "jobs", ["status", "available_at"], unique=False, schema="deployer")
    op.create_table(
        "activity",
        sa.Column("activity_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("what", sa.Text(), nullable=False),
        sa.Column("who", sa.Text(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("links", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=NOW, nullable=False),
        sa.PrimaryKeyConstraint("activity_id"),
        schema="deployer",
    )
    op.create_index("ix_activity_org_id_at", "activity", ["org_id", "at"], unique=False, schema="deployer")


def downgrade() -> None:
    op.drop_index("ix_activity_org_id_at", table_name="activity", schema="deployer")
    op.drop_table("activity", schema="deployer")
    op.drop_index("ix_jobs_status_available_at", table_name="jobs", schema="deployer")
    op.drop_table("jobs", schema="deployer")
    op.drop_index("ix_deploys_agent_id", table_name="deploys", schema="deployer")
    op.drop_table("deploys", schema="deployer")
    op.drop_table("build_triggers", schema="deployer")
    op.drop_table("builds", schema="deployer")
    op.drop_table("deploy_settings", schema="deployer")
    op.drop_column("issues", "fix_deploy_id", schema="deployer")
