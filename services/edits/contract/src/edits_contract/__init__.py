"""The edits service's contract: its kinds (Memory, notes, guild text, collections, Task drafts), its topics, and its
public routes with their models (the workspace directory, Memory and notes: :mod:`.workspace`; collections:
:mod:`.collections`; Task drafts: :mod:`.drafts`). Found through the ``assent.contracts`` entry point
(:mod:`assent.owners`)."""

from assent.owners import Contract

from . import collections, drafts, workspace
from .kinds import KINDS, OWNER
from .topics import DECISIONS, TOOL_CALLS

ROUTES = (*workspace.ROUTES, *collections.ROUTES, *drafts.ROUTES)

CONTRACT = Contract(OWNER, kinds=KINDS, tool_calls=TOOL_CALLS, decisions=DECISIONS, routes=ROUTES)
