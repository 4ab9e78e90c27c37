"""The request guard's server span: complete when the trace is recorded, only the trace's context when it is not,
none for an untraced path."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

from assent.http import install_guards

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def build(sampler: Any = None) -> tuple[FastAPI, InMemorySpanExporter, list[trace.SpanContext]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = FastAPI(telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False})
    install_guards(app, tracer_provider=provider, untraced={"/livez"})
    seen: list[trace.SpanContext] = []

    @app.get("/things/{thing_id}")
    async def thing(thing_id: str) -> dict[str, str]:
        seen.append(trace.get_current_span().get_span_context())
        return {"thing_id": thing_id}

    @app.get("/livez")
    async def livez() -> dict[str, str]:
        seen.append(trace.get_current_span().get_span_context())
        return {"status": "live"}

    @app.get("/broken")
    async def broken() -> None:
        raise RuntimeError("bug")

    return app, exporter, seen


def client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://test")


async def test_a_recorded_request_has_its_server_span_with_route_status_and_the_callers_trace() -> None:
    app, exporter, seen = build()
    async with client(app) as http:
        headers = {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"}
        assert (await http.get("/things/7?x=1", headers=headers)).status_code == 200
        assert (await http.get("/broken")).status_code == 500
    ok, failed = exporter.get_finished_spans()
    assert ok.name == "GET /things/{thing_id}"
    assert ok.kind == trace.SpanKind.SERVER
    assert format(ok.context.trace_id, "032x") == TRACE_ID
    assert ok.parent is not None and format(ok.parent.span_id, "016x") == "00f067aa0ba902b7"
    assert seen[0].span_id == ok.context.span_id  # current while the route ran
    assert ok.attributes is not None and {
        k: ok.attributes.get(k)
        for k in ("http.request.method", "url.path", "url.query", "http.route", "http.response.status_code")
    } == {
        "http.request.method": "GET",
        "url.path": "/things/7",
        "url.query": "x=1",
        "http.route": "/things/{thing_id}",
        "http.response.status_code": 200,
    }
    assert failed.name == "GET /broken"
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert failed.attributes is not None and failed.attributes.get("error.type") == "RuntimeError"


async def test_a_request_in_a_trace_not_recorded_carries_the_trace_on_and_records_nothing() -> None:
    app, exporter, seen = build()
    async with client(app) as http:
        headers = {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-00"}
        assert (await http.get("/things/7", headers=headers)).status_code == 200
    assert exporter.get_finished_spans() == ()
    assert format(seen[0].trace_id, "032x") == TRACE_ID
    assert not seen[0].trace_flags.sampled


async def test_a_request_that_starts_a_trace_not_sampled_carries_a_context_and_records_nothing() -> None:
    app, exporter, seen = build(ParentBased(ALWAYS_OFF))
    async with client(app) as http:
        assert (await http.get("/things/7")).status_code == 200
    assert exporter.get_finished_spans() == ()
    assert seen[0].is_valid and not seen[0].trace_flags.sampled


async def test_an_untraced_path_opens_no_span() -> None:
    app, exporter, seen = build()
    async with client(app) as http:
        assert (await http.get("/livez")).status_code == 200
    assert exporter.get_finished_spans() == ()
    assert not seen[0].is_valid
