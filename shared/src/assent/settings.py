"""Process settings, read from the environment once, in the entrypoint, and passed down."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from .kafka_security import KafkaSecuritySettings as KafkaSecuritySettings
from .kafka_security import env_alias as _env
from .topics import TopicPolicy


@dataclass(frozen=True)
class GroupTimeouts:
    """How a service's consumer group notices a replica that is gone, and so how long its partitions wait.

    A replica that stops (SIGTERM) leaves its group at once. One that is killed, or cut off, stops heartbeating
    (every ``heartbeat_interval_ms``); the broker drops it ``session_timeout_ms`` after its last heartbeat
    (no less than the broker's ``group.min.session.timeout.ms``, 6 s by default), and the group rebalances: the
    other members hear of it on their next heartbeat and join again, and the broker waits up to
    ``rebalance_timeout_ms`` for them. A replica that is alive but does not ask for messages for
    ``max_poll_interval_ms`` (a handler stuck) leaves the group too.
    """

    session_timeout_ms: int = 6_000
    heartbeat_interval_ms: int = 2_000
    rebalance_timeout_ms: int = 6_000
    max_poll_interval_ms: int = 300_000

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ValueError(
                f"the heartbeat interval ({self.heartbeat_interval_ms} ms) must be positive and shorter than the "
                f"session timeout ({self.session_timeout_ms} ms)"
            )

    @property
    def failover_bound_ms(self) -> int:
        """How long a killed replica's partitions wait at most before another member holds them (plus the join's
        few round trips): its session expires, then the others join again within the rebalance timeout. They
        usually join within a heartbeat interval."""
        return self.session_timeout_ms + self.rebalance_timeout_ms

    def consumer_kwargs(self) -> dict[str, Any]:
        """These timeouts as aiokafka's consumer (and FastStream's subscriber) takes them."""
        return {
            "session_timeout_ms": self.session_timeout_ms,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "max_poll_interval_ms": self.max_poll_interval_ms,
        }


_GROUP = GroupTimeouts()


class ServiceSettings(KafkaSecuritySettings):
    """Settings every Assent service shares. Each service subclasses it for its own."""

    model_config = SettingsConfigDict(
        env_prefix="ASSENT_", extra="ignore", frozen=True, hide_input_in_errors=True, use_attribute_docstrings=True
    )

    service_name: str = "assent"
    """The service's name: its consumer group (after the topic prefix), Kafka client id, trace and log ``service``,
    and the ``iss`` of the service credentials it signs. Each service sets its own."""
    kafka_bootstrap_servers: str = Field("127.0.0.1:9092", validation_alias=_env("KAFKA_BOOTSTRAP_SERVERS"))
    """The Kafka cluster's bootstrap servers (``host:port``, comma-separated)."""
    kafka_idempotence: bool = Field(
        True,
        validation_alias=_env("KAFKA_IDEMPOTENCE"),
        description="Idempotent producer (acks=all). Off only for brokers without InitProducerId.",
    )
    topic_prefix: str = ""
    """Put before every topic name and consumer group of the deployment (``assent_demo_1a2b3c4d.``): several
    systems can share one cluster."""
    create_topics: bool = True
    """Create the topics as the service starts (``ASSENT_CREATE_TOPICS``). Off where the operator creates them
    (``deploy/kafka``: Strimzi ``KafkaTopic`` resources, or ``create-topics.sh``) and the service may not: then a
    topic that is missing stops it with an error that names the topic."""
    topic_partitions: int | None = Field(None, ge=1)
    """Partitions of every topic created (``ASSENT_TOPIC_PARTITIONS``); None: each topic's declared count (3)."""
    topic_replication_factor: int = Field(1, ge=1)
    """Replicas of every topic created (``ASSENT_TOPIC_REPLICATION_FACTOR``): 1 suits one broker, 3 a cluster."""
    topic_min_insync_replicas: int | None = Field(None, ge=1)
    """``min.insync.replicas`` of every topic created (``ASSENT_TOPIC_MIN_INSYNC_REPLICAS``); None: the broker's."""
    topic_retention_ms: int | None = Field(None, ge=-1)
    """``retention.ms`` of every topic created (``ASSENT_TOPIC_RETENTION_MS``, -1 forever); None: the broker's
    (7 days by default). Keep the inbox's retention longer."""
    kafka_session_timeout_ms: int = _GROUP.session_timeout_ms
    """How long after a replica's last heartbeat its consumer group drops it (see :class:`GroupTimeouts`)."""
    kafka_heartbeat_interval_ms: int = _GROUP.heartbeat_interval_ms
    """How often a replica's consumer heartbeats to its group; shorter than the session timeout."""
    kafka_rebalance_timeout_ms: int = _GROUP.rebalance_timeout_ms
    """How long the broker waits for the group's members to join again in a rebalance."""
    kafka_max_poll_interval_ms: int = _GROUP.max_poll_interval_ms
    """A replica that asks for no messages this long (a handler stuck) leaves its group."""
    database_url: str = Field(
        "postgresql+asyncpg://postgres:postgres@127.0.0.1:5432/assent", validation_alias=_env("DATABASE_URL")
    )
    """The PostgreSQL database (``postgresql+asyncpg://...``); each service keeps its tables in a schema of its own."""
    redis_url: str = Field("redis://127.0.0.1:6379/0", validation_alias=_env("REDIS_URL"))
    """Redis, the gateway replicas' channel for fan-out (live events, outcomes)."""
    migrate_on_start: bool = True
    """Bring the service's tables to the newest migration as it starts (``ASSENT_MIGRATE_ON_START``). Off where a
    migration job does it with a role that may change the schema and the service's own role may not
    (``python -m <service> migrate``; the Helm chart's hook and the kustomize base's Job)."""
    otlp_endpoint: str | None = Field(
        None, validation_alias=AliasChoices("ASSENT_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    """Where spans are exported over OTLP/HTTP; unset: none are exported (the context still travels)."""
    http_host: str = "127.0.0.1"
    """The address the service's HTTP server binds."""
    http_port: int = 8000
    """The port of the service's HTTP server (its API, ``/livez``, ``/readyz``, ``/metrics``)."""
    db_pool_size: int = 10
    """Connections each replica keeps open to PostgreSQL; more requests than that wait for one."""
    db_pool_overflow: int = 0
    """Extra connections opened under a burst and closed when returned; each costs a new backend and a login."""
    outbox_poll_seconds: float = 2.0
    """How often the outbox relay sweeps for rows a process that died left behind (a live process publishes its own
    rows as it commits; the sweep is only for a dead one's, and costs a query each time, idle or not)."""
    inbox_retention_days: float = 14.0
    """How long the inbox remembers a message id; keep it longer than the topics' retention (Kafka: 7 days)."""
    http_body_timeout_seconds: float = 10.0
    """How long a request's body may take to arrive before it is answered 408 and its connection closed."""
    handler_max_attempts: int = 5
    """How often a failing handler is tried before its message goes to the dead-letter topic."""
    max_message_bytes: int = 900_000
    """The largest message a service publishes (Kafka's default limit is 1 MiB); a larger result becomes an error."""
    log_level: str = "INFO"
    """The lowest level logged (``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``)."""
    log_repeat_seconds: float = Field(60.0, ge=0)
    """After a line of a kind (logger, level, template), how long repeats of it are only counted (0: never)."""
    log_format: Literal["json", "console"] = Field("json", validation_alias=_env("LOG_FORMAT"))
    """``json``: one JSON object per line (for a log collector); ``console``: one readable line (``make run``)."""
    log_trail: bool = False
    """One log line per message handled and per HTTP request answered (``assent.trail``; see :mod:`assent.logs`)."""
    service_key: SecretStr | None = Field(
        None,
        description="The deployment's service key (ASSENT_SERVICE_KEY, at least 32 bytes): services sign and verify "
        "their internal calls with it. A comma-separated list accepts every key and signs with the first (rotation).",
    )
    service_callers: list[str] = Field(
        default_factory=lambda: ["gateway"],
        description="The services whose calls this service's internal API admits (the iss of their tokens).",
    )

    def topic_policy(self) -> TopicPolicy:
        """How the topics are created (``ASSENT_TOPIC_PARTITIONS``, ``..._REPLICATION_FACTOR``,
        ``..._MIN_INSYNC_REPLICAS``, ``..._RETENTION_MS``); refuses a ``min.insync.replicas`` above the replicas."""
        return TopicPolicy(
            partitions=self.topic_partitions,
            replication_factor=self.topic_replication_factor,
            min_insync_replicas=self.topic_min_insync_replicas,
            retention_ms=self.topic_retention_ms,
        )

    def group_timeouts(self) -> GroupTimeouts:
        """The consumer group's timeouts (``ASSENT_KAFKA_SESSION_TIMEOUT_MS``, ``..._HEARTBEAT_INTERVAL_MS``,
        ``..._REBALANCE_TIMEOUT_MS``, ``..._MAX_POLL_INTERVAL_MS``)."""
        return GroupTimeouts(
            session_timeout_ms=self.kafka_session_timeout_ms,
            heartbeat_interval_ms=self.kafka_heartbeat_interval_ms,
            rebalance_timeout_ms=self.kafka_rebalance_timeout_ms,
            max_poll_interval_ms=self.kafka_max_poll_interval_ms,
        )
