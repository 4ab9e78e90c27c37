"""The connections service's kind: a row of the kind registry (:data:`assent.kinds.KINDS`)."""

from assent.kinds import Answer, KindSpec

from .routes import OWNER

LOGIN = KindSpec(
    "login",
    OWNER,
    ("studio_request_connection_access",),
    "Logins",
    {"grant": "Grant read access"},
    decisions={"grant": "granted", "decline": "declined"},
    endpoint="logins",
    read_tools=("studio_call_connection_tool",),
    decided_alone=True,
    widget="studio_connection_access",
    answer=Answer(route="session_connections", answered=409),
)

KINDS = (LOGIN,)
