"""The live events: what changed, announced once it has committed, to the live streams of a session
(``GET …/sessions/{id}/events``) and of an agent's Proposals page (``GET …/agents/{id}/proposal-events``), and to the
decisions waiting on an outcome.

Each event is a small frozen model, turned into JSON once (:attr:`LiveEvent.data`): for the other replicas and for
every stream that shows it. Events are hints to re-read, not a record.
"""

from __future__ import annotations

import abc
import functools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from assent.contracts import ProposalOutcome

Stream = Literal["session", "proposals"]
"""The kinds of live stream: a session's, and an agent's Proposals page (its proposals decided on the page, proposed
and decided, whatever the session)."""


class LiveEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    event: str

    @property
    @abc.abstractmethod
    def to(self) -> tuple[Stream, str]:
        """The stream it goes to: its kind, and the session or agent it is of."""

    @functools.cached_property
    def data(self) -> str:
        """The event as JSON, as a stream sends it and the other replicas read it."""
        return self.model_dump_json()


class SessionEvent(LiveEvent):
    session_id: str

    @property
    def to(self) -> tuple[Stream, str]:
        return "session", self.session_id


class ProposalProposedEvent(SessionEvent):
    """A proposal of the session was projected: its tray has one more item."""

    event: Literal["proposal.proposed"] = "proposal.proposed"
    seq: int
    kind: str


class ProposalDecidedEvent(SessionEvent):
    """The owner's outcome of a decision on a proposal of the session; the decision waiting on it answers with it."""

    event: Literal["proposal.decided"] = "proposal.decided"
    seq: int
    outcome: ProposalOutcome


class StepEndedEvent(SessionEvent):
    """The coach ended a step of a turn; its turn waits on what the step proposed."""

    event: Literal["turn.step_ended"] = "turn.step_ended"
    turn_id: str
    step: int


class TurnContinuedEvent(SessionEvent):
    """Every proposal a paused turn waited on is decided: its continuation went out."""

    event: Literal["turn.continued"] = "turn.continued"
    turn_id: str
    step: int


class PageEvent(LiveEvent):
    """A proposal of the agent's Proposals page was proposed or decided, in whichever session."""

    event: Literal["proposal.proposed", "proposal.decided"]
    stream: Literal["proposals"] = "proposals"
    agent_id: str
    proposal_id: str

    @property
    def to(self) -> tuple[Stream, str]:
        return "proposals", self.agent_id


EVENTS: dict[tuple[str, str], type[LiveEvent]] = {
    ("session", "proposal.proposed"): ProposalProposedEvent,
    ("session", "proposal.decided"): ProposalDecidedEvent,
    ("session", "turn.step_ended"): StepEndedEvent,
    ("session", "turn.continued"): TurnContinuedEvent,
    ("proposals", "proposal.proposed"): PageEvent,
    ("proposals", "proposal.decided"): PageEvent,
}
"""Each event by its stream (a session's events name none) and its name."""


def read_event(value: Any) -> LiveEvent | None:
    """The event that ``value`` (JSON read back) is, or None when it is none this version knows."""
    if not isinstance(value, dict):
        return None
    model = EVENTS.get((str(value.get("stream", "session")), str(value.get("event"))))
    if model is None:
        return None
    try:
        return model.model_validate(value)
    except ValidationError:
        return None
