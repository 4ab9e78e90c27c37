"""Settings of the connections service. Its port is services.toml's: the devstack, the image and the kustomize base
set ``ASSENT_HTTP_PORT`` from there."""

from pydantic import Field, SecretStr

from assent.settings import ServiceSettings
from connections_contract.routes import PlatformLoginIn


class ConnectionsSettings(ServiceSettings):
    service_name: str = "connections"
    credentials_key: SecretStr | None = Field(
        None,
        description="The Fernet key logins' credentials are encrypted with (ASSENT_CREDENTIALS_KEY); a comma-separated "
        "list decrypts with every key and encrypts with the first (rotation). The service does not start without it.",
    )
    mcp_timeout_seconds: float = Field(10.0, gt=0)
    """How long a call to a login's MCP server may take, connecting included (``ASSENT_MCP_TIMEOUT_SECONDS``);
    past it the call is an error result (``connection_timeout``)."""
    mcp_idle_sessions: int = Field(2, ge=0)
    """Client sessions of one login kept open between calls (``ASSENT_MCP_IDLE_SESSIONS``)."""
    platform_logins: list[PlatformLoginIn] = Field(default_factory=list)
    """The platform's logins, reachable from every organisation (``ASSENT_PLATFORM_LOGINS``, a JSON list): kept as
    listed each time the service starts; a platform login no longer listed is deleted."""
