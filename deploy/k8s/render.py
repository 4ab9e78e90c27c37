"""Render the kustomize base from ``services.toml``: a Deployment and a Service per service, a NetworkPolicy
per owner (only the public service, the gateway, reaches its port), the kustomization that lists them, and the
ConfigMap that tells the gateway where each owner's internal API lives.

The base ships no Secret: the operator creates Secret ``assent`` (DATABASE_URL, ASSENT_API_TOKENS,
ASSENT_SERVICE_KEY, ASSENT_CREDENTIALS_KEY, ASSENT_HISTORY_SIGNING_KEY) before applying it; the Deployments read it
(docs/how-to/kubernetes.md).

    python deploy/k8s/render.py          # rewrite deploy/k8s/base/{services,network,config,kustomization}.yaml
    python deploy/k8s/render.py --check  # exit 1 when the committed files differ from the rendering
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "deploy" / "k8s" / "base"
CHART = REPO / "deploy" / "helm" / "assent"
VERSION = "0.1.0"
MIN_REPLICAS = 2
"""Replicas of each service on Kubernetes at least: a drain or a crash leaves one serving while its consumer group
rebalances (services.toml may ask for more; ``make run`` runs what it says)."""

SECURITY = """\
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
        runAsGroup: 10001
        fsGroup: 10001
        seccompProfile:
          type: RuntimeDefault
"""

CONTAINER_SECURITY = """\
          securityContext:
            runAsNonRoot: true
            runAsUser: 10001
            runAsGroup: 10001
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            privileged: false
            capabilities:
              drop: ["ALL"]
            seccompProfile:
              type: RuntimeDefault
          volumeMounts:
            - name: tmp
              mountPath: /tmp
"""

TMP = """\
      volumes:
        # The root filesystem is read-only; what a service writes (the deployer's checkouts) goes here.
        - name: tmp
          emptyDir:
            sizeLimit: 512Mi
"""

PRESTOP = """\
          lifecycle:
            # The load balancer keeps sending requests for a moment after the pod is marked for deletion: answer
            # them before the process is told to stop.
            preStop:
              exec:
                command: ["python", "-c", "import time; time.sleep(5)"]
"""

AFFINITY = """\
  # An MCP session lives in the replica that opened it (docs/how-to/connect-an-mcp-client.md#limits): a client's
  # requests stay with one replica.
  sessionAffinity: ClientIP
"""

SERVICE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: assent-{name}
  labels:
    app.kubernetes.io/name: assent-{name}
spec:
  replicas: {replicas}
  revisionHistoryLimit: 5
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: assent-{name}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: assent-{name}
    spec:
      serviceAccountName: assent
      automountServiceAccountToken: false
{security}      terminationGracePeriodSeconds: 30
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    app.kubernetes.io/name: assent-{name}
      containers:
        - name: {name}
          image: assent-{name}:{version}
          imagePullPolicy: IfNotPresent
          ports:
            - name: http
              containerPort: {port}
          envFrom:
            - configMapRef:
                name: assent
            - secretRef:
                name: assent
          env:
            - name: ASSENT_SERVICE_NAME
              value: {name}
            - name: ASSENT_HTTP_HOST
              value: 0.0.0.0
            - name: ASSENT_HTTP_PORT
              value: "{port}"
            - name: ASSENT_MIGRATE_ON_START
              value: "false"
          startupProbe:
            httpGet:
              path: /readyz
              port: http
            periodSeconds: 2
            failureThreshold: 60
          readinessProbe:
            httpGet:
              path: /readyz
              port: http
            periodSeconds: 5
            failureThreshold: 2
          livenessProbe:
            httpGet:
              path: /livez
              port: http
            periodSeconds: 10
            failureThreshold: 3
{prestop}          resources:
            requests:
              cpu: 100m
              memory: 192Mi
              ephemeral-storage: 64Mi
            limits:
              cpu: "1"
              memory: 384Mi
              ephemeral-storage: 512Mi
{container_security}{tmp}---
apiVersion: v1
kind: Service
metadata:
  name: assent-{name}
  labels:
    app.kubernetes.io/name: assent-{name}
spec:
{affinity}  selector:
    app.kubernetes.io/name: assent-{name}
  ports:
    - name: http
      port: {port}
      targetPort: http
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: assent-{name}
spec:
  # A drain takes one pod of a service at a time; a consumer group rebalances, a public replica keeps answering.
  maxUnavailable: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: assent-{name}
"""

MIGRATE_CONTAINER = """\
        - name: {name}
          image: assent-{name}:{version}
          imagePullPolicy: IfNotPresent
          args: ["migrate"]
          envFrom:
            - secretRef:
                name: assent
          env:
            - name: ASSENT_SERVICE_NAME
              value: {name}
            - name: DATABASE_URL
              valueFrom:
                secretKeyRef:
                  name: assent-migration
                  key: DATABASE_URL
          resources:
            requests:
              cpu: 100m
              memory: 192Mi
              ephemeral-storage: 16Mi
            limits:
              cpu: "1"
              memory: 384Mi
              ephemeral-storage: 64Mi
{container_security}"""

POLICY = """\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: assent-{name}
spec:
  podSelector:
    matchLabels:
      app.kubernetes.io/name: assent-{name}
  policyTypes:
    - Ingress
    - Egress
  ingress:
    - ports:
        - protocol: TCP
          port: {port}
{sources}  egress:
    # Kafka, PostgreSQL, Redis, the OTLP collector and the servers a service calls (MCP servers, git remotes)
    # are the platform's and outside this base: any destination.
    - {{}}
"""

SOURCES = """\
      # Only the public services reach the internal API of {name}, and the monitoring namespace its /metrics.
      from:
{callers}        - namespaceSelector:
            matchLabels:
              kubernetes.io/metadata.name: monitoring
"""

CALLER = """\
        - podSelector:
            matchLabels:
              app.kubernetes.io/name: assent-{name}
"""

MIGRATE = """\
# Every service's tables brought to the newest migration, as the role of Secret `assent-migration` (the only one
# that may change the schema); the services run as the role of Secret `assent` with ASSENT_MIGRATE_ON_START=false.
# `kubectl apply -k` starts it beside the Deployments, whose pods restart until it is done; to roll without those
# restarts, apply it first and wait: kubectl apply -f migrate.yaml && kubectl wait --for=condition=complete
# job/assent-migrate (delete the finished Job before the next release's).
apiVersion: batch/v1
kind: Job
metadata:
  name: assent-migrate
  labels:
    app.kubernetes.io/component: migrations
spec:
  backoffLimit: 3
  activeDeadlineSeconds: 600
  ttlSecondsAfterFinished: 3600
  template:
    metadata:
      labels:
        app.kubernetes.io/component: migrations
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
{security}      containers:
{containers}      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: assent-migrate
spec:
  # The migration job answers nobody and connects only to PostgreSQL (the platform's: any destination).
  podSelector:
    matchLabels:
      app.kubernetes.io/component: migrations
  policyTypes:
    - Ingress
    - Egress
  egress:
    - {{}}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: assent
automountServiceAccountToken: false
"""

CHART_VALUES = """\
{header}# The values of the Helm chart deploy/helm/assent; override any with --set or -f.

image:
  # Each service's image is <registry>/assent-<service>:<tag> (`make images` builds assent-<service>:<tag>).
  registry: ""
  tag: "{version}"
  pullPolicy: IfNotPresent

secrets:
  # Created by the operator before installing: DATABASE_URL (a role that reads and writes rows), ASSENT_API_TOKENS,
  # ASSENT_SERVICE_KEY, ASSENT_CREDENTIALS_KEY, ASSENT_HISTORY_SIGNING_KEY (docs/how-to/kubernetes.md).
  app: assent
  # The migration hook's DATABASE_URL: a role that may change the schema (only the hook connects as it).
  migration: assent-migration
  migrationKey: DATABASE_URL

config:
  kafkaBootstrapServers: kafka:9092
  redisUrl: redis://redis:6379/0
  otlpEndpoint: ""
  # false where the topics are the platform's (deploy/kafka: Strimzi KafkaTopic resources or create-topics.sh).
  createTopics: true
  # More environment for every service, e.g. ASSENT_LOG_TRAIL: "true" (docs: Reference, Settings).
  extra: {{}}

migrations:
  # A pre-install and pre-upgrade hook runs `python -m <service> migrate` for each service; the services run with
  # ASSENT_MIGRATE_ON_START=false. false: each service migrates as it starts, as the role of secrets.app.
  job: true
  resources:
    requests: {{cpu: 100m, memory: 192Mi, ephemeral-storage: 16Mi}}
    limits: {{cpu: "1", memory: 384Mi, ephemeral-storage: 64Mi}}

resources:
  requests: {{cpu: 100m, memory: 192Mi, ephemeral-storage: 64Mi}}
  limits: {{cpu: "1", memory: 384Mi, ephemeral-storage: 512Mi}}
tmpSizeLimit: 512Mi

gateway:
  # How long a public replica keeps answering after it is marked for deletion (the load balancer's lag).
  preStopSeconds: 5
  # An MCP session lives in the replica that opened it: ClientIP keeps a client's requests on one replica (empty:
  # none, where an ingress routes by the Mcp-Session-Id header instead).
  sessionAffinity: ClientIP

podDisruptionBudget:
  enabled: true

networkPolicy:
  enabled: true
  # The namespace whose Prometheus scrapes /metrics.
  monitoringNamespaceLabels:
    kubernetes.io/metadata.name: monitoring
  # Where the services may connect: Kafka, PostgreSQL, Redis, the OTLP collector, MCP servers, git remotes.
  egress:
    - {{}}

# Replicas of each service at least (services.toml may ask for more): a drain or a crash leaves one serving.
minReplicas: 2

autoscaling:
  enabled: false
  minReplicas: 2
  maxReplicas: 6
  targetCPUUtilizationPercentage: 70

topics:
  # How the services create their topics (ignored with config.createTopics false: then they are the platform's,
  # deploy/kafka). Partitions of each topic: an owner's replicas beyond it would idle, so its autoscaler stops there.
  partitions: 3
  # 1 suits one broker; 3 a cluster (with minInsyncReplicas 2).
  replicationFactor: 1
  # min.insync.replicas and retention.ms of each topic; null: the broker's defaults (-1 keeps records forever).
  minInsyncReplicas: null
  retentionMs: null

serviceMonitor:
  enabled: false
  interval: 30s
  labels: {{}}

# From services.toml: each service's name, port, replicas and whether it is public (the gateway).
services:
{services}"""

HEADER = "# Generated by deploy/k8s/render.py from services.toml; edit those, not this file.\n"


def services() -> list[dict[str, object]]:
    with (REPO / "services.toml").open("rb") as file:
        return list(tomllib.load(file)["service"])


def render() -> dict[Path, str]:
    rows = services()
    body = "---\n".join(
        SERVICE.format(
            name=row["name"],
            port=row["port"],
            replicas=max(MIN_REPLICAS, int(row.get("replicas", 1))),  # type: ignore[call-overload]
            version=VERSION,
            security=SECURITY,
            container_security=CONTAINER_SECURITY,
            tmp=TMP,
            prestop=PRESTOP if row.get("public") else "",
            affinity=AFFINITY if row.get("public") else "",
        )
        for row in rows
    )
    owners = {row["name"]: f"http://assent-{row['name']}:{row['port']}" for row in rows if not row.get("public")}
    callers = "".join(CALLER.format(name=row["name"]) for row in rows if row.get("public"))
    policies = "---\n".join(
        POLICY.format(
            name=row["name"],
            port=row["port"],
            sources="" if row.get("public") else SOURCES.format(name=row["name"], callers=callers),
        )
        for row in rows
    )
    migrate = MIGRATE.format(
        containers="".join(
            MIGRATE_CONTAINER.format(name=row["name"], version=VERSION, container_security=CONTAINER_SECURITY)
            for row in rows
        ),
        security=SECURITY,
    )
    schemas = ", ".join(str(row["name"]) for row in rows)
    config = f"""{HEADER}apiVersion: v1
kind: ConfigMap
metadata:
  name: assent
data:
  KAFKA_BOOTSTRAP_SERVERS: kafka:9092
  REDIS_URL: redis://redis:6379/0
  ASSENT_OWNER_URLS: '{json.dumps(owners)}'
  OTEL_EXPORTER_OTLP_ENDPOINT: ""
# The Secret `assent` is the operator's, created before this base is applied (docs/how-to/kubernetes.md):
#   DATABASE_URL        one database; each service uses its own schema in it ({schemas})
#   ASSENT_API_TOKENS   bearer tokens of the operators' API, as JSON {{"token": "user-id"}}
#   ASSENT_SERVICE_KEY  the key the services sign and check their internal calls with (at least 32 bytes)
#   ASSENT_CREDENTIALS_KEY  the Fernet key the connections service encrypts logins' credentials with (a
#                       comma-separated list rotates: the first encrypts, each decrypts)
#   ASSENT_HISTORY_SIGNING_KEY  the Ed25519 key (a 32-byte seed in base64) the gateway signs the history's
#                       checkpoints with; unset, none is signed and the history is not pruned
# The Secret `assent-migration` holds DATABASE_URL for the migration Job (migrate.yaml): a role that may change the
# schema. The services' own DATABASE_URL needs only the rights to read and write rows.
"""
    images = "".join(f'  - name: assent-{row["name"]}\n    newTag: "{VERSION}"\n' for row in rows)
    kustomization = f"""{HEADER}# Assent on Kubernetes: one Deployment and Service per service, a NetworkPolicy per
# owner, configured through one ConfigMap and the Secret `assent`, which the operator creates first
# (docs/how-to/kubernetes.md). Kafka, PostgreSQL and Redis are the platform's; point those at them.
#   kubectl apply -k deploy/k8s/base
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
labels:
  - pairs:
      app.kubernetes.io/part-of: assent
    includeSelectors: false
resources:
  - config.yaml
  - migrate.yaml
  - services.yaml
  - network.yaml
images:
{images}"""
    return {
        BASE / "services.yaml": HEADER + body,
        BASE / "network.yaml": HEADER + policies,
        BASE / "migrate.yaml": HEADER + migrate,
        BASE / "config.yaml": config,
        BASE / "kustomization.yaml": kustomization,
        CHART / "values.yaml": CHART_VALUES.format(
            header=HEADER.replace("edit those, not this file", "edit those (or set values), not this file"),
            version=VERSION,
            services="".join(
                f"  - name: {row['name']}\n    port: {row['port']}\n    replicas: {row.get('replicas', 1)}\n"
                f"    public: {str(bool(row.get('public'))).lower()}\n"
                for row in rows
            ),
        ),
    }


def main() -> int:
    rendered = render()
    if "--check" in sys.argv:
        stale = [str(path.relative_to(REPO)) for path, text in rendered.items() if path.read_text() != text]
        if stale:
            print(f"out of date with services.toml: {', '.join(stale)} (run: make k8s)", file=sys.stderr)
            return 1
        return 0
    for path, text in rendered.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
