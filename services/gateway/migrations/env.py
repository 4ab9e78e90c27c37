"""Alembic environment of the gateway service (schema ``gateway``)."""

from assent.db import run_migrations_in_env
from gateway.adapters.tables import metadata

run_migrations_in_env(metadata)
