"""Messages on the ``*.tool-calls`` topics: the coach asks a service to run one tool."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .envelope import Id, Message, Seq

Channel = Literal["studio", "web", "api", "builder", "local-dev", "channel"]
"""Where a session runs: a coach's Studio session (the default), an agent's web or API chat, the builder chat of
Studio, a local-dev run, or a channel such as Slack. Source tools exist only in web, API and builder chat."""


class Requester(BaseModel):
    """The person a chat runs for: a user of some organisation, or nobody (a token minted with an API key)."""

    model_config = ConfigDict(frozen=True)

    user_id: Id | None = None
    """None: the chat ran on a token minted with an API key."""
    email: str | None = Field(None, max_length=320)
    org_id: Id | None = None
    """The user's organisation; None: the session's own."""


class SessionContext(BaseModel):
    """What every owner needs to know of the call's session, carried by the call itself.

    A session's ``SessionOpened`` travels on another topic, which another replica may read; with this the
    replica that takes the call needs nothing else. It must match the session when the owner knows it.
    ``channel``, ``requester`` and ``model`` were added later with defaults: a call without them is a Studio
    session's, run for its operator.
    """

    model_config = ConfigDict(frozen=True)

    org_id: Id
    source_guild_id: Id
    operator_user_id: Id
    channel: Channel = "studio"
    requester: Requester | None = None
    """Who the chat runs for, where that is not the operator (web, API and builder chat)."""
    model: str | None = Field(None, max_length=200)
    """The model that runs the chat, as a proposal shows it."""


class ToolCall(Message):
    """Run ``tool`` with ``arguments`` for a coach session.

    ``seq`` is the sequence number of the tool message that will hold the result; it is unique per session
    and is how the operator's HTTP API addresses a request (``/edits/{seq}``). The owner answers every call
    with exactly one :class:`~assent.contracts.tool_results.ToolResult` (at least once on the wire; the
    ``tool_call_id`` dedupes).
    """

    type: Literal["ToolCall"] = "ToolCall"
    v: Literal[1] = 1
    session_id: Id
    seq: Seq
    turn_id: Id
    step: Seq
    tool_call_id: Id
    tool: Id
    arguments: dict[str, Any] = Field(default_factory=dict)
    session: SessionContext | None = None
