"""Settings of the routines service. Its port is services.toml's: the devstack, the image and the kustomize base
set ``ASSENT_HTTP_PORT`` from there."""

from pydantic import Field

from assent.settings import ServiceSettings


class RoutinesSettings(ServiceSettings):
    service_name: str = "routines"
    scheduler_poll_seconds: float = Field(10.0, gt=0)
    """The longest each replica's scheduler sleeps between looks for due routines (``ASSENT_SCHEDULER_POLL_SECONDS``).
    It wakes at the next planned wake-up and when it plans one itself; this bounds how late it sees a wake-up
    planned by another replica that died before firing it, or a clock moved by hand."""
    scheduler_batch: int = 100
    """The most routines one fire takes (``ASSENT_SCHEDULER_BATCH``); a full batch is followed by another at once."""
