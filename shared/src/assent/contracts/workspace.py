"""Messages on ``workspace.events``: every change of the workspace directory, as the owner now holds it.

Event-carried state transfer: each event carries the whole new state of one org, guild or agent and its
``revision`` (which grows by one per change of that entity), so a service keeps its read copy by upserting
and ignores an event older than what it holds. Keyed by ``org_id``: one organisation's changes keep order.
"""

from typing import Literal

from .envelope import Id, Message, Text


class OrgChanged(Message):
    """An organisation was created or renamed."""

    type: Literal["OrgChanged"] = "OrgChanged"
    v: Literal[1] = 1
    org_id: Id
    name: Text
    revision: int


class GuildChanged(Message):
    """A guild was created, or its name, short description (``about``) or description changed."""

    type: Literal["GuildChanged"] = "GuildChanged"
    v: Literal[1] = 1
    guild_id: Id
    org_id: Id
    name: Text
    about: Text
    description: Text
    revision: int


class AgentChanged(Message):
    """An agent was created, moved to another guild (or none), retired (``live`` false), its Task changed, or who
    owns or edits it (``owners``, ``editors``: user ids) changed."""

    type: Literal["AgentChanged"] = "AgentChanged"
    v: Literal[1] = 1
    agent_id: Id
    org_id: Id
    guild_id: Id | None
    name: Text
    live: bool
    task: Text
    revision: int
    owners: tuple[Id, ...] = ()
    editors: tuple[Id, ...] = ()
