"""``python -m connections``: run the connections service (Kafka consumers, outbox relay and internal HTTP API)."""

from assent.runtime import serve

from .entrypoint import create_app
from .settings import ConnectionsSettings


def main() -> None:
    settings = ConnectionsSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
