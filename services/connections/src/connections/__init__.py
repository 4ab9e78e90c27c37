"""The connections service: owns logins (connections to external services, at platform, organisation, guild and
agent scope), sessions' grants of them, and the read-only proxy to their MCP servers (the ``login`` kind)."""
