"""Settings of the edits service."""

from assent.settings import ServiceSettings


class EditsSettings(ServiceSettings):
    service_name: str = "edits"
    http_port: int = 8101
    memory_max_bytes: int = 32 * 1024
    session_wait_seconds: float = 5.0
    """How long a tool call waits for its session's ``SessionOpened`` (another topic) before it is refused."""
