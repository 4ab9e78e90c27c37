"""``python -m routines``: run the routines service (Kafka consumers, outbox relay and internal HTTP API)."""

from assent.runtime import serve

from .entrypoint import create_app
from .settings import RoutinesSettings


def main() -> None:
    settings = RoutinesSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
