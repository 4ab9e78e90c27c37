"""``python -m edits``: run the edits service (Kafka consumers, outbox relay and internal HTTP API)."""

import logging

import uvicorn

from .entrypoint import create_app
from .settings import EditsSettings


def main() -> None:
    settings = EditsSettings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s edits %(levelname)s %(name)s: %(message)s")
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
