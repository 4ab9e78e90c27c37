"""``python -m gateway``: run the gateway (public HTTP API, projection consumers, outbox relay)."""

import logging

import uvicorn

from .entrypoint import create_app
from .settings import GatewaySettings


def main() -> None:
    settings = GatewaySettings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s gateway %(levelname)s %(name)s: %(message)s")
    uvicorn.run(
        create_app(settings),
        host=settings.http_host,
        port=settings.http_port,
        log_level="warning",
        loop="uvloop",
        http="httptools",
    )


if __name__ == "__main__":
    main()
