"""The deployer serves every public route it declares (:mod:`deployer_contract.source`,
:mod:`deployer_contract.deploys`)."""

from __future__ import annotations

from assent.api import mismatches, routes_of
from deployer.api import RESOURCES
from deployer_contract.source import OWNER


def test_every_declared_route_has_its_handler() -> None:
    assert routes_of(OWNER), "the deployer declares its routes"
    assert mismatches(routes_of(OWNER), RESOURCES) == []
