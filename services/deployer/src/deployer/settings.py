"""Settings of the deployer service."""

import tempfile
from pathlib import Path

from assent.settings import ServiceSettings


class DeployerSettings(ServiceSettings):
    service_name: str = "deployer"
    http_port: int = 8102
    repos_dir: Path = Path(tempfile.gettempdir()) / "assent-deployer"
    """Where the deployer keeps agents' repositories (``ASSENT_REPOS_DIR``): hosted sources, and its copies of
    external ones. Each system (topic prefix) gets a folder of its own below it."""

    @property
    def repos_root(self) -> Path:
        return self.repos_dir / (self.topic_prefix.strip(".") or "default")
