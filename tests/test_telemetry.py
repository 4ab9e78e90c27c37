"""Spans reach an OTLP collector when one is configured: Kafka, asyncpg and HTTP, from both services."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.conftest import running_stack, wait_for
from tests.test_memory_edits import memory, new_world, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration


class Collector:
    """A minimal OTLP/HTTP trace receiver: keeps (service, span name, trace id, attributes) of every span."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str, dict[str, Any]]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    service = next(
                        (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"),
                        "",
                    )
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            attributes = {a.key: a.value.string_value for a in span.attributes}
                            collector.spans.append((service, span.name, span.trace_id.hex(), attributes))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def collector() -> Iterator[Collector]:
    receiver = Collector()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()


async def test_spans_are_exported_over_otlp(endpoints: Any, tmp_path: Any, collector: Collector) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        # Every trace, also those the test's own HTTP requests start (the default records one in ten).
        "OTEL_TRACES_SAMPLER": "parentbased_always_on",
    }
    async with running_stack(endpoints, tmp_path, extra_env=env) as stack:
        async with stack.http() as http, stack.coach() as coach:
            world = await new_world(http)
            turn = await open_turn(coach, world)
            with trace.get_tracer("test").start_as_current_span("coach turn") as root:
                result = await propose(
                    turn, world.agent_id, "Exported.\n", (await memory(http, world.agent_id))["version"]
                )
            trace_id = format(root.get_span_context().trace_id, "032x")
            await turn.end_step()
            sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq
            await wait_pending(http, sid, 1)
            assert (
                await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
            ).status_code == 200

            def traced() -> set[tuple[str, str]] | None:
                kinds = set()
                for service, _name, span_trace, attributes in collector.spans:
                    if span_trace != trace_id:
                        continue
                    if attributes.get("messaging.system") == "kafka":
                        kinds.add((service, "kafka"))
                    if attributes.get("db.system") == "postgresql":
                        kinds.add((service, "postgresql"))
                wanted = {("edits", "kafka"), ("edits", "postgresql"), ("gateway", "kafka"), ("gateway", "postgresql")}
                return kinds if wanted <= kinds else None

            await wait_for(traced, timeout=20)
            route = "/api/studio/sessions/{session_id}/edits/{seq}"
            await wait_for(
                lambda: [s for s in collector.spans if s[0] == "gateway" and s[3].get("http.route") == route]
            )
            # The gateway's calls to the edits service's internal API are traced on both sides.
            await wait_for(lambda: [s for s in collector.spans if s[0] == "edits" and s[3].get("http.route")])
