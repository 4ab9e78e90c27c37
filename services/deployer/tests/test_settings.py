"""The deployer refuses settings under which its build jobs could wait on each other for connections."""

import pytest
from pydantic import ValidationError

from deployer.settings import DeployerSettings


@pytest.mark.parametrize(
    ("concurrency", "pool", "overflow", "accepted"),
    [
        (2, 10, 0, True),  # the defaults
        (3, 10, 0, True),  # 2 x 3 + 3 = 9
        (4, 10, 0, False),
        (4, 10, 1, True),
        (32, 10, 0, False),
        (32, 67, 0, True),
    ],
)
def test_the_pool_holds_two_connections_per_running_job_and_the_relays_and_one_more(
    monkeypatch: pytest.MonkeyPatch, concurrency: int, pool: int, overflow: int, accepted: bool
) -> None:
    monkeypatch.setenv("ASSENT_BUILD_CONCURRENCY", str(concurrency))
    monkeypatch.setenv("ASSENT_DB_POOL_SIZE", str(pool))
    monkeypatch.setenv("ASSENT_DB_POOL_OVERFLOW", str(overflow))
    if accepted:
        settings = DeployerSettings()
        assert (settings.build_concurrency, settings.db_pool_size, settings.db_pool_overflow) == (
            concurrency,
            pool,
            overflow,
        )
    else:
        with pytest.raises(ValidationError, match="each running job uses two connections at once"):
            DeployerSettings()
