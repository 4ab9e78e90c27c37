"""Crash points for failure tests.

``ASSENT_CRASH_AT`` names one point (for example ``edits.decision.before_commit``); a process that reaches
it kills itself with SIGKILL, exactly as ``kill -9`` would, so tests can prove that nothing is lost or
applied twice. Unset in every real deployment, where :func:`crash_point` does nothing.
"""

from __future__ import annotations

import os
import signal


def crash_point(name: str) -> None:
    if os.environ.get("ASSENT_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
