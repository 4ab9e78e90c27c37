"""Crash and failure points for failure tests.

``ASSENT_CRASH_AT`` names one point (for example ``edits.decision.before_commit``); a process that reaches
it kills itself with SIGKILL, exactly as ``kill -9`` would, so tests can prove that nothing is lost or
applied twice. ``ASSENT_FAIL_AT`` names a point where the handler raises instead, as a bug would, so tests
can prove a failing message is retried a bounded number of times, dead-lettered, and passed.
``ASSENT_RECORD_SQL`` names a file prefix: every distinct statement a service sends to PostgreSQL is appended
to ``<prefix>.<pid>`` (text only, never parameters), so a test can ``EXPLAIN`` the hot path. All three are
unset in every real deployment, where :func:`crash_point`, :func:`fail_point` and :func:`record_statements`
do nothing.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine


def crash_point(name: str) -> None:
    if os.environ.get("ASSENT_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


class InjectedFailure(RuntimeError):
    """Raised at a failure point named by ``ASSENT_FAIL_AT``."""


def fail_point(name: str) -> None:
    if os.environ.get("ASSENT_FAIL_AT") == name:
        raise InjectedFailure(f"failure injected at {name}")


def record_statements(engine: AsyncEngine) -> None:
    """With ``ASSENT_RECORD_SQL`` set, append each distinct statement ``engine``'s connections execute to the named
    file: what goes through SQLAlchemy and what runs on the asyncpg connection directly, both."""
    prefix = os.environ.get("ASSENT_RECORD_SQL")
    if not prefix:
        return
    path = f"{prefix}.{os.getpid()}"
    seen: set[str] = set()

    def record(statement: str) -> None:
        statement = " ".join(statement.split())
        if statement not in seen:
            seen.add(statement)
            with open(path, "a", encoding="utf-8") as file:
                file.write(statement + "\n")

    # SQLAlchemy runs its statements as asyncpg prepared statements, which asyncpg's query logger does not see;
    # the logger sees what runs on the driver connection directly (assent.db.driver_connection).
    def on_cursor_execute(
        _conn: Any, _cursor: Any, statement: str, _parameters: Any, _context: Any, _executemany: bool
    ) -> None:
        record(statement)

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.driver_connection.add_query_logger(lambda query: record(query.query))

    event.listen(engine.sync_engine, "before_cursor_execute", on_cursor_execute)
    event.listen(engine.sync_engine, "connect", on_connect)
