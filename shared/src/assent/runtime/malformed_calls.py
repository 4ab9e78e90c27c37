"""The answer to a tool call that cannot be read: an error ``ToolResult`` whenever its envelope can be.

A coach written against the published contracts (``contracts/``) may still send a call its owner cannot read:
a field missing or of the wrong type, a ``v`` the owner does not know. Dead-lettering it would leave the coach
waiting until its own timeout, with nothing to say why. So when the call names what an answer needs (its
``session_id``, ``seq``, ``tool_call_id`` and ``tool``, each valid, and ``type`` ``ToolCall`` or absent) the
owner answers it at once on ``studio.tool-results`` with ``ok`` false, code ``malformed_tool_call`` (422), and a
message that names each field that is wrong and why. Only what cannot be answered (not JSON, no readable
envelope, another message type) goes to the dead-letter topic.

The answer's envelope id is derived from where the call was read (topic, partition, offset): a call delivered
again is answered with the same id, which the coach and the gateway drop as a duplicate; a call sent again is a
new record and gets a new answer.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from .. import topics
from ..contracts import Id, MalformedMessage, Seq, ToolCall, ToolError, ToolResult
from ..topics import Topic

MALFORMED_TOOL_CALL = "malformed_tool_call"


class _CallEnvelope(BaseModel):
    """What an answer to a call needs of it."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["ToolCall"] = "ToolCall"
    session_id: Id
    seq: Seq
    tool_call_id: Id
    tool: Id


def _fields(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in err['loc']) or 'message'}: {err['msg']}"
        for err in exc.errors(include_url=False)
    )


def problems(data: dict[str, Any], error: MalformedMessage) -> str:
    """What is wrong with the call ``data``, each bad field named by its path (``session.org_id: Field required``).

    A call without ``type`` is read as a ``ToolCall`` to name its other bad fields too."""
    cause = error.__cause__
    if isinstance(cause, ValidationError):
        return _fields(cause)
    if "type" not in data:
        try:
            ToolCall.model_validate({**data, "type": "ToolCall"})
        except ValidationError as exc:
            return f"type: Field required; {_fields(exc)}"
        return "type: Field required"
    return str(error)


def answer_malformed_call(raw: bytes, error: MalformedMessage, origin: str) -> tuple[Topic, str, ToolResult] | None:
    """The error result that answers the unreadable call ``raw`` (read at ``origin``, ``topic/partition/offset``),
    with the topic and key it goes out with; None when its envelope cannot be read either (it is dead-lettered)."""
    try:
        data: Any = json.loads(raw)
        envelope = _CallEnvelope.model_validate(data)
    except (ValueError, RecursionError):  # a ValidationError is a ValueError
        return None
    try:
        call_id: uuid.UUID | None = uuid.UUID(str(data.get("id")))
    except ValueError:
        call_id = None
    result = ToolResult(
        id=uuid.uuid5(uuid.NAMESPACE_URL, f"assent:malformed-tool-call/{origin}"),
        session_id=envelope.session_id,
        seq=envelope.seq,
        tool_call_id=envelope.tool_call_id,
        tool=envelope.tool,
        ok=False,
        error=ToolError(
            status=422,
            code=MALFORMED_TOOL_CALL,
            message=f"the tool call cannot be read: {problems(data, error)}"[:4000],
        ),
        causation_id=call_id,
        correlation_id=call_id,
    )
    return topics.TOOL_RESULTS, envelope.session_id, result
