"""Process settings, read from the environment once, in the entrypoint, and passed down."""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from .kafka_security import KafkaSecurity, SaslMechanism, SecurityProtocol


def _env(name: str) -> AliasChoices:
    """Accept both ``ASSENT_<NAME>`` and the conventional bare ``<NAME>``."""
    return AliasChoices(f"ASSENT_{name}", name)


class KafkaSecuritySettings(BaseSettings):
    """The Kafka security variables (see :mod:`assent.kafka_security`); services and the coach read the same."""

    model_config = SettingsConfigDict(env_prefix="ASSENT_", extra="ignore", frozen=True, hide_input_in_errors=True)

    kafka_security_protocol: SecurityProtocol = Field("PLAINTEXT", validation_alias=_env("KAFKA_SECURITY_PROTOCOL"))
    kafka_sasl_mechanism: SaslMechanism = Field("SCRAM-SHA-512", validation_alias=_env("KAFKA_SASL_MECHANISM"))
    kafka_sasl_username: str | None = Field(None, validation_alias=_env("KAFKA_SASL_USERNAME"))
    kafka_sasl_password: SecretStr | None = Field(None, validation_alias=_env("KAFKA_SASL_PASSWORD"))
    kafka_ssl_cafile: str | None = Field(None, validation_alias=_env("KAFKA_SSL_CAFILE"))
    kafka_ssl_certfile: str | None = Field(None, validation_alias=_env("KAFKA_SSL_CERTFILE"))
    kafka_ssl_keyfile: str | None = Field(None, validation_alias=_env("KAFKA_SSL_KEYFILE"))

    def kafka_security(self) -> KafkaSecurity:
        """These settings as the model every Kafka client of Assent takes."""
        return KafkaSecurity(
            protocol=self.kafka_security_protocol,
            sasl_mechanism=self.kafka_sasl_mechanism,
            sasl_username=self.kafka_sasl_username,
            sasl_password=self.kafka_sasl_password,
            ssl_cafile=self.kafka_ssl_cafile,
            ssl_certfile=self.kafka_ssl_certfile,
            ssl_keyfile=self.kafka_ssl_keyfile,
        )


class ServiceSettings(KafkaSecuritySettings):
    """Settings every Assent service shares. Each service subclasses it for its own."""

    model_config = SettingsConfigDict(env_prefix="ASSENT_", extra="ignore", frozen=True, hide_input_in_errors=True)

    service_name: str = "assent"
    kafka_bootstrap_servers: str = Field("127.0.0.1:9092", validation_alias=_env("KAFKA_BOOTSTRAP_SERVERS"))
    kafka_idempotence: bool = Field(
        True,
        validation_alias=_env("KAFKA_IDEMPOTENCE"),
        description="Idempotent producer (acks=all). Off only for brokers without InitProducerId.",
    )
    topic_prefix: str = ""
    database_url: str = Field(
        "postgresql+asyncpg://postgres:postgres@127.0.0.1:5432/assent", validation_alias=_env("DATABASE_URL")
    )
    redis_url: str = Field("redis://127.0.0.1:6379/0", validation_alias=_env("REDIS_URL"))
    otlp_endpoint: str | None = Field(
        None, validation_alias=AliasChoices("ASSENT_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    http_host: str = "127.0.0.1"
    http_port: int = 8000
    db_pool_size: int = 10
    """Connections each replica keeps open to PostgreSQL."""
    db_pool_overflow: int = 0
    """Extra connections opened under a burst and closed when returned; each costs a new backend and a login."""
    outbox_poll_seconds: float = 0.5
    inbox_retention_days: float = 14.0
    """How long the inbox remembers a message id; keep it longer than the topics' retention (Kafka: 7 days)."""
    http_body_timeout_seconds: float = 10.0
    """How long a request's body may take to arrive before it is answered 408 and its connection closed."""
    handler_max_attempts: int = 5
    """How often a failing handler is tried before its message goes to the dead-letter topic."""
    max_message_bytes: int = 900_000
    """The largest message a service publishes (Kafka's default limit is 1 MiB); a larger result becomes an error."""
    log_level: str = "INFO"
    service_key: SecretStr | None = Field(
        None,
        description="The deployment's service key (ASSENT_SERVICE_KEY, at least 32 bytes): services sign and verify "
        "their internal calls with it. A comma-separated list accepts every key and signs with the first (rotation).",
    )
    service_callers: list[str] = Field(
        default_factory=lambda: ["gateway"],
        description="The services whose calls this service's internal API admits (the iss of their tokens).",
    )
