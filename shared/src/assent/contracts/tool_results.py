"""Messages on ``studio.tool-results``: the answer to one tool call."""

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .envelope import Id, Message, Seq
from .registered import Action, Kind, Widget


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


class AccessChange(BaseModel):
    """One binding an access request writes at the agent: ``id`` names a native tool, a connection, or a connection
    tool as ``<connection id>/<tool>``; ``setting`` on or off writes the binding, inherit deletes it."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["native_tool", "connection", "connection_tool"]
    id: str
    label: str
    setting: Literal["on", "off", "inherit"]


class AccessEdit(BaseModel):
    """What an access request (``kind`` ``access``) writes: one change per binding, and whether the access after it
    lets the agent use anything it cannot use today (the widget's ``widens``, repeated here for the coach)."""

    model_config = ConfigDict(frozen=True)

    changes: tuple[AccessChange, ...] = Field(min_length=1)
    widens: bool


class AgentRef(BaseModel):
    """An agent as a widget names it."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str


class ProposalWidget(BaseModel):
    """The widget of a request (``type`` is its kind's: ``studio_edit_request``, ``studio_connection_access`` for a
    login request, ``studio_task_draft`` for a Task draft); ``await_operator`` pauses the coach's turn at the end of
    the step.

    ``widens`` is every kind's flag (Apply all skips a request that has it); ``edit`` is the kind's own account of
    what applying writes: an :class:`AccessEdit` on an access request, None on every other kind. A Task draft's
    widget names its ``agent``, ``draft_id`` and ``rationale`` (the draft itself is the result's ``output``); no other
    kind's has them.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

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
    edit: AccessEdit | None = None
    agent: AgentRef | None = None
    """A Task draft's agent (``studio_task_draft``); None on every other kind."""
    draft_id: str | None = None
    """A Task draft's id: its edits keep it, and the request follows its newest version."""
    rationale: str | None = None
    """Why the coach drafted it (a Task draft's)."""

    @model_validator(mode="after")
    def _edit_is_the_kinds(self) -> Self:
        if self.edit is not None and self.kind != "access":
            raise ValueError(f"edit is an access request's; a {self.kind} widget has none")
        if self.edit is not None and self.edit.widens != self.widens:
            raise ValueError("edit.widens says what widens says")
        return self

    @model_validator(mode="after")
    def _draft_fields_are_a_drafts(self) -> Self:
        given = (self.agent is not None, self.draft_id is not None, self.rationale is not None)
        if self.kind == "draft" and not all(given):
            raise ValueError("a draft widget names its agent, its draft_id and its rationale")
        if self.kind != "draft" and any(given):
            raise ValueError(f"agent, draft_id and rationale are a draft's; a {self.kind} widget has none")
        return self


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
