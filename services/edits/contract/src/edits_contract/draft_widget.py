"""What a Task draft's widget carries beside every kind's fields: its agent, its id and why it was drafted.

A coach reads it as :class:`DraftWidget` (``result.widget.read_as(DraftWidget)``); the draft kind hands the kit
:class:`DraftWidgetFields`. The draft itself is the result's ``output``.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, model_validator

from assent.contracts import ProposalWidget


class AgentRef(BaseModel):
    """An agent as a widget names it."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str


class DraftWidgetFields(BaseModel):
    """The draft kind's own fields of its widget."""

    model_config = ConfigDict(frozen=True)

    agent: AgentRef
    draft_id: str
    """The draft's id: its edits keep it, and the request follows its newest version."""
    rationale: str
    """Why the coach drafted it."""


class DraftWidget(ProposalWidget):
    """A Task draft's widget, as a coach reads it."""

    agent: AgentRef
    draft_id: str
    rationale: str

    @model_validator(mode="after")
    def _a_drafts(self) -> Self:
        if self.kind != "draft":
            raise ValueError(f"agent, draft_id and rationale are a draft's; a {self.kind} widget has none")
        return self
