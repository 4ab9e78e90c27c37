"""The connections service's contract: its kind (login requests), its topics and messages (:mod:`.messages`: the
logins' tool catalogs), and its public routes with their models (:mod:`.routes`). Found through the
``assent.contracts`` entry point (:mod:`assent.owners`)."""

from assent.owners import Contract

from .kinds import KINDS
from .routes import OWNER, ROUTES
from .topics import CONNECTIONS_CATALOGS, DECISIONS, TOOL_CALLS

CONTRACT = Contract(
    OWNER, kinds=KINDS, tool_calls=TOOL_CALLS, decisions=DECISIONS, topics=(CONNECTIONS_CATALOGS,), routes=ROUTES
)
