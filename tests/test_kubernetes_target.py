"""The Kubernetes deploy target against a real cluster: only when ``KUBECONFIG`` names one."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from deployer.adapters.targets import DeployOrder, KubernetesTarget

pytestmark = pytest.mark.integration


def cluster() -> str:
    config = os.environ.get("KUBECONFIG")
    if not config or not Path(config.split(os.pathsep)[0]).exists():
        reason = "KUBECONFIG names no cluster: the Kubernetes target is tested against a real cluster only"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    return config


async def test_the_kubernetes_target_rolls_a_deployment_to_the_new_version() -> None:
    cluster()
    from kubernetes import client, config

    config.load_kube_config()
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
