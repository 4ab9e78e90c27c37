"""The deployer's contract: its kind (source proposals), its topics and events (:mod:`.messages`), its public routes
with their models (agents' source, the Proposals page and issues: :mod:`.source`; builds, deploys and webhooks:
:mod:`.deploys`) and its entries of the activity feed. Found through the ``assent.contracts`` entry point
(:mod:`assent.owners`)."""

from assent.api import Feed
from assent.owners import Contract

from . import deploys, source
from .kinds import KINDS
from .source import OWNER
from .topics import DECISIONS, DEPLOYS_EVENTS, TOOL_CALLS

ROUTES = (*source.ROUTES, *deploys.ROUTES)

CONTRACT = Contract(
    OWNER,
    kinds=KINDS,
    tool_calls=TOOL_CALLS,
    decisions=DECISIONS,
    topics=(DEPLOYS_EVENTS,),
    routes=ROUTES,
    feeds=(Feed(OWNER, "/activity"),),
)
