"""The routines service's contract: its kind, its topics and messages (:mod:`.messages`), its public routes with
their models (:mod:`.routes`), and how an agent's runtime reads the wake-ups (:func:`wakeups`). Found through the
``assent.contracts`` entry point (:mod:`assent.owners`)."""

from assent.owners import Contract

from .kinds import KINDS
from .routes import OWNER, ROUTES
from .topics import AGENT_ROUTINES_CHANGED, DECISIONS, ROUTINES_WAKEUPS, TOOL_CALLS
from .wakeups import wakeups

CONTRACT = Contract(
    OWNER,
    kinds=KINDS,
    tool_calls=TOOL_CALLS,
    decisions=DECISIONS,
    topics=(AGENT_ROUTINES_CHANGED, ROUTINES_WAKEUPS),
    routes=ROUTES,
)

__all__ = ["CONTRACT", "wakeups"]
