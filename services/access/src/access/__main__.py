"""``python -m access``: run the access service (Kafka consumers, outbox relay and internal HTTP API)."""

from assent.runtime import serve

from .entrypoint import create_app
from .settings import AccessSettings


def main() -> None:
    settings = AccessSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
