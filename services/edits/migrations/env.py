"""Alembic environment of the edits service (schema ``edits``)."""

from assent.db import run_migrations_in_env
from edits.adapters.tables import metadata

run_migrations_in_env(metadata)
