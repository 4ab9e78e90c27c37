"""signed checkpoints of the history; the history append-only but for its retention role

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-08 08:00:00

``gateway.history_checkpoints`` holds each organisation's signed checkpoints (:mod:`gateway.domain.checkpoints`): the
head of its chain, signed at an interval, and the last entry each prune removed.

``gateway.history`` and ``gateway.history_checkpoints`` are append-only for every role but
``assent_history_retention``: a trigger refuses UPDATE, DELETE and TRUNCATE (it fires for a superuser and for the
tables' owner too), and the role alone may DELETE (never UPDATE): the retention job takes it (``SET LOCAL ROLE``)
to prune. The role is created here where it is missing (NOLOGIN; a deployment grants it to the login the job
connects as, ``ASSENT_HISTORY_RETENTION_DATABASE_URL``) when the migration's role may create roles; else the
migration says so and goes on (the trigger then refuses everyone). UPDATE, DELETE and TRUNCATE are revoked from
every other role the tables' privileges name (the application's role, where default privileges granted it them),
and from PUBLIC.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RETENTION_ROLE = "assent_history_retention"
APPEND_ONLY = ("history", "history_checkpoints")


def upgrade() -> None:
    op.create_table(
        "history_checkpoints",
        sa.Column("id", sa.BigInteger, sa.Identity(always=True), primary_key=True),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("hash", sa.Text, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("key_id", sa.Text, nullable=False),
        sa.Column("signature", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.CheckConstraint("kind IN ('head', 'pruned')", name="ck_history_checkpoints_kind"),
        schema="gateway",
    )
    # A page of checkpoints is an organisation's newest first; the newest of a kind (verify, the signer) is read by
    # position.
    op.create_index("ix_history_checkpoints_org", "history_checkpoints", ["org_id", "id"], schema="gateway")
    op.create_index(
        "ix_history_checkpoints_kind", "history_checkpoints", ["org_id", "kind", "position"], schema="gateway"
    )

    op.execute(f"""
        DO $$ BEGIN
          IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{RETENTION_ROLE}') THEN
            CREATE ROLE {RETENTION_ROLE} NOLOGIN;
          END IF;
        EXCEPTION
          WHEN duplicate_object OR unique_violation THEN NULL;  -- another database's migration made it meanwhile
          WHEN insufficient_privilege THEN
            RAISE WARNING 'cannot create the role {RETENTION_ROLE} (no CREATEROLE): create it, NOLOGIN, and run'
              ' this migration again, or the history is never pruned';
        END $$""")
    op.execute(f"""
        DO $$ BEGIN
          IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{RETENTION_ROLE}') THEN
            GRANT USAGE ON SCHEMA gateway TO {RETENTION_ROLE};
            GRANT SELECT ON gateway.history_heads TO {RETENTION_ROLE};
            GRANT SELECT, DELETE ON gateway.history TO {RETENTION_ROLE};
            GRANT SELECT, INSERT, DELETE ON gateway.history_checkpoints TO {RETENTION_ROLE};
          END IF;
        END $$""")

    op.execute(f"""
        CREATE FUNCTION gateway.history_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP = 'DELETE' AND current_user = '{RETENTION_ROLE}' THEN
            RETURN NULL;
          END IF;
          RAISE EXCEPTION 'gateway.% is append-only: % is refused to %', TG_TABLE_NAME, TG_OP, current_user
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'only the history retention job deletes, under the role {RETENTION_ROLE}';
        END $$""")
    for table in APPEND_ONLY:
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON gateway.{table}"
            " FOR EACH STATEMENT EXECUTE FUNCTION gateway.history_append_only()"
        )
        op.execute(f"REVOKE UPDATE, DELETE, TRUNCATE ON gateway.{table} FROM PUBLIC")
    # Every other role the tables' privileges name (the owner and the retention role aside) loses UPDATE, DELETE
    # and TRUNCATE: the application's role, where default privileges granted it every privilege on new tables.
    op.execute(f"""
        DO $$ DECLARE grantee text; tab text; BEGIN
          FOR grantee, tab IN
            SELECT DISTINCT r.rolname, c.relname
            FROM pg_class AS c
            JOIN pg_namespace AS n ON n.oid = c.relnamespace
            CROSS JOIN LATERAL aclexplode(c.relacl) AS acl
            JOIN pg_roles AS r ON r.oid = acl.grantee
            WHERE n.nspname = 'gateway' AND c.relname IN ('history', 'history_checkpoints')
              AND acl.privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE')
              AND acl.grantee <> c.relowner AND r.rolname <> '{RETENTION_ROLE}'
          LOOP
            EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON gateway.%I FROM %I', tab, grantee);
          END LOOP;
        END $$""")


def downgrade() -> None:
    for table in APPEND_ONLY:
        op.execute(f"DROP TRIGGER {table}_append_only ON gateway.{table}")
    op.execute("DROP FUNCTION gateway.history_append_only()")
    op.execute(f"""
        DO $$ BEGIN
          IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{RETENTION_ROLE}') THEN
            REVOKE ALL ON gateway.history, gateway.history_heads FROM {RETENTION_ROLE};
            REVOKE USAGE ON SCHEMA gateway FROM {RETENTION_ROLE};
          END IF;
        END $$""")
    op.drop_table("history_checkpoints", schema="gateway")  # its grants go with it
    # The role stays: other databases of the cluster may use it.
