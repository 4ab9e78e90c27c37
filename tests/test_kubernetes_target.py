"""The Kubernetes deploy target against a real API server: the cluster ``KUBECONFIG`` names, or the control plane
the tests start (:mod:`tests.kube`)."""

from __future__ import annotations

import os
import uuid

import pytest

from deployer.adapters.targets import DeployOrder, KubernetesTarget
from tests.kube import kubeconfig  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration


async def test_the_kubernetes_target_rolls_a_deployment_to_the_new_version(
    kubeconfig: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kubernetes import client, config

    monkeypatch.setenv("KUBECONFIG", kubeconfig)  # the target loads the cluster's configuration as a deployment would
    config.load_kube_config(kubeconfig)
    apps = client.AppsV1Api()
    name, namespace = f"assent-{uuid.uuid4().hex[:8]}", os.environ.get("ASSENT_TEST_NAMESPACE", "default")
    labels = {"app": name}
    apps.create_namespaced_deployment(
        namespace,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1DeploymentSpec(
                replicas=0,
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels),
                    spec=client.V1PodSpec(containers=[client.V1Container(name="agent", image="busybox:1")]),
                ),
            ),
        ),
    )
    try:
        target = KubernetesTarget(namespace, name, "agent", "registry.example/agents/ada")
        order = DeployOrder("dep_k8s", "acme", "ada", "b" * 40, "sha256:" + "c" * 64, "/tmp/x.tar")
        await target.start(order)
        staged = apps.read_namespaced_deployment(name, namespace)
        assert staged.metadata.annotations["assent.dev/staged-version"] == "b" * 40
        assert staged.spec.template.spec.containers[0].image == "busybox:1"
        await target.promote(order)
        live = apps.read_namespaced_deployment(name, namespace)
        assert live.spec.template.spec.containers[0].image == f"registry.example/agents/ada:sha256-{'c' * 64}"
        assert live.spec.template.metadata.annotations["assent.dev/source-version"] == "b" * 40
    finally:
        apps.delete_namespaced_deployment(name, namespace)
