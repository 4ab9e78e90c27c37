"""The routines service's kind: a row of the kind registry (:data:`assent.kinds.KINDS`)."""

from assent.kinds import KindSpec

from .routes import OWNER

ROUTINE = KindSpec(
    "routine",
    OWNER,
    ("studio_edit_routine",),
    "Agents",
    {"create": "Create routine", "edit": "Apply edit", "delete": "Delete routine"},
    read_tools=("studio_list_routines",),
    revertible=True,
)

KINDS = (ROUTINE,)
