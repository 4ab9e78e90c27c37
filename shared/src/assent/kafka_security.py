"""How Assent's Kafka clients authenticate and encrypt: one model, read from the same variables everywhere.

==========================  ===========================================================================
``KAFKA_SECURITY_PROTOCOL``  ``PLAINTEXT`` (default), ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``
``KAFKA_SASL_MECHANISM``     ``SCRAM-SHA-512`` (default), ``SCRAM-SHA-256`` or ``PLAIN``
``KAFKA_SASL_USERNAME``      the SASL user (``SASL_*`` protocols only)
``KAFKA_SASL_PASSWORD``      its password; kept as a ``SecretStr``, never logged, printed or put in an error
``KAFKA_SSL_CAFILE``         PEM file of the CA that signed the brokers' certificates (``SSL``/``SASL_SSL``)
``KAFKA_SSL_CERTFILE``       PEM client certificate, for brokers that require one (mutual TLS)
``KAFKA_SSL_KEYFILE``        PEM private key of that certificate
==========================  ===========================================================================

Each is also accepted with the ``ASSENT_`` prefix. Services read them through
:class:`assent.settings.ServiceSettings`, the coach through :meth:`KafkaSecurity.from_env` (or keyword
arguments). :meth:`KafkaSecurity.client_kwargs` is the one place that maps them to aiokafka's arguments;
FastStream's ``security=`` object (:meth:`KafkaSecurity.faststream`) is built from the same mapping.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]


class KafkaAuthenticationError(RuntimeError):
    """The broker refused the client's SASL credentials. The message names the user, never the password."""


class KafkaSecurity(BaseModel):
    """A Kafka client's security settings. The default is PLAINTEXT: no TLS, no SASL."""

    # hide_input: a validation error must not echo a password given as a plain string.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    @field_validator("sasl_username", "ssl_cafile", "ssl_certfile", "ssl_keyfile", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("sasl_password", mode="before")
    @classmethod
    def _empty_password_is_unset(cls, value: Any) -> Any:
        if isinstance(value, SecretStr) and value.get_secret_value() == "":
            return None
        return None if value == "" else value

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSecurity:
        if self.uses_sasl:
            missing = [
                name
                for name, value in (
                    ("KAFKA_SASL_USERNAME", self.sasl_username),
                    ("KAFKA_SASL_PASSWORD", self.sasl_password),
                )
                if value is None
            ]
            if missing:
                raise ValueError(f"KAFKA_SECURITY_PROTOCOL={self.protocol} needs {' and '.join(missing)}")
        elif self.sasl_username is not None or self.sasl_password is not None:
            raise ValueError(
                f"KAFKA_SASL_USERNAME/KAFKA_SASL_PASSWORD are set but KAFKA_SECURITY_PROTOCOL={self.protocol} "
                "does not use SASL; set it to SASL_PLAINTEXT or SASL_SSL"
            )
        if not self.uses_ssl and any((self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile)):
            raise ValueError(
                f"KAFKA_SSL_* files are set but KAFKA_SECURITY_PROTOCOL={self.protocol} does not use TLS; "
                "set it to SSL or SASL_SSL"
            )
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            raise ValueError("KAFKA_SSL_KEYFILE is set without KAFKA_SSL_CERTFILE")
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KafkaSecurity:
        """The settings from ``KAFKA_*`` (or ``ASSENT_KAFKA_*``) variables of ``environ`` (default: the process's)."""
        if environ is None:
            return KafkaSecuritySettings().kafka_security()
        # pydantic-settings reads os.environ only; a given mapping goes in as init values, by alias.
        fields = KafkaSecuritySettings.model_fields
        values: dict[str, Any] = {}
        for name, info in fields.items():
            aliases = getattr(info.validation_alias, "choices", ())
            for alias in aliases:
                if alias in environ:
                    values[name] = environ[alias]
                    break
        return KafkaSecuritySettings.model_validate(values).kafka_security()

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def describe(self) -> str:
        """A line for logs and error messages: protocol, mechanism and user; never the password."""
        if self.uses_sasl:
            return f"{self.protocol} {self.sasl_mechanism} as {self.sasl_username!r}"
        return self.protocol

    def ssl_context(self) -> Any:
        """The TLS context for the ``SSL`` protocols (system CAs unless ``ssl_cafile``), else None."""
        if not self.uses_ssl:
            return None
        from aiokafka.helpers import create_ssl_context

        return create_ssl_context(cafile=self.ssl_cafile, certfile=self.ssl_certfile, keyfile=self.ssl_keyfile)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for aiokafka's producer, consumer and admin client."""
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        if self.uses_ssl:
            kwargs["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            assert self.sasl_password is not None  # checked by the validator
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = self.sasl_password.get_secret_value()
        return kwargs

    def faststream(self) -> Any:
        """FastStream's ``security=`` object for a ``KafkaBroker`` (None for PLAINTEXT)."""
        from faststream.security import BaseSecurity, SASLPlaintext, SASLScram256, SASLScram512

        if self.protocol == "PLAINTEXT":
            return None
        kwargs = self.client_kwargs()
        ssl_context = kwargs.get("ssl_context")
        if not self.uses_sasl:
            return BaseSecurity(ssl_context=ssl_context, use_ssl=True)
        sasl = {"PLAIN": SASLPlaintext, "SCRAM-SHA-256": SASLScram256, "SCRAM-SHA-512": SASLScram512}
        return sasl[self.sasl_mechanism](
            kwargs["sasl_plain_username"], kwargs["sasl_plain_password"], ssl_context=ssl_context, use_ssl=self.uses_ssl
        )


def kafka_kwargs(security: KafkaSecurity | None) -> dict[str, Any]:
    """``security.client_kwargs()``, or nothing for no security given (aiokafka's PLAINTEXT default)."""
    return security.client_kwargs() if security is not None else {}


@contextlib.asynccontextmanager
async def explain_auth_failure(security: KafkaSecurity | None, bootstrap_servers: str) -> AsyncIterator[None]:
    """Turn a refused login into a :class:`KafkaAuthenticationError` that says which user failed where.

    aiokafka reports refused SASL credentials at bootstrap only as ``KafkaConnectionError("Unable to
    bootstrap ...")`` (the ``SaslAuthenticationFailed`` goes to its log), so on that error this opens one
    connection itself to learn whether the broker refused the credentials. The broker's reason is kept;
    the password never appears.
    """
    try:
        yield
    except SaslAuthenticationFailed as e:
        raise _auth_error(security, bootstrap_servers, e) from e
    except KafkaConnectionError as e:
        if security is None or not security.uses_sasl:
            raise
        refused = await _refused_login(security, bootstrap_servers)
        if refused is None:
            raise
        raise _auth_error(security, bootstrap_servers, refused) from e


async def _refused_login(security: KafkaSecurity, bootstrap_servers: str) -> SaslAuthenticationFailed | None:
    """The broker's refusal of ``security``'s credentials, if one of ``bootstrap_servers`` refuses them."""
    from aiokafka.conn import create_conn

    kwargs = security.client_kwargs()
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            continue
        try:
            conn = await create_conn(host.strip("[]"), int(port), request_timeout_ms=5000, **kwargs)
        except SaslAuthenticationFailed as e:
            return e
        except Exception:
            continue
        conn.close()
    return None


def _auth_error(security: KafkaSecurity | None, bootstrap_servers: str, cause: Exception) -> KafkaAuthenticationError:
    how = security.describe() if security is not None else "PLAINTEXT"
    reason = str(cause)
    if security is not None and security.sasl_password is not None:
        reason = reason.replace(security.sasl_password.get_secret_value(), "**********")
    return KafkaAuthenticationError(
        f"Kafka authentication failed at {bootstrap_servers} ({how}): check KAFKA_SASL_USERNAME and "
        f"KAFKA_SASL_PASSWORD. The broker said: {reason}"
    )


def env_alias(name: str) -> AliasChoices:
    """Accept both ``ASSENT_<NAME>`` and the conventional bare ``<NAME>``."""
    return AliasChoices(f"ASSENT_{name}", name)


class KafkaSecuritySettings(BaseSettings):
    """The Kafka security variables (see :mod:`assent.kafka_security`); services and the coach read the same.

    A field's description is its docstring (``use_attribute_docstrings``): the settings reference of the
    documentation site is generated from these classes."""

    model_config = SettingsConfigDict(
        env_prefix="ASSENT_", extra="ignore", frozen=True, hide_input_in_errors=True, use_attribute_docstrings=True
    )

    kafka_security_protocol: SecurityProtocol = Field(
        "PLAINTEXT", validation_alias=env_alias("KAFKA_SECURITY_PROTOCOL")
    )
    """How the Kafka clients connect: ``PLAINTEXT`` (no TLS, no SASL), ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``."""
    kafka_sasl_mechanism: SaslMechanism = Field("SCRAM-SHA-512", validation_alias=env_alias("KAFKA_SASL_MECHANISM"))
    """The SASL mechanism (``SASL_*`` protocols): ``SCRAM-SHA-512``, ``SCRAM-SHA-256`` or ``PLAIN``."""
    kafka_sasl_username: str | None = Field(None, validation_alias=env_alias("KAFKA_SASL_USERNAME"))
    """The SASL user (``SASL_*`` protocols only)."""
    kafka_sasl_password: SecretStr | None = Field(None, validation_alias=env_alias("KAFKA_SASL_PASSWORD"))
    """The SASL user's password: held as a secret, never logged, printed or put in an error."""
    kafka_ssl_cafile: str | None = Field(None, validation_alias=env_alias("KAFKA_SSL_CAFILE"))
    """PEM file of the CA that signed the brokers' certificates (``SSL``, ``SASL_SSL``); unset: the system's CAs."""
    kafka_ssl_certfile: str | None = Field(None, validation_alias=env_alias("KAFKA_SSL_CERTFILE"))
    """PEM client certificate, for brokers that require one (mutual TLS)."""
    kafka_ssl_keyfile: str | None = Field(None, validation_alias=env_alias("KAFKA_SSL_KEYFILE"))
    """PEM private key of the client certificate."""

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
