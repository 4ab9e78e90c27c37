"""Messages on ``studio.turns`` and ``studio.continuations``: the turn barrier."""

from typing import Literal

from pydantic import BaseModel, ConfigDict

from .envelope import Id, Message, Seq


class StepEnded(Message):
    """The coach finished a step; the turn waits on the requests named in ``tool_call_ids``.

    A tool call named here whose result was an error (refused at propose time) is not waited on.
    """

    type: Literal["StepEnded"] = "StepEnded"
    v: Literal[1] = 1
    session_id: Id
    turn_id: Id
    step: Seq
    tool_call_ids: tuple[Id, ...]


class DecisionSummary(BaseModel):
    """One line of a continuation: what became of one request of the turn."""

    model_config = ConfigDict(frozen=True)

    tool_call_id: str
    seq: Seq
    proposal_id: str | None
    kind: str
    target: str
    outcome: str
    resolved_by: str | None = None


class TurnContinuation(Message):
    """Every request of a paused turn is decided: the coach continues with this one message.

    Exactly one is produced per paused turn; Continue re-sends the same message (same ``id``), so a coach
    that already received it drops the copy.
    """

    type: Literal["TurnContinuation"] = "TurnContinuation"
    v: Literal[1] = 1
    session_id: Id
    turn_id: Id
    step: Seq
    decisions: tuple[DecisionSummary, ...]
    text: str
