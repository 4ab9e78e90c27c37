"""Messages on ``studio.tool-results``: the answer to one tool call."""

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .envelope import Id, Message, Seq


class ToolError(BaseModel):
    """Why a tool call was refused. ``status`` follows HTTP (404 unknown, 409 moved, 422 refused)."""

    model_config = ConfigDict(frozen=True)

    status: int
    code: str
    message: str


class LineCounts(BaseModel):
    model_config = ConfigDict(frozen=True)

    added: int = Field(ge=0)
    removed: int = Field(ge=0)


class EditTarget(BaseModel):
    """What a proposal changes. ``kind`` says which live state; the other fields locate it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: Literal["memory", "note", "guild", "collection", "routine", "access"]
    agent_id: str | None = None
    label: str


class EditBase(BaseModel):
    """The version (where the target has one) and the content hash the coach read."""

    model_config = ConfigDict(frozen=True)

    version: int | None = None
    hash: str


class StudioEditRequest(BaseModel):
    """The widget of an edit-like request; ``await_operator`` pauses the coach's turn at the end of the step."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["studio_edit_request"] = "studio_edit_request"
    await_operator: bool = True
    proposal_id: Id
    kind: Literal["memory", "note", "guild", "collection", "routine", "access"]
    action: Literal["create", "edit", "delete"] = "edit"
    target: EditTarget
    base: EditBase
    proposed_hash: str
    lines: LineCounts
    widens: bool = False


class ToolResult(Message):
    """The result of one tool call: a widget (a request awaiting the operator), a plain output, or an error."""

    type: Literal["ToolResult"] = "ToolResult"
    v: Literal[1] = 1
    session_id: Id
    seq: Seq
    tool_call_id: Id
    tool: Id
    ok: bool
    widget: StudioEditRequest | None = None
    output: dict[str, Any] | None = None
    error: ToolError | None = None

    @model_validator(mode="after")
    def _ok_xor_error(self) -> Self:
        if self.ok == (self.error is not None):
            raise ValueError("a result carries an error exactly when ok is false")
        return self
