"""The connections service's kind: a row of the kind registry (:data:`assent.kinds.KINDS`)."""

from assent.kinds import Answer, KindSpec, Options

from .routes import OWNER, LoginGrant

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
    options=Options(LoginGrant, ("grant",)),  # a grant may take a lifetime
)

KINDS = (LOGIN,)
