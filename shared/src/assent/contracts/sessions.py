"""Messages on ``studio.sessions``: a coach session opens and closes."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .envelope import Id, Message
from .tool_calls import Channel


class CoachInfo(BaseModel):
    """The coach that runs a session, as people name it: its ``name``, where it runs (``channel``) and its model."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=200)
    channel: Channel | None = None
    model: str | None = Field(default=None, max_length=200)


class SessionOpened(Message):
    """A coach session started for an operator, working on one source guild of one organisation.

    ``coach`` (added in v1, optional: a producer that does not know it leaves it out) names the coach that runs it.
    """

    type: Literal["SessionOpened"] = "SessionOpened"
    v: Literal[1] = 1
    session_id: Id
    org_id: Id
    source_guild_id: Id
    operator_user_id: Id
    coach: CoachInfo | None = None


class SessionClosed(Message):
    """A session ended; its login grants end with it."""

    type: Literal["SessionClosed"] = "SessionClosed"
    v: Literal[1] = 1
    session_id: Id
