"""The access service's contract: its kind (an agent's tools and connections), its topics, and its public routes with
their models (:mod:`.routes`). Found through the ``assent.contracts`` entry point (:mod:`assent.owners`)."""

from assent.owners import Contract

from .kinds import KINDS
from .routes import OWNER, ROUTES
from .topics import DECISIONS, TOOL_CALLS

CONTRACT = Contract(OWNER, kinds=KINDS, tool_calls=TOOL_CALLS, decisions=DECISIONS, routes=ROUTES)
