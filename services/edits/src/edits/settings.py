"""Settings of the edits service."""

from assent.settings import ServiceSettings


class EditsSettings(ServiceSettings):
    service_name: str = "edits"
    http_port: int = 8101
    memory_max_bytes: int = 32 * 1024
    note_max_bytes: int = 32 * 1024
    task_max_bytes: int = 32 * 1024
