"""Settings of the access service. Its port is services.toml's: the devstack, the image and the kustomize base
set ``ASSENT_HTTP_PORT`` from there."""

from assent.settings import ServiceSettings


class AccessSettings(ServiceSettings):
    service_name: str = "access"
