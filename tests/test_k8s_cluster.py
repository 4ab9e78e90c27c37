"""The Helm chart and the kustomize base against a real Kubernetes API server (:mod:`tests.kube`): the chart
installs into a namespace that enforces the "restricted" Pod Security Standard, its migration hook completes
before the services roll out, every Deployment becomes available; the base passes a server-side dry run."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import tomllib
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube import kubeconfig  # noqa: F401  (the fixture)
from tests.test_deploy_manifests import BASE, CHART, base_objects, tool

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]


def api(path: str) -> Any:
    from kubernetes import config

    return config.new_client_from_config(path)


def restricted_namespace(client_api: Any) -> str:
    from kubernetes import client

    name = f"assent-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(client_api).create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(
                name=name,
                labels={
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                },
            )
        )
    )
    return name


def secret(client_api: Any, namespace: str, name: str, values: dict[str, str]) -> None:
    from kubernetes import client

    client.CoreV1Api(client_api).create_namespaced_secret(
        namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name=name),
            data={key: base64.b64encode(value.encode()).decode() for key, value in values.items()},
        ),
    )


async def test_the_chart_installs_in_a_restricted_namespace_and_every_service_rolls_out(
    kubeconfig: str,  # noqa: F811
) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    cluster = api(kubeconfig)
    namespace = restricted_namespace(cluster)
    secret(cluster, namespace, "assent", {"DATABASE_URL": "postgresql+asyncpg://app@postgres/assent"})
    secret(cluster, namespace, "assent-migration", {"DATABASE_URL": "postgresql+asyncpg://owner@postgres/assent"})

    # The namespace really enforces the standard: a pod that says nothing of its security is refused.
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(cluster).create_namespaced_pod(
            namespace,
            client.V1Pod(
                metadata=client.V1ObjectMeta(name="unsafe"),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="x")]),
            ),
        )
    assert refused.value.status == 403 and "restricted" in refused.value.body, refused.value.body

    # --wait: the pre-install hook (the migration Job) completes, then every Deployment is available.
    install = await asyncio.to_thread(
        subprocess.run,
        [
            tool("helm"),
            "install",
            "assent",
            str(CHART),
            "--namespace",
            namespace,
            "--kubeconfig",
            kubeconfig,
            "--wait",
            "--wait-for-jobs",
            "--timeout",
            "4m",
        ],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    with (REPO / "services.toml").open("rb") as file:
        services = [row["name"] for row in tomllib.load(file)["service"]]
    deployments = client.AppsV1Api(cluster).list_namespaced_deployment(namespace).items
    assert sorted(d.metadata.name for d in deployments) == sorted(f"assent-{name}" for name in services)
    for deployment in deployments:
        assert deployment.status.available_replicas == deployment.spec.replicas >= 2, deployment.metadata.name
    pods = client.CoreV1Api(cluster).list_namespaced_pod(namespace).items
    running = [p for p in pods if p.status.phase == "Running"]
    assert len(running) == sum(d.spec.replicas for d in deployments)
    events = client.CoreV1Api(cluster).list_namespaced_event(namespace).items
    # The hook's Job ran to completion (helm deletes it once it has succeeded; its events stay).
    assert any(e.involved_object.kind == "Job" and e.reason == "Completed" for e in events), [
        (e.involved_object.kind, e.reason) for e in events
    ]


async def test_the_kustomize_base_passes_a_server_side_dry_run(kubeconfig: str) -> None:  # noqa: F811
    from kubernetes import dynamic
    from kubernetes.client.rest import ApiException

    cluster = api(kubeconfig)
    namespace = restricted_namespace(cluster)
    resources = dynamic.DynamicClient(cluster)
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    tags = {image["name"]: image["newTag"] for image in kustomization["images"]}
    applied = 0
    for obj in base_objects():
        obj.setdefault("metadata", {}).setdefault("labels", {})["app.kubernetes.io/part-of"] = "assent"
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            name = container["image"].split(":")[0]
            container["image"] = f"{name}:{tags[name]}"
        kind = resources.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        kind.server_side_apply(body=obj, namespace=namespace, field_manager="assent-tests", dry_run="All")
        applied += 1
    assert applied == len(base_objects())

    # The dry run checks fields for real: an unknown one is refused.
    deployment = next(obj for obj in base_objects() if obj["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/readyz"
    kind = resources.resources.get(api_version="apps/v1", kind="Deployment")
    with pytest.raises(ApiException) as refused:
        kind.server_side_apply(body=deployment, namespace=namespace, field_manager="assent-tests", dry_run="All")
    # (A server-side apply that does not fit the schema is answered 500 by the API server, naming the field.)
    assert "paht" in refused.value.body and "not declared in schema" in refused.value.body, refused.value.body
