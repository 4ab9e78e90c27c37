"""The gateway presents its own service credential to every owner, and its traces never record it."""

from __future__ import annotations

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from assent.service_auth import ServiceSigner, ServiceVerifier
from gateway.adapters.owners import Owners, OwnerUnavailable

KEY = "gateway-test-key-" + "0123456789abcdef" * 2


async def test_every_call_carries_a_token_for_that_owner_and_no_span_attribute_holds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The instrumentation's defaults: no header capture configured.
    monkeypatch.delenv("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST", raising=False)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE", raising=False)
    edits = ServiceVerifier("edits", KEY, ["gateway"])
    seen: list[str] = []

    def owner(request: httpx.Request) -> httpx.Response:
        authorization = request.headers.get("authorization", "")
        seen.append(authorization.removeprefix("Bearer "))
        edits.verify_header(authorization)  # raises on a bad one
        return httpx.Response(200, json={"ok": True})

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    owners = Owners(
        {"edits": "http://edits.test"},
        ServiceSigner("gateway", KEY),
        tracer_provider=provider,
        transport=httpx.MockTransport(owner),
    )
    try:
        for path in ("/internal/agents/a", "/internal/orgs"):
            assert (await owners.call("edits", "GET", path)).status == 200
    finally:
        await owners.close()
    assert len(seen) == 2 and all(seen)
    spans = exporter.get_finished_spans()
    assert spans, "the owner calls are traced"
    attributes = {f"{k}={v}" for span in spans for k, v in (span.attributes or {}).items()}
    assert not [a for a in attributes if "authorization" in a.lower() or any(t in a for t in seen) or KEY in a]


async def test_an_owner_refusing_the_credential_is_the_deployment_s_fault_not_the_user_s() -> None:
    owners = Owners(
        {"edits": "http://edits.test"},
        ServiceSigner("gateway", KEY),
        transport=httpx.MockTransport(lambda _: httpx.Response(401, json={"detail": "refused"})),
    )
    try:
        with pytest.raises(OwnerUnavailable, match="ASSENT_SERVICE_KEY") as refused:
            await owners.call("edits", "GET", "/internal/agents/a")
        assert KEY not in str(refused.value)
    finally:
        await owners.close()


def _refused(_: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused")


@pytest.mark.parametrize(
    ("answer", "retry"),
    [
        (lambda _: httpx.Response(503, json={"detail": "the database is unavailable", "retry": True}), True),
        (_refused, True),
        (lambda _: httpx.Response(503, json={"detail": "draining"}), False),
        (lambda _: httpx.Response(500, json={"detail": "a bug", "error_id": "e"}), False),
    ],
)
async def test_an_owner_that_asks_to_be_tried_again_or_does_not_answer_is_retryable(
    answer: object, retry: bool
) -> None:
    """What the gateway's 503 tells the client: ``retry`` where trying again shortly may succeed."""
    owners = Owners(
        {"edits": "http://edits.test"}, ServiceSigner("gateway", KEY), transport=httpx.MockTransport(answer)
    )
    try:
        with pytest.raises(OwnerUnavailable) as failed:
            await owners.call("edits", "GET", "/internal/orgs")
    finally:
        await owners.close()
    assert failed.value.retry is retry
