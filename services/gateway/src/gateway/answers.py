"""What the gateway's own routes answer besides their success, as their OpenAPI document says."""

from typing import Any, Literal

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from assent.api import Error
from assent.api.declare import BODY_ERRORS, COMMON_ERRORS
from assent.contracts import ProposalOutcome

PERSON_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": Error, "description": why} for status, why in COMMON_ERRORS.items()
}
"""What every studio endpoint may answer besides its own (as :func:`assent.api.error_statuses` says for the
owners' routes)."""


KAFKA_STALLED: dict[str, Any] = {
    "model": Error,
    "description": "Kafka has taken none of the gateway's messages for longer than ``ASSENT_KAFKA_STALL_SECONDS`` "
    "(too few in-sync replicas, no leader), or a service or its database is unavailable: nothing was recorded; "
    "``retry: true`` and a ``Retry-After`` header, and the same request succeeds once it is back",
}
"""The 503 of a write that would send a message to Kafka (:class:`gateway.handlers.KafkaStalled`)."""


class Awaiting(BaseModel):
    """An approval counted towards a ``require`` rule of the organisation's policy; the request waits for more
    (``approvals`` of ``required``, and ``detail`` says whose are still needed). Nothing was sent to the owner yet."""

    status: Literal["awaiting_approvals"] = "awaiting_approvals"
    proposal_id: str
    session_id: str
    seq: int
    kind: str
    decision: str
    approvals: int
    required: int
    detail: str


DECISION_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"model": ProposalOutcome, "description": "The outcome: the decision's own (applied, declined, ...)"},
    202: {
        "model": Awaiting,
        "description": "An approval counted; the organisation's policy requires more before the request is applied",
    },
    403: {
        "model": Error,
        "description": "The caller may not decide it, or (a policy requiring approvals) their approval does not "
        "count: they run the session that proposed it, or hold none of the roles the rule names",
    },
    404: {"model": Error, "description": "No such request in the caller's organisation"},
    409: {
        "model": ProposalOutcome,
        "description": "The target changed since the coach read it (or a rule such as an embedding Task refuses it "
        "now); the request stays pending",
    },
    422: {
        "model": Error,
        "description": "Already decided, a decision that does not fit the request (an outcome), "
        "or a body that does not fit its schema",
    },
    **{status: {"model": Error, "description": why} for status, why in BODY_ERRORS.items()},
    502: {"model": ProposalOutcome, "description": "The owner failed to carry the decision out"},
    503: KAFKA_STALLED,
    504: {"model": Error, "description": "The owner has not answered yet; the decision stands (``decision_id``)"},
}
"""What deciding a proposal answers (``/edits/{seq}``, ``/proposals/{id}``): the outcome, with its status."""


def awaiting_answer(waiting: Any) -> dict[str, Any]:
    """The 202 of an approval counted (:class:`gateway.handlers.AwaitingApprovals`), as :class:`Awaiting`."""
    proposal = waiting.proposal
    return Awaiting(
        proposal_id=proposal.proposal_id,
        session_id=proposal.session_id,
        seq=proposal.seq,
        kind=proposal.kind,
        decision=waiting.decision,
        approvals=waiting.approvals,
        required=waiting.required,
        detail=waiting.detail,
    ).model_dump(mode="json")


def status_of(outcome: ProposalOutcome) -> int:
    """The status a decision answers with: its outcome's (502 when the owner failed to carry it out)."""
    return 502 if outcome.outcome == "failed" else outcome.status


def decided(outcome: ProposalOutcome) -> JSONResponse:
    """A decision's answer: its outcome, with the status :func:`status_of` says."""
    return JSONResponse(outcome.model_dump(mode="json"), status_code=status_of(outcome))
