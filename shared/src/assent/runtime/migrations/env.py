"""Alembic environment of the shared tables, applied into each service's own schema."""

from sqlalchemy import MetaData

from assent.db import run_migrations_in_env
from assent.runtime.tables import VERSION_TABLE, shared_tables

metadata = MetaData()
shared_tables(metadata)
run_migrations_in_env(metadata, version_table=VERSION_TABLE)
