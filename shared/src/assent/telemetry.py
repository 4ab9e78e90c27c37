"""OpenTelemetry for a service: traces across Kafka (W3C ``traceparent`` in headers), asyncpg and HTTP.

Spans are exported over OTLP/HTTP when an endpoint is configured; without one, tracing still runs so that
trace context flows through messages, but nothing is exported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

DEFAULT_SAMPLE_RATIO = 0.1
"""Of the traces that start in a service, the share recorded unless ``OTEL_TRACES_SAMPLER`` says otherwise.

A trace started by a caller that records it (a sampled ``traceparent``) is recorded whatever the ratio.
On the approval round (``make bench`` against ``--no-telemetry``, in back-to-back pairs), one in ten costs the
services 2-15% more CPU per round and the machine as a whole up to a tenth; the pairs differ about as much as
the machine's own speed does between runs. Statements, publishes and consumed messages outside a recorded trace
build no spans; trace context still flows through every message and request.
"""


def setup_telemetry(service_name: str, otlp_endpoint: str | None) -> TracerProvider:
    """Install the process's tracer provider and instrument asyncpg. Call once, from the entrypoint."""
    resource = Resource.create({"service.name": service_name})
    if os.environ.get("OTEL_TRACES_SAMPLER"):
        provider = TracerProvider(resource=resource)  # the SDK reads the sampler from the environment
    else:
        provider = TracerProvider(resource=resource, sampler=ParentBased(TraceIdRatioBased(DEFAULT_SAMPLE_RATIO)))
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint.rstrip("/") + "/v1/traces"))
        )
    trace.set_tracer_provider(provider)
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() != "true":
        # With the SDK off every span is a no-op: wrapping each statement would cost and record nothing.
        _statement_spans().instrument(tracer_provider=provider)
    return provider


def _statement_spans() -> Any:
    """asyncpg's instrumentation, making a statement's span only inside a recorded trace.

    Elsewhere (a trace not sampled, or no trace: a relay's delete) the span would record nothing, or start a
    trace of one statement, and building it (attributes from the connection, the statement's verb, the context)
    costs more than many a statement takes.
    """
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

    class RecordedOnly(AsyncPGInstrumentor):
        # Not coroutines: outside a recorded trace each hands back the statement's own awaitable, so a statement
        # costs one plain call more than an uninstrumented one, not a coroutine of its own.
        def _do_execute(self, func: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            if not trace.get_current_span().is_recording():
                return func(*args, **kwargs)
            return super()._do_execute(func, instance, args, kwargs)  # type: ignore[no-untyped-call]  # the instrumentor's own method, unannotated

        def _do_cursor_execute(self, func: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            if not trace.get_current_span().is_recording():
                return func(*args, **kwargs)
            return super()._do_cursor_execute(func, instance, args, kwargs)  # type: ignore[no-untyped-call]  # as above

        def _do_prepared_execute(self, func: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            if not trace.get_current_span().is_recording():
                return func(*args, **kwargs)
            return super()._do_prepared_execute(func, instance, args, kwargs)  # type: ignore[no-untyped-call]  # as above

    return RecordedOnly()  # type: ignore[no-untyped-call]  # its constructor is the instrumentor's, unannotated


def current_carrier() -> dict[str, str]:
    """The current trace context as message headers (``traceparent``, ``tracestate``)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def attach_carrier(carrier: Mapping[str, str] | None) -> object:
    """Make the trace context in ``carrier`` current; pass the result to :func:`detach`."""
    return otel_context.attach(propagate.extract(dict(carrier or {})))


def detach(token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]  # the token attach returned, typed loosely by OpenTelemetry


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id inside a W3C ``traceparent`` header, or None."""
    if not traceparent:
        return None
    parts = traceparent.split("-")
    return parts[1] if len(parts) == 4 else None
