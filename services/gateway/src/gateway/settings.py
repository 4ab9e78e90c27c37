"""Settings of the gateway."""

from pydantic import Field

from assent.settings import ServiceSettings


class GatewaySettings(ServiceSettings):
    service_name: str = "gateway"
    http_port: int = 8100
    owner_urls: dict[str, str] = Field(
        default_factory=lambda: {"edits": "http://127.0.0.1:8101"},
        description='Where the internal API of each owner service lives, as JSON: {"edits": "http://edits:8000"}.',
    )
    api_tokens: dict[str, str] = Field(
        default_factory=dict,
        description='Bearer tokens and the user each one authenticates, as JSON: {"token": "user-id"}.',
    )
    decision_timeout_seconds: float = 10.0
    """How long a decision POST waits for the owner's outcome before answering 504 (the decision stands)."""
