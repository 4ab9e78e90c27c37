"""Alembic environment of the access service (schema ``access``); the shared tables have their own history."""

from access.adapters.tables import metadata
from assent.db import run_migrations_in_env
from assent.runtime.tables import TABLE_NAMES

run_migrations_in_env(metadata, exclude_tables=TABLE_NAMES)
