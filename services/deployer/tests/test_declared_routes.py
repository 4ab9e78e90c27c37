"""The deployer serves every public route it declares (:mod:`assent.api.source`, :mod:`assent.api.deploys`)."""

from __future__ import annotations

from assent.api import mismatches, routes_of
from assent.api.source import OWNER
from deployer.api import RESOURCES


def test_every_declared_route_has_its_handler() -> None:
    assert routes_of(OWNER), "the deployer declares its routes"
    assert mismatches(routes_of(OWNER), RESOURCES) == []
