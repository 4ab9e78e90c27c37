"""Messages on ``studio.tool-results``: the answer to one tool call."""

import builtins
from typing import Any, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .envelope import Id, Message, Seq
from .registered import Action, Kind, Widget

W = TypeVar("W", bound="ProposalWidget")


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


class ProposalTarget(BaseModel):
    """What a proposal changes. ``kind`` says which live state; the other fields locate it.

    ``path`` is a note's display path or a source file's path; ``ref`` an id the owner gives the target (a
    routine's schedule id, a collection id, a login's connection id), None until a create is applied.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: Kind
    label: str
    agent_id: str | None = None
    guild_id: str | None = None
    path: str | None = None
    ref: str | None = None


class ProposalBase(BaseModel):
    """What the proposal is bound to: the version (where the target has one) and the content hash read.

    ``hash`` None binds that the target does not exist (a create). ``files`` maps each source file path to
    the hash of the text that was read (None: the file did not exist). ``updated_at`` is what a collection
    edit read.
    """

    model_config = ConfigDict(frozen=True)

    version: int | None = None
    hash: str | None = None
    files: dict[str, str | None] | None = None
    updated_at: str | None = None


class ProposalWidget(BaseModel):
    """The widget of a request (``type`` is its kind's: ``studio_edit_request``, ``studio_connection_access`` for a
    login request, ``studio_task_draft`` for a Task draft); ``await_operator`` pauses the coach's turn at the end of
    the step. ``widens`` is every kind's flag (Apply all skips a request that has it).

    A kind may add fields of its own beside these (an access request's ``edit``, a Task draft's ``agent``,
    ``draft_id`` and ``rationale``): its contract declares them as a subclass of this model, and they travel as they
    are. A reader that knows the kind reads them with :meth:`read_as` and that subclass; one that does not passes
    them over.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    type: Widget = "studio_edit_request"
    await_operator: bool = True
    proposal_id: Id
    kind: Kind
    action: Action = "edit"
    target: ProposalTarget
    base: ProposalBase
    proposed_hash: str
    lines: LineCounts
    widens: bool = False

    def read_as(self, model: builtins.type[W]) -> W:  # builtins': ``type`` is a field here
        """This widget as its kind's contract declares it (``model``, a subclass naming the kind's own fields),
        checked: a field the kind requires and this widget lacks is a :class:`pydantic.ValidationError`."""
        return model.model_validate(self.model_dump(mode="json"))


class ToolResult(Message):
    """The result of one tool call: a widget (a request awaiting the operator), a plain output, or an error."""

    type: Literal["ToolResult"] = "ToolResult"
    v: Literal[1] = 1
    session_id: Id
    seq: Seq
    tool_call_id: Id
    tool: Id
    ok: bool
    widget: ProposalWidget | None = None
    output: dict[str, Any] | None = None
    error: ToolError | None = None

    @model_validator(mode="after")
    def _ok_xor_error(self) -> Self:
        if self.ok == (self.error is not None):
            raise ValueError("a result carries an error exactly when ok is false")
        return self
