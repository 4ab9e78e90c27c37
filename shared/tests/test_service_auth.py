"""Service credentials: what an owner accepts from a calling service, and what it refuses. No servers needed."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import jwt
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from assent.service_auth import (
    MIN_KEY_BYTES,
    InvalidServiceToken,
    ServiceKeyError,
    ServiceSigner,
    ServiceVerifier,
    service_keys,
)
from assent.settings import ServiceSettings

KEY = "k" * 20 + "-the-deployment-key-0123456789"
OTHER_KEY = "o" * 20 + "-another-deployment-key-987654"


def verifier(key: str = KEY) -> ServiceVerifier:
    return ServiceVerifier("edits", key, ["gateway"])


def test_a_token_from_an_admitted_caller_for_this_service_is_accepted() -> None:
    token = ServiceSigner("gateway", KEY).token("edits")
    assert verifier().verify(token) == "gateway"
    assert verifier().verify_header(f"Bearer {token}") == "gateway"
    claims = jwt.decode(token, KEY, algorithms=["HS256"], audience="edits")
    assert claims["iss"] == "gateway" and claims["aud"] == "edits" and claims["jti"]
    assert 50 <= claims["exp"] - claims["iat"] <= 70


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (lambda: ServiceSigner("gateway", OTHER_KEY).token("edits"), "signature"),
        (lambda: ServiceSigner("gateway", KEY).token("billing"), "another service"),
        (lambda: ServiceSigner("stranger", KEY).token("edits"), "does not admit"),
        (lambda: ServiceSigner("gateway", KEY, clock=lambda: time.time() - 600).token("edits"), "expired"),
        (lambda: "not-a-token", "malformed"),
        (lambda: jwt.encode({"iss": "gateway", "aud": "edits"}, KEY, algorithm="HS256"), "malformed"),
        (
            lambda: jwt.encode(
                {"iss": "gateway", "aud": "edits", "exp": 2**40, "iat": 1, "jti": "j"}, None, algorithm="none"
            ),
            "malformed",
        ),
        (lambda: "", "required"),
    ],
    ids=["wrong-key", "wrong-aud", "unknown-iss", "expired", "garbage", "missing-claims", "alg-none", "missing"],
)
def test_anything_else_is_refused_without_a_hint_of_the_key(token: object, why: str) -> None:
    given = token()  # type: ignore[operator]
    with pytest.raises(InvalidServiceToken) as refused:
        verifier().verify(given)
    assert why in str(refused.value)
    assert KEY not in str(refused.value) and (not given or given not in str(refused.value))


def test_a_long_lived_token_is_refused_even_when_signed_with_the_key() -> None:
    now = int(time.time())
    claims = {"iss": "gateway", "aud": "edits", "iat": now, "exp": now + 86400, "jti": "j"}
    with pytest.raises(InvalidServiceToken, match="too long"):
        verifier().verify(jwt.encode(claims, KEY, algorithm="HS256"))


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", "Basic Zm9vOmJhcg==", "token"])
def test_a_missing_or_malformed_authorization_header_is_refused(header: str | None) -> None:
    with pytest.raises(InvalidServiceToken, match="required"):
        verifier().verify_header(header)


def test_tokens_are_cached_and_renewed_before_they_expire() -> None:
    now = [1_000_000.0]
    signer = ServiceSigner("gateway", KEY, clock=lambda: now[0])
    first = signer.token("edits")
    now[0] += 30
    assert signer.token("edits") == first
    assert signer.token("other") != first
    now[0] += 15  # 15 s left of 60: renewed
    assert signer.token("edits") != first


def test_rotation_signs_with_the_first_key_and_accepts_every_listed_one() -> None:
    both = f"{OTHER_KEY},{KEY}"
    new_token = ServiceSigner("gateway", both).token("edits")
    old_token = ServiceSigner("gateway", KEY).token("edits")
    assert verifier(both).verify(new_token) == "gateway"
    assert verifier(both).verify(old_token) == "gateway"
    with pytest.raises(InvalidServiceToken):
        verifier(KEY).verify(new_token)  # signed with OTHER_KEY, the first


def test_a_missing_or_short_key_is_refused_naming_the_variable_but_not_the_value() -> None:
    with pytest.raises(ServiceKeyError, match="ASSENT_SERVICE_KEY is not set"):
        service_keys(None)
    with pytest.raises(ServiceKeyError, match="ASSENT_SERVICE_KEY is not set"):
        service_keys(" ")
    short = "s3cr3t-but-short"
    with pytest.raises(ServiceKeyError) as refused:
        service_keys(short)
    assert "ASSENT_SERVICE_KEY" in str(refused.value) and short not in str(refused.value)
    with pytest.raises(ServiceKeyError, match="key 2 of 2") as refused:
        service_keys(f"{KEY},{short}")
    assert short not in str(refused.value) and KEY not in str(refused.value)
    assert len(service_keys("x" * MIN_KEY_BYTES)) == 1


def test_the_key_never_appears_in_the_settings_repr_or_a_signer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSENT_SERVICE_KEY", KEY)
    settings = ServiceSettings()
    assert settings.service_key is not None and settings.service_key.get_secret_value() == KEY
    for text in (repr(settings), str(settings), settings.model_dump_json(), repr(ServiceSigner("g", KEY))):
        assert KEY not in text
    assert KEY not in repr(verifier())


def _runtime(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, key: str | None) -> object:
    from assent.runtime import ServiceRuntime, service
    from assent.runtime.service import service_metadata

    # A provider of the test's own: the global one is the integration tier's to set.
    monkeypatch.setattr(service, "setup_telemetry", lambda *_: TracerProvider())
    if key is None:
        monkeypatch.delenv("ASSENT_SERVICE_KEY", raising=False)
    else:
        monkeypatch.setenv("ASSENT_SERVICE_KEY", key)
    settings = ServiceSettings(service_name="edits")
    _, tables = service_metadata("edits")
    return ServiceRuntime(settings, tables=tables, migrations=tmp_path, schema="edits")


def test_a_service_refuses_to_start_without_the_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ServiceKeyError, match="ASSENT_SERVICE_KEY is not set"):
        _runtime(monkeypatch, tmp_path, None)


async def test_internal_routes_answer_401_without_a_credential_and_probes_stay_open(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from assent.runtime import ServiceRuntime

    runtime = _runtime(monkeypatch, tmp_path, KEY)
    assert isinstance(runtime, ServiceRuntime)
    exporter = InMemorySpanExporter()
    provider = runtime.provider
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    router = runtime.internal_router()

    @router.get("/ping")
    async def ping() -> dict[str, str]:
        return {"pong": "yes"}

    app = runtime.app(title="t")
    app.include_router(router)
    token = ServiceSigner("gateway", KEY).token("edits")
    # No lifespan: nothing connects.
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edits") as client:
        answer = await client.get("/internal/ping", headers={"Authorization": f"Bearer {token}"})
        assert answer.json() == {"pong": "yes"}
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Bearer {token}x"}):
            refused = await client.get("/internal/ping", headers=headers)
            assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
            assert set(refused.json()) == {"detail"} and KEY not in refused.text and token not in refused.text
        assert (await client.get("/livez")).status_code == 200
        assert (await client.get("/metrics")).status_code == 200
        # The internal API's document is the internal API's: behind the credential, and no page to browse.
        for page in ("/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"):
            assert (await client.get(page)).status_code == 404, page
        assert (await client.get("/internal/openapi.json")).status_code == 401
        schema = (await client.get("/internal/openapi.json", headers={"Authorization": f"Bearer {token}"})).text
    assert "/internal/ping" in schema and KEY not in schema and token not in schema
    provider.force_flush()
    attributes = [str(value) for span in exporter.get_finished_spans() for value in (span.attributes or {}).values()]
    assert attributes and not [value for value in attributes if token in value or KEY in value]


async def test_requests_get_a_server_span_and_probes_and_scrapes_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from assent.runtime import ServiceRuntime

    runtime = _runtime(monkeypatch, tmp_path, KEY)
    assert isinstance(runtime, ServiceRuntime)
    exporter = InMemorySpanExporter()
    provider = runtime.provider
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    router = runtime.internal_router()

    @router.get("/ping")
    async def ping() -> dict[str, str]:
        return {"pong": "yes"}

    app = runtime.app(title="t")
    app.include_router(router)
    token = ServiceSigner("gateway", KEY).token("edits")
    sampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # a caller that records its trace
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edits") as client:
        for path in ("/livez", "/metrics", "/internal/ping", "/readyz"):
            headers = {"traceparent": sampled, "Authorization": f"Bearer {token}"}
            if path == "/readyz":
                runtime.readiness = _never_ready  # type: ignore[method-assign]  # no servers: answer at once
            await client.get(path, headers=headers)
    provider.force_flush()
    routes = [(span.attributes or {}).get("http.route") for span in exporter.get_finished_spans()]
    assert routes == ["/internal/ping"]
    [span] = exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") == sampled.split("-")[1]  # the caller's trace goes on


async def _never_ready(timeout: float = 2.0) -> dict[str, bool]:
    return {"database": False, "kafka": False}
