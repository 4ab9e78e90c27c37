"""``python -m deployer``: run the deployer service (Kafka consumers, outbox relay and internal HTTP API)."""

from assent.runtime import serve

from .entrypoint import create_app
from .settings import DeployerSettings


def main() -> None:
    settings = DeployerSettings()
    serve(create_app(settings), settings)


if __name__ == "__main__":
    main()
