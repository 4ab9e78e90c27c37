"""What an access request's widget carries beside every kind's fields: ``edit``, the bindings applying writes.

The seed's widget carries ``edit.changes``. A coach reads it as :class:`AccessWidget`
(``result.widget.read_as(AccessWidget)``); the access kind hands the kit :class:`AccessWidgetFields`.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from assent.contracts import ProposalWidget


class AccessChange(BaseModel):
    """One binding an access request writes at the agent: ``id`` names a native tool, a connection, or a connection
    tool as ``<connection id>/<tool>``; ``setting`` on or off writes the binding, inherit deletes it."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["native_tool", "connection", "connection_tool"]
    id: str
    label: str
    setting: Literal["on", "off", "inherit"]


class AccessEdit(BaseModel):
    """What an access request writes: one change per binding, and whether the access after it lets the agent use
    anything it cannot use today (the widget's ``widens``, repeated here for the coach)."""

    model_config = ConfigDict(frozen=True)

    changes: tuple[AccessChange, ...] = Field(min_length=1)
    widens: bool


class AccessWidgetFields(BaseModel):
    """The access kind's own fields of its widget."""

    model_config = ConfigDict(frozen=True)

    edit: AccessEdit


class AccessWidget(ProposalWidget):
    """An access request's widget, as a coach reads it."""

    edit: AccessEdit

    @model_validator(mode="after")
    def _edit_widens_as_the_widget(self) -> Self:
        if self.kind != "access":
            raise ValueError(f"edit is an access request's; a {self.kind} widget has none")
        if self.edit.widens != self.widens:
            raise ValueError("edit.widens says what widens says")
        return self
