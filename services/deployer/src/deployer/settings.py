"""Settings of the deployer service."""

import tempfile
from pathlib import Path

from pydantic import Field, model_validator

from assent.settings import ServiceSettings
from deployer_contract.deploys import LocalTarget, Target


class DeployerSettings(ServiceSettings):
    service_name: str = "deployer"
    http_port: int = 8102
    repos_dir: Path = Path(tempfile.gettempdir()) / "assent-deployer"
    """Where the deployer keeps agents' repositories (``ASSENT_REPOS_DIR``): hosted sources, and its copies of
    external ones. Each system (topic prefix) gets a folder of its own below it."""
    artifacts_dir: Path = Path(tempfile.gettempdir()) / "assent-artifacts"
    """Where builds keep their artifacts (``ASSENT_ARTIFACTS_DIR``), one tar per content digest, per system."""
    local_target_dir: Path = Path(tempfile.gettempdir()) / "assent-local-target"
    """Where the local deploy target records each agent's staged and live version (``ASSENT_LOCAL_TARGET_DIR``),
    per system."""
    deploy_target: Target = Field(default_factory=lambda: LocalTarget(kind="local"))
    """The deploy target of agents whose Deploys settings name none (``ASSENT_DEPLOY_TARGET``, JSON:
    ``{"kind": "local"}``, ``{"kind": "webhook", "url": ...}``, ``{"kind": "kubernetes", ...}``)."""
    build_concurrency: int = Field(2, ge=1, le=32)
    """How many build and deploy jobs one process runs at once (``ASSENT_BUILD_CONCURRENCY``). A running job uses two
    database connections at once, so the deployer refuses to start unless its pool (``ASSENT_DB_POOL_SIZE`` +
    ``ASSENT_DB_POOL_OVERFLOW``) holds twice this plus 3: the relay's lock and the consumers need theirs."""
    poll_seconds: float = Field(60.0, ge=0)
    """How often the remotes of sources that build on push are fetched (``ASSENT_POLL_SECONDS``; 0: never)."""

    @model_validator(mode="after")
    def _pool_holds_the_jobs(self) -> "DeployerSettings":
        # A running job holds its own transaction's connection and opens a second one for each step it records,
        # and the outbox relay holds one for its lock: a pool smaller than two per job, plus the relay's, plus one
        # for the consumers and the API, could leave every job waiting.
        needed = 2 * self.build_concurrency + 3
        if self.db_pool_size + self.db_pool_overflow < needed:
            raise ValueError(
                f"ASSENT_DB_POOL_SIZE + ASSENT_DB_POOL_OVERFLOW ({self.db_pool_size + self.db_pool_overflow}) must be"
                f" at least {needed} for ASSENT_BUILD_CONCURRENCY={self.build_concurrency}: each running job uses two"
                " connections at once"
            )
        return self

    def _system(self, root: Path) -> Path:
        return root / (self.topic_prefix.strip(".") or "default")

    @property
    def repos_root(self) -> Path:
        return self._system(self.repos_dir)

    @property
    def artifacts_root(self) -> Path:
        return self._system(self.artifacts_dir)

    @property
    def local_target_root(self) -> Path:
        return self._system(self.local_target_dir)
