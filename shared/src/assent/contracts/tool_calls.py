"""Messages on the ``*.tool-calls`` topics: the coach asks a service to run one tool."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .envelope import Id, Message, Seq


class SessionContext(BaseModel):
    """What every owner needs to know of the call's session, carried by the call itself.

    A session's ``SessionOpened`` travels on another topic, which another replica may read; with this the
    replica that takes the call needs nothing else. It must match the session when the owner knows it.
    """

    model_config = ConfigDict(frozen=True)

    org_id: Id
    source_guild_id: Id
    operator_user_id: Id


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
