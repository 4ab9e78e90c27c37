"""Messages on ``studio.sessions``: a coach session opens and closes."""

from typing import Literal

from .envelope import Id, Message


class SessionOpened(Message):
    """A coach session started for an operator, working on one source guild of one organisation."""

    type: Literal["SessionOpened"] = "SessionOpened"
    v: Literal[1] = 1
    session_id: Id
    org_id: Id
    source_guild_id: Id
    operator_user_id: Id


class SessionClosed(Message):
    """A session ended; its login grants end with it."""

    type: Literal["SessionClosed"] = "SessionClosed"
    v: Literal[1] = 1
    session_id: Id
