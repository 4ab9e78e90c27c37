"""The connections service's topics: its tool calls, its decisions, and its logins' tool catalogs."""

from assent.topics import Topic, decisions, tool_calls

from .messages import ConnectionCatalog
from .routes import OWNER

TOOL_CALLS = tool_calls(OWNER)
DECISIONS = decisions(OWNER)
CONNECTIONS_CATALOGS = Topic("connections.catalogs", "connection_id", (OWNER,), ("access",), (ConnectionCatalog,))
"""Each login's tool catalog whenever it changes: its tools and whether each changes data, by the connections
service's read-only policy, so the access service names connection tools without reading that service's tables."""
