"""Settings of the edits service."""

from assent.settings import ServiceSettings


class EditsSettings(ServiceSettings):
    service_name: str = "edits"
    http_port: int = 8101
    memory_max_bytes: int = 32 * 1024
    """The cap on an agent's Memory, in bytes of UTF-8 (a proposal or a write over it is refused)."""
    note_max_bytes: int = 32 * 1024
    """The cap on a note's text, in bytes of UTF-8."""
    task_max_bytes: int = 32 * 1024
    """The cap on an agent's Task and on a Task draft, in bytes of UTF-8 (``content_too_large``)."""
