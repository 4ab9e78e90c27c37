"""Alembic environment of the routines service (schema ``routines``); the shared tables have their own history."""

from assent.db import run_migrations_in_env
from assent.runtime.tables import TABLE_NAMES
from routines.adapters.tables import metadata

run_migrations_in_env(metadata, exclude_tables=TABLE_NAMES)
