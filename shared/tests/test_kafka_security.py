"""The Kafka security settings: the same variables for services and coach, one mapping to aiokafka and
FastStream, and no password in a repr, a log line or an error."""

from __future__ import annotations

import ssl

import pytest
from faststream.security import BaseSecurity, SASLPlaintext, SASLScram256, SASLScram512
from pydantic import ValidationError

from assent.kafka_security import KafkaSecurity
from assent.messaging import make_broker
from assent.settings import ServiceSettings

PASSWORD = "pw-5e1f0a9b"
SASL = {
    "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "KAFKA_SASL_USERNAME": "coach",
    "KAFKA_SASL_PASSWORD": PASSWORD,
}


def test_default_is_plaintext() -> None:
    assert KafkaSecurity().client_kwargs() == {"security_protocol": "PLAINTEXT"}
    assert KafkaSecurity().faststream() is None
    assert KafkaSecurity.from_env({}) == KafkaSecurity()


def test_services_and_coach_read_the_same_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SASL.items():
        monkeypatch.setenv(name, value)
    from_env = KafkaSecurity.from_env()
    assert from_env == ServiceSettings().kafka_security() == KafkaSecurity.from_env(SASL)
    assert from_env.client_kwargs() == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "coach",
        "sasl_plain_password": PASSWORD,
    }
    prefixed = {f"ASSENT_{k}": v for k, v in SASL.items()}
    assert KafkaSecurity.from_env(prefixed) == from_env


def test_no_password_in_reprs() -> None:
    security = KafkaSecurity.from_env(SASL)
    for text in (repr(security), str(security), security.describe(), repr(ServiceSettings.model_validate(SASL))):
        assert PASSWORD not in text


def test_errors_name_the_variable_not_the_password() -> None:
    with pytest.raises(ValidationError) as missing:
        KafkaSecurity.from_env({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_USERNAME": "u"})
    assert "KAFKA_SASL_PASSWORD" in str(missing.value)
    with pytest.raises(ValidationError) as stray:
        KafkaSecurity(protocol="PLAINTEXT", sasl_username="u", sasl_password=PASSWORD)  # type: ignore[arg-type]
    assert "KAFKA_SECURITY_PROTOCOL" in str(stray.value) and PASSWORD not in str(stray.value)
    with pytest.raises(ValidationError):
        KafkaSecurity.from_env({"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "GSSAPI"})


@pytest.mark.parametrize(
    ("mechanism", "kind"), [("SCRAM-SHA-512", SASLScram512), ("SCRAM-SHA-256", SASLScram256), ("PLAIN", SASLPlaintext)]
)
def test_faststream_security(mechanism: str, kind: type) -> None:
    plain = KafkaSecurity.from_env({**SASL, "KAFKA_SASL_MECHANISM": mechanism})
    security = plain.faststream()
    assert type(security) is kind and not security.use_ssl
    assert (security.username, security.password) == ("coach", PASSWORD)
    tls = KafkaSecurity.from_env({**SASL, "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": mechanism})
    assert tls.faststream().use_ssl and isinstance(tls.faststream().ssl_context, ssl.SSLContext)


def test_ssl_only() -> None:
    security = KafkaSecurity.from_env({"KAFKA_SECURITY_PROTOCOL": "SSL"})
    kwargs = security.client_kwargs()
    assert kwargs["security_protocol"] == "SSL" and isinstance(kwargs["ssl_context"], ssl.SSLContext)
    assert "sasl_mechanism" not in kwargs
    fast = security.faststream()
    assert type(fast) is BaseSecurity and fast.use_ssl
    with pytest.raises(ValidationError):
        KafkaSecurity.from_env({"KAFKA_SSL_CAFILE": "/ca.pem"})  # TLS files without a TLS protocol


def test_broker_takes_the_security() -> None:
    broker = make_broker("127.0.0.1:9", client_id="t", idempotent=False, security=KafkaSecurity.from_env(SASL))
    kwargs = broker._connection_kwargs  # what FastStream hands to aiokafka (its producer, consumers, admin)
    assert kwargs["security_protocol"] == "SASL_PLAINTEXT" and kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == ("coach", PASSWORD)
