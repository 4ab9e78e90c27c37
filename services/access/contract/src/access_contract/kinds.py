"""The access service's kind: a row of the kind registry (:data:`assent.kinds.KINDS`)."""

from assent.kinds import KindSpec

from .routes import OWNER
from .widget import AccessWidget

ACCESS = KindSpec(
    "access",
    OWNER,
    ("studio_edit_access",),
    "Tools",
    {"edit": "Apply edit"},
    read_tools=("studio_read_access",),
    widget_model=AccessWidget,
    revertible=True,
)

KINDS = (ACCESS,)
