"""``make run``'s guards: the gateway's port, another process on it, refused demo calls, a fresh state."""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from assent.contracts.tool_results import ToolError, ToolResult
from assent_devstack import start_postgres, start_redis
from assent_devstack._postgres import running_postgres
from assent_devstack._service import LOWEST_PORT
from assent_devstack.run import DEFAULT_GATEWAY_PORT, RunError, _call, _discard_servers, gateway_port, main
from assent_devstack.system import ServiceProcess, free_port


@contextlib.contextmanager
def listening(port: int = 0) -> Iterator[int]:
    """A socket listening on 127.0.0.1:`port` (a free one when 0); yields the port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_gateway_port_the_user_gave_that_is_taken_is_refused_at_once() -> None:
    with listening() as port, pytest.raises(RunError, match=f"port {port} .*already in use"):
        gateway_port(str(port))


def test_free_ports_come_from_below_the_range_of_outgoing_connections_and_skip_taken_ones() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(20)]
    assert all(LOWEST_PORT <= port < low for port in ports), ports  # never an outgoing connection's local port
    with listening(ports[0]):
        taken = {free_port(exclude=(ports[1],)) for _ in range(200)}
    assert ports[0] not in taken and ports[1] not in taken


def test_a_gateway_port_the_user_gave_that_is_free_is_used() -> None:
    port = free_port()
    assert gateway_port(str(port)) == port


def test_without_a_port_given_the_gateway_moves_off_a_taken_8100(capsys: pytest.CaptureFixture[str]) -> None:
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(listening(DEFAULT_GATEWAY_PORT))
        except OSError:
            pass  # something else holds 8100 already
        port = gateway_port(None)
    assert port != DEFAULT_GATEWAY_PORT
    assert f"gateway will listen on port {port}" in capsys.readouterr().out
    with listening(port):  # it was free
        pass


def test_make_run_stops_with_a_clear_message_and_a_non_zero_exit_on_a_bad_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with listening() as port:
        assert main(["--state-dir", str(tmp_path), "--port", str(port)]) != 0
    err = capsys.readouterr().err
    assert f"port {port}" in err
    assert "already in use" in err
    assert "Traceback" not in err


@contextlib.contextmanager
def impostor(service: str) -> Iterator[int]:
    """An HTTP server on a free port that answers every GET with 200 and a ready body naming `service`."""
    body = json.dumps({"service": service, "status": "ready", "checks": {"database": "ok", "kafka": "ok"}}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("answering", ["edits", "gateway"])
def test_another_process_answering_on_the_port_is_not_taken_for_the_started_service(
    answering: str, tmp_path: Path
) -> None:
    closed = free_port()
    env = {
        # Nothing listens on these, so the gateway this test starts never becomes ready itself.
        "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{closed}",
        "DATABASE_URL": f"postgresql+asyncpg://postgres:postgres@127.0.0.1:{closed}/assent",
        "REDIS_URL": f"redis://127.0.0.1:{closed}/0",
        "ASSENT_API_TOKENS": '{"t": {"user": "u", "org": "o", "roles": ["admin"]}}',
        "ASSENT_SERVICE_KEY": secrets.token_urlsafe(48),
    }
    with impostor(answering) as port:
        gateway = ServiceProcess("gateway", port, env, tmp_path / "gateway.log")
        try:
            with pytest.raises((RuntimeError, TimeoutError)):
                gateway.start(timeout=60)
        finally:
            gateway.stop()


class RefusingTurn:
    """Stands in for a CoachTurn whose tool calls are all refused."""

    async def call(self, tool: str, arguments: dict[str, Any], **_: Any) -> ToolResult:
        return ToolResult(
            session_id="ses_1",
            seq=1,
            tool_call_id="call_1",
            tool=tool,
            ok=False,
            error=ToolError(status=404, code="agent_not_found", message="no agent 'ada' in this session's org"),
        )


async def test_a_refused_demo_call_stops_the_run_with_the_tool_error() -> None:
    with pytest.raises(RunError) as refused:
        await _call(RefusingTurn(), "studio_read_memory", {"agent_id": "ada"}, Path(".run/logs"))  # type: ignore[arg-type]
    message = str(refused.value)
    assert "studio_read_memory" in message
    assert "404 agent_not_found: no agent 'ada' in this session's org" in message


@pytest.mark.integration
def test_a_new_run_stops_and_deletes_what_the_previous_run_left(tmp_path: Path) -> None:
    servers = tmp_path / "servers"
    redis = start_redis(servers)
    postgres = start_postgres(servers)
    try:
        (servers / "pids.json").write_text(json.dumps({"redis": redis.to_dict()}))
        _discard_servers(servers)
        assert not redis.alive()
        assert not postgres.alive()
        assert running_postgres(servers) is None
        assert not servers.exists()
    finally:
        redis.stop()
        postgres.stop()


def test_no_two_services_of_a_system_are_given_one_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every port is free when chosen and bound only when its service starts; a chooser that would hand out the
    same free port twice must be told which are taken already."""
    import assent_devstack.system as system_module

    def first_free(exclude: tuple[int, ...] = ()) -> int:
        return next(port for port in range(LOWEST_PORT, LOWEST_PORT + 100) if port not in exclude)

    monkeypatch.setattr(system_module, "free_port", first_free)
    built = system_module.build_system(
        kafka_bootstrap_servers="127.0.0.1:9",
        database_url="postgresql://x@127.0.0.1:9/x",
        redis_url="redis://x",
        log_dir=tmp_path,
    )
    ports = [process.port for process in built.processes.values()]
    assert len(set(ports)) == len(ports) == len(system_module.service_list()), ports
