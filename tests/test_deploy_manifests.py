"""The Kubernetes manifests a platform team applies: the kustomize base (deploy/k8s/base) and the Helm chart
(deploy/helm/assent), both rendered from services.toml.

Each object is valid against the Kubernetes API's own schemas (strictly: an unknown field fails), every pod passes
the "restricted" Pod Security Standard, every service has its probes, limits, disruption budget and network policy,
the chart renders with each of its switches, ``helm lint`` and ``kube-score`` pass on both. helm and kube-score are
installed by ``make deploy-tools`` (CI does it); without them those two checks skip here and fail in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "deploy" / "k8s" / "base"
CHART = REPO / "deploy" / "helm" / "assent"
KUBERNETES = "1.32"
TOOLS = Path(os.environ.get("ASSENT_TOOLS", Path.home() / ".cache" / "assent" / "tools")) / "bin"
CUSTOM_KINDS = {"ServiceMonitor"}  # a CRD of the Prometheus operator: not in the core API's schemas
"""Kinds whose schema is not the Kubernetes API's own."""
ALL_SWITCHES = [
    "--set",
    "autoscaling.enabled=true",
    "--set",
    "serviceMonitor.enabled=true",
    "--set",
    "image.registry=registry.example.com/assent",
]


def services() -> list[dict[str, Any]]:
    with (REPO / "services.toml").open("rb") as file:
        return list(tomllib.load(file)["service"])


def tool(name: str) -> str:
    found = shutil.which(name) or (str(TOOLS / name) if (TOOLS / name).exists() else None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is missing: `make deploy-tools` installs it (CI runs it before the tests)")
        pytest.skip(f"{name} is not installed here (make deploy-tools)")
    return found


def base_objects() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    return [
        doc
        for name in kustomization["resources"]
        for doc in yaml.safe_load_all((BASE / name).read_text())
        if doc is not None
    ]


def chart_objects(*args: str) -> list[dict[str, Any]]:
    helm = tool("helm")
    rendered = subprocess.run(
        [helm, "template", "assent", str(CHART), "--namespace", "assent", "--kube-version", KUBERNETES, *args],
        capture_output=True,
        text=True,
    )
    assert rendered.returncode == 0, rendered.stderr
    return [doc for doc in yaml.safe_load_all(rendered.stdout) if doc is not None]


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job"):
            yield f"{obj['kind']}/{obj['metadata']['name']}", obj["spec"]["template"]["spec"]


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == kind}


def restricted_violations(where: str, pod: dict[str, Any]) -> list[str]:
    """What keeps ``pod`` from the "restricted" Pod Security Standard (the rules a namespace labelled
    ``pod-security.kubernetes.io/enforce: restricted`` checks), plus a read-only root filesystem."""
    problems = []
    pod_context = pod.get("securityContext", {})
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        problems.append(f"{where}: shares a host namespace")
    for volume in pod.get("volumes", []):
        if set(volume) - {"name"} - {"emptyDir", "configMap", "secret", "projected", "persistentVolumeClaim"}:
            problems.append(f"{where}: volume {volume['name']} is of a kind the standard forbids")
    for container in pod.get("initContainers", []) + pod["containers"]:
        context = container.get("securityContext", {})
        name = f"{where}/{container['name']}"

        def setting(key: str, context: dict[str, Any] = context) -> Any:
            return context.get(key, pod_context.get(key))

        if setting("runAsNonRoot") is not True:
            problems.append(f"{name}: runAsNonRoot is not true")
        if setting("runAsUser") == 0:
            problems.append(f"{name}: runs as user 0")
        if (setting("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: no RuntimeDefault seccomp profile")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation is not false")
        if context.get("privileged"):
            problems.append(f"{name}: privileged")
        capabilities = context.get("capabilities", {})
        if capabilities.get("drop") != ["ALL"] or set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: does not drop ALL capabilities")
        if context.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{name}: the root filesystem is writable")
        if not {"cpu", "memory"} <= set(container.get("resources", {}).get("limits", {})):
            problems.append(f"{name}: no cpu and memory limits")
    return problems


@pytest.mark.parametrize("source", ["base", "chart", "chart with every switch"])
def test_every_object_is_valid_against_the_kubernetes_api_schemas(source: str) -> None:
    objects = {
        "base": base_objects,
        "chart": chart_objects,
        "chart with every switch": lambda: chart_objects(*ALL_SWITCHES),
    }[source]()
    checked = 0
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        checked += 1
    assert checked >= 4 * len(services())


def test_an_unknown_field_fails_the_schema_check() -> None:
    """The check above can fail: a misspelt field in a Deployment is refused."""
    deployment = next(obj for obj in base_objects() if obj["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/readyz"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)


@pytest.mark.parametrize("source", ["base", "chart"])
def test_every_service_is_ready_for_a_platform_team(source: str) -> None:
    objects = base_objects() if source == "base" else chart_objects(*ALL_SWITCHES)
    pods = dict(pod_specs(objects))
    assert [problem for where, pod in pods.items() for problem in restricted_violations(where, pod)] == []

    deployments = by_kind(objects, "Deployment")
    budgets = {
        obj["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]
        for obj in by_kind(objects, "PodDisruptionBudget").values()
    }
    policies = {
        obj["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"]: obj
        for obj in by_kind(objects, "NetworkPolicy").values()
        if "app.kubernetes.io/name" in obj["spec"]["podSelector"]["matchLabels"]  # not the migration job's
    }
    assert len(deployments) == len(services())
    for row in services():
        label = f"assent-{row['name']}"
        (deployment,) = [
            d for d in deployments.values() if d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == label
        ]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["startupProbe"]["httpGet"]["path"] == "/readyz"
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["ASSENT_MIGRATE_ON_START"] == "false"  # the migration job does it, with its own role
        assert env["ASSENT_HTTP_PORT"] == str(row["port"])
        assert ("lifecycle" in container) == bool(row.get("public")), "a preStop pause on the public service only"
        assert label in budgets
        (service,) = [
            s for s in by_kind(objects, "Service").values() if s["spec"]["selector"]["app.kubernetes.io/name"] == label
        ]
        assert service["spec"].get("sessionAffinity") == ("ClientIP" if row.get("public") else None), "MCP sessions"
        assert set(policies[label]["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        sources = policies[label]["spec"]["ingress"][0].get("from")
        if row.get("public"):
            assert sources is None
        else:
            callers = [s["podSelector"]["matchLabels"]["app.kubernetes.io/name"] for s in sources if "podSelector" in s]
            assert callers == [f"assent-{r['name']}" for r in services() if r.get("public")]

    (job,) = by_kind(objects, "Job").values()
    migrating = job["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in migrating] == [row["name"] for row in services()]
    for container in migrating:
        assert container["args"] == ["migrate"]
        (url,) = [e for e in container["env"] if e["name"] == "DATABASE_URL"]
        assert url["valueFrom"]["secretKeyRef"]["name"] == "assent-migration"
    if source == "chart":
        assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
        assert len(by_kind(objects, "HorizontalPodAutoscaler")) == len(services())
        assert len(by_kind(objects, "ServiceMonitor")) == 1


def test_the_restricted_check_finds_a_violation() -> None:
    pod = dict(pod_specs(base_objects()))
    where, spec = next(iter(pod.items()))
    spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    assert restricted_violations(where, spec) == [
        f"{where}/{spec['containers'][0]['name']}: allowPrivilegeEscalation is not false"
    ]


def test_the_chart_turns_its_switches_off() -> None:
    objects = chart_objects(
        "--set",
        "migrations.job=false",
        "--set",
        "networkPolicy.enabled=false",
        "--set",
        "podDisruptionBudget.enabled=false",
    )
    kinds = {obj["kind"] for obj in objects}
    assert kinds == {"ConfigMap", "ServiceAccount", "Deployment", "Service"}
    for _, pod in pod_specs(objects):
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["ASSENT_MIGRATE_ON_START"] == "true"


def test_the_chart_names_how_the_services_create_their_topics() -> None:
    """The topic settings are values of their own (not extra environment), and unset ones leave the broker's."""
    default = by_kind(chart_objects(), "ConfigMap")
    (data,) = [obj["data"] for obj in default.values() if "ASSENT_CREATE_TOPICS" in obj.get("data", {})]
    topics = {key: value for key, value in data.items() if key.startswith("ASSENT_TOPIC_")}
    assert topics == {"ASSENT_TOPIC_PARTITIONS": "3", "ASSENT_TOPIC_REPLICATION_FACTOR": "1"}
    cluster = by_kind(
        chart_objects(
            *("--set", "topics.partitions=6", "--set", "topics.replicationFactor=3"),
            *("--set", "topics.minInsyncReplicas=2", "--set", "topics.retentionMs=-1"),
        ),
        "ConfigMap",
    )
    (data,) = [obj["data"] for obj in cluster.values() if "ASSENT_CREATE_TOPICS" in obj.get("data", {})]
    topics = {key: value for key, value in data.items() if key.startswith("ASSENT_TOPIC_")}
    assert topics == {
        "ASSENT_TOPIC_PARTITIONS": "6",
        "ASSENT_TOPIC_REPLICATION_FACTOR": "3",
        "ASSENT_TOPIC_MIN_INSYNC_REPLICAS": "2",
        "ASSENT_TOPIC_RETENTION_MS": "-1",
    }


def test_helm_lint_passes() -> None:
    result = subprocess.run(
        [tool("helm"), "lint", "--strict", "--kube-version", KUBERNETES, str(CHART)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


KUBE_SCORE_SKIPPED = {
    # The images are the operator's to pin by digest at release; the chart takes a tag.
    "container-image-pull-policy": "the tag is pinned per release; IfNotPresent",
}


@pytest.mark.parametrize("source", ["base", "chart"])
def test_kube_score_passes(source: str, tmp_path: Path) -> None:
    objects = base_objects() if source == "base" else chart_objects(*ALL_SWITCHES)
    manifest = tmp_path / "all.yaml"
    manifest.write_text(yaml.safe_dump_all([o for o in objects if o["kind"] not in CUSTOM_KINDS]))
    ignored = [arg for test in KUBE_SCORE_SKIPPED for arg in ("--ignore-test", test)]
    result = subprocess.run(
        [tool("kube-score"), "score", "--output-format", "ci", *ignored, str(manifest)], capture_output=True, text=True
    )
    failures = [line for line in result.stdout.splitlines() if line.startswith(("[CRITICAL]", "[WARNING]"))]
    assert failures == [], "\n".join(failures)
