"""The Kubernetes cluster the tests use: the one ``KUBECONFIG`` names, or else a control plane of our own
(:mod:`assent_devstack.kube`: a real API server with kwok for nodes and pods) started once per test run from the
binaries ``make deploy-tools`` builds. Without either, the tests that need one skip here and fail in CI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from assent_devstack import kube


@pytest.fixture(scope="session")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    named = os.environ.get("KUBECONFIG")
    if named and Path(named.split(os.pathsep)[0]).exists():
        yield named
        return
    if not kube.available():
        reason = f"no Kubernetes control plane in {kube.binaries()} (make deploy-tools builds one) and no KUBECONFIG"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    plane = kube.start(tmp_path_factory.mktemp("kube"))
    try:
        yield str(plane.kubeconfig)
    finally:
        plane.stop()
