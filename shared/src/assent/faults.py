"""Crash and failure points for failure tests.

``ASSENT_CRASH_AT`` names one point (for example ``edits.decision.before_commit``); a process that reaches
it kills itself with SIGKILL, exactly as ``kill -9`` would, so tests can prove that nothing is lost or
applied twice. ``ASSENT_FAIL_AT`` names a point where the handler raises instead, as a bug would, so tests
can prove a failing message is retried a bounded number of times, dead-lettered, and passed. Both are unset
in every real deployment, where :func:`crash_point` and :func:`fail_point` do nothing.
"""

from __future__ import annotations

import os
import signal


def crash_point(name: str) -> None:
    if os.environ.get("ASSENT_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


class InjectedFailure(RuntimeError):
    """Raised at a failure point named by ``ASSENT_FAIL_AT``."""


def fail_point(name: str) -> None:
    if os.environ.get("ASSENT_FAIL_AT") == name:
        raise InjectedFailure(f"failure injected at {name}")
