"""Deploy targets: what rolls a built commit out and makes it live, behind one small protocol.

A target gets a :class:`DeployOrder` twice: :meth:`DeployTarget.start` when the deploy starts (the target takes
the new version; raising :class:`TargetError` means the deploy did not start) and :meth:`DeployTarget.promote`
when it goes live (at once when auto-promote is on, else from the promote endpoint). Both may be called again for
the same ``deploy_id`` after a crash, so a target treats a repeated call as the same request.

- ``local`` records the staged and live version of each agent in a JSON file (``make run`` uses it);
- ``webhook`` POSTs JSON (agent, commit, artifact digest, action) to a continuous delivery system, for example
  an Argo CD sync hook;
- ``kubernetes`` patches a Deployment through the Kubernetes API with the official client: starting annotates the
  Deployment with the staged version, promoting changes its pod template (image tag and annotations), which rolls
  it out.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx
from pydantic import BaseModel, ConfigDict

from deployer_contract.deploys import LocalTarget as LocalConfig
from deployer_contract.deploys import Target as TargetConfig
from deployer_contract.deploys import WebhookTarget as WebhookConfig


class TargetError(Exception):
    """The target did not take the deploy; the message says why."""


@dataclass(frozen=True)
class DeployOrder:
    deploy_id: str
    org_id: str
    agent_id: str
    source_version: str
    artifact_digest: str
    artifact_path: str


Action = Literal["start", "promote"]


class DeployTarget(Protocol):
    kind: str

    async def start(self, order: DeployOrder) -> None: ...

    async def promote(self, order: DeployOrder) -> None: ...


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class LocalStep(_Frozen):
    """One step the local target recorded: the order, what was done (``start``: staged, ``promote``: live), when."""

    deploy_id: str
    org_id: str
    agent_id: str
    source_version: str
    artifact_digest: str
    artifact_path: str
    action: Action
    at: str


class LocalState(_Frozen):
    """An agent's file of the local target: the step staged, the step live, and every step."""

    staged: LocalStep | None = None
    live: LocalStep | None = None
    history: tuple[LocalStep, ...] = ()


class LocalTarget:
    """Records, per agent, the version staged and the version live (and every step, once per deploy and action)
    in ``<root>/<agent_id>.json``."""

    kind = "local"

    def __init__(self, root: Path) -> None:
        self.root = root

    def file(self, agent_id: str) -> Path:
        return self.root / f"{re.sub(r'[^A-Za-z0-9._-]', '_', agent_id)}.json"

    def read(self, agent_id: str) -> LocalState:
        path = self.file(agent_id)
        return LocalState.model_validate_json(path.read_text()) if path.exists() else LocalState()

    def _record(self, order: DeployOrder, action: Action) -> None:
        state = self.read(order.agent_id)
        if any(h.deploy_id == order.deploy_id and h.action == action for h in state.history):
            return
        step = LocalStep(**asdict(order), action=action, at=datetime.now(UTC).isoformat())
        state = state.model_copy(
            update={"history": (*state.history, step), "staged" if action == "start" else "live": step}
        )
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.file(order.agent_id)
        scratch = path.with_suffix(f".tmp{os.getpid()}")
        scratch.write_text(json.dumps(state.model_dump(mode="json"), indent=2))
        os.replace(scratch, path)

    async def start(self, order: DeployOrder) -> None:
        self._record(order, "start")

    async def promote(self, order: DeployOrder) -> None:
        self._record(order, "promote")


class WebhookCall(_Frozen):
    """What the webhook target POSTs."""

    action: Action
    deploy_id: str
    org_id: str
    agent_id: str
    commit: str
    artifact_digest: str


class WebhookTarget:
    """POSTs a :class:`WebhookCall` (``{"action": "start"|"promote", "deploy_id", "org_id", "agent_id", "commit",
    "artifact_digest"}``) to ``url`` (with ``Authorization: Bearer <token>`` when a token is set); any answer but
    2xx is an error."""

    kind = "webhook"

    def __init__(self, url: str, token: str | None = None, timeout: float = 10.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise TargetError(f"a webhook target's url is http or https, not {url!r}")
        self.url, self.token, self.timeout = url, token, timeout

    async def _post(self, order: DeployOrder, action: Action) -> None:
        body = WebhookCall(
            action=action,
            deploy_id=order.deploy_id,
            org_id=order.org_id,
            agent_id=order.agent_id,
            commit=order.source_version,
            artifact_digest=order.artifact_digest,
        )
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.post(self.url, json=body.model_dump(mode="json"), headers=headers)
        except httpx.HTTPError as exc:
            raise TargetError(f"the webhook target {self.url} did not answer ({type(exc).__name__})") from None
        if not 200 <= response.status_code < 300:
            raise TargetError(f"the webhook target {self.url} answered {response.status_code}")

    async def start(self, order: DeployOrder) -> None:
        await self._post(order, "start")

    async def promote(self, order: DeployOrder) -> None:
        await self._post(order, "promote")


class ObjectMeta(_Frozen):
    annotations: dict[str, str]


class ContainerImage(_Frozen):
    name: str
    image: str


class PodSpec(_Frozen):
    containers: tuple[ContainerImage, ...]


class PodTemplate(_Frozen):
    metadata: ObjectMeta
    spec: PodSpec


class DeploymentSpec(_Frozen):
    template: PodTemplate


class DeploymentPatch(_Frozen):
    """A patch of a Deployment: its annotations, and (promoting) its pod template's annotations and image."""

    metadata: ObjectMeta
    spec: DeploymentSpec | None = None


class KubernetesTarget:
    """Rolls ``deployment`` in ``namespace`` (container ``container``, image ``image:<tag>``) to the new version
    through the Kubernetes API; the kubeconfig is ``KUBECONFIG``'s, else the in-cluster service account."""

    kind = "kubernetes"
    ANNOTATION = "assent.dev"

    def __init__(self, namespace: str, deployment: str, container: str, image: str) -> None:
        self.namespace, self.deployment, self.container, self.image = namespace, deployment, container, image

    @staticmethod
    def _api() -> Any:
        from kubernetes import client, config

        try:
            # KUBECONFIG as it is now: the client library reads it once, when it is first imported.
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
        except Exception:
            config.load_incluster_config()
        return client.AppsV1Api()

    def _patch(self, patch: DeploymentPatch) -> None:
        from kubernetes.client.exceptions import ApiException

        body = patch.model_dump(mode="json", exclude_none=True)
        try:
            self._api().patch_namespaced_deployment(self.deployment, self.namespace, body)
        except ApiException as exc:
            raise TargetError(
                f"Kubernetes refused the patch of deployment {self.namespace}/{self.deployment}: "
                f"{exc.status} {exc.reason}"
            ) from None
        except Exception as exc:
            raise TargetError(f"the Kubernetes API did not answer: {type(exc).__name__}") from None

    @staticmethod
    def tag(order: DeployOrder) -> str:
        return order.artifact_digest.replace(":", "-")[:71]

    async def start(self, order: DeployOrder) -> None:
        annotations = {f"{self.ANNOTATION}/staged-version": order.source_version}
        await asyncio.to_thread(self._patch, DeploymentPatch(metadata=ObjectMeta(annotations=annotations)))

    async def promote(self, order: DeployOrder) -> None:
        annotations = {
            f"{self.ANNOTATION}/source-version": order.source_version,
            f"{self.ANNOTATION}/artifact": order.artifact_digest,
            f"{self.ANNOTATION}/deploy-id": order.deploy_id,
        }
        image = ContainerImage(name=self.container, image=f"{self.image}:{self.tag(order)}")
        patch = DeploymentPatch(
            metadata=ObjectMeta(annotations=annotations),
            spec=DeploymentSpec(
                template=PodTemplate(metadata=ObjectMeta(annotations=annotations), spec=PodSpec(containers=(image,)))
            ),
        )
        await asyncio.to_thread(self._patch, patch)


class Targets:
    """The targets of the configurations (a :data:`~deployer_contract.deploys.Target`), and the default one
    (``ASSENT_DEPLOY_TARGET``) for agents that name none."""

    def __init__(self, local_root: Path, default: TargetConfig) -> None:
        self.local = LocalTarget(local_root)
        self.default = default

    def get(self, config: TargetConfig | None) -> DeployTarget:
        config = config or self.default
        if isinstance(config, LocalConfig):
            return self.local
        if isinstance(config, WebhookConfig):
            return WebhookTarget(config.url, config.token)
        return KubernetesTarget(config.namespace or "default", config.deployment, config.container, config.image)
