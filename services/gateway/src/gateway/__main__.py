"""``python -m gateway``: run the gateway (public HTTP API, projection consumers, outbox relay)."""

from assent.runtime import serve

from .entrypoint import create_app
from .settings import GatewaySettings


def main() -> None:
    settings = GatewaySettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
