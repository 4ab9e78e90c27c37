"""Settings of the routines service. Its port is services.toml's: the devstack, the image and the kustomize base
set ``ASSENT_HTTP_PORT`` from there."""

from assent.settings import ServiceSettings


class RoutinesSettings(ServiceSettings):
    service_name: str = "routines"
    scheduler_poll_seconds: float = 1.0
    """How often each replica's scheduler looks for due routines (``ASSENT_SCHEDULER_POLL_SECONDS``)."""
    scheduler_batch: int = 100
    """The most routines one fire takes (``ASSENT_SCHEDULER_BATCH``); a full batch is followed by another at once."""
