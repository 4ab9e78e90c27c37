"""Alembic environment of the deployer service (schema ``deployer``); the shared tables have their own history."""

from assent.db import run_migrations_in_env
from assent.runtime.tables import TABLE_NAMES
from deployer.adapters.tables import metadata

run_migrations_in_env(metadata, exclude_tables=TABLE_NAMES)
