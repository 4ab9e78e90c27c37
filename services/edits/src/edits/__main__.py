"""``python -m edits``: run the edits service (Kafka consumers, outbox relay and internal HTTP API)."""

from assent.runtime import serve

from .entrypoint import create_app
from .settings import EditsSettings


def main() -> None:
    settings = EditsSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
