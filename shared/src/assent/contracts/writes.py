"""Messages on ``workspace.writes``: every direct write of the workspace, as its owner made it.

A direct write is a person's own change of what an owner holds (a Memory put, a note deleted, a routine paused, a
login created), made through a route of the owner's rather than by deciding a proposal; a decision's apply is
recorded by the proposal's own history. The owner emits one :class:`WorkspaceWritten` per write, through its outbox,
in the transaction of the write: a write without its message, or a message without its write, cannot be committed.
The gateway files each as an entry of the organisation's history. Keyed by ``org_id``: one organisation's writes
keep their order.
"""

from datetime import datetime
from typing import Literal

from .envelope import Id, Message, Text


class WorkspaceWritten(Message):
    """One direct write: what (``kind``, ``action``, ``target``), of which organisation, guild and agent, by whom
    (``actor``: the person's user id, or the service or provider for a write no person made) and through which route
    (``via``: its method and public path), when (``at``), and the target's content hashes before and after where its
    owner has them (``hash_before`` None: it did not exist, or its owner keeps no hash of it; ``hash_after`` None: it
    is gone, or no hash is kept). ``detail`` says more where the target does not (the fields changed, a record's id).

    ``kind`` is the kind's name where the target is one a proposal could change too (``memory``, ``note``,
    ``guild``, ``collection``, ``draft``, ``access``, ``login``, ``source``, ``routine``), so that a filter by kind
    finds both; the directory's own and the deployer's others are ``org``, ``agent``, ``deployment``, ``issue``,
    ``deploy_settings``, ``build`` and ``deploy``."""

    type: Literal["WorkspaceWritten"] = "WorkspaceWritten"
    v: Literal[1] = 1
    org_id: Id
    guild_id: Id | None = None
    agent_id: Id | None = None
    kind: Id
    action: Id
    target: Text
    actor: Id
    via: Text
    at: datetime
    hash_before: Text | None = None
    hash_after: Text | None = None
    detail: Text | None = None
