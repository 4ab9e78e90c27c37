"""A small real MCP server (the official MCP SDK, streamable HTTP) for ``make run`` and the tests: an order desk with
a read tool (``list_orders``, marked ``readOnlyHint``) and a write tool (``refund_order``).

``python -m assent_devstack.mcp_demo --port 8931`` serves it at ``http://127.0.0.1:8931/mcp``;
:func:`start_mcp_server` starts it (or another module's server with the same command line) as a process tied to the
caller, as every process of the devstack is: it ends when the caller ends, however the caller ends.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from ._probes import port_open
from ._progress import StartWatch
from ._service import DevstackError, start_tied, tail

ORDERS: dict[str, list[dict[str, object]]] = {
    "c-1001": [
        {"order_id": "A-5512", "item": "Espresso machine", "total_eur": 249.0, "status": "delivered"},
        {"order_id": "A-5530", "item": "Milk frother", "total_eur": 39.5, "status": "refund requested"},
    ],
    "c-1002": [{"order_id": "A-5541", "item": "Grinder", "total_eur": 129.0, "status": "in transit"}],
}
"""The demo's orders, by customer."""


def demo_server(name: str = "Acme order desk") -> MCPServer:
    """The order desk: ``list_orders`` reads, ``refund_order`` writes (it refunds nothing real)."""
    server = MCPServer(name, log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def list_orders(customer: str) -> str:
        """A customer's orders: id, item, total and status, one a line."""
        orders = ORDERS.get(customer, [])
        if not orders:
            return f"no orders for customer {customer}"
        return "\n".join(f"{o['order_id']}: {o['item']}, {o['total_eur']} EUR, {o['status']}" for o in orders)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
    def refund_order(order_id: str, amount_eur: float) -> str:
        """Refund an amount of an order to the customer."""
        return f"refunded {amount_eur} EUR of order {order_id}"

    return server


@dataclass
class McpServerProcess:
    """An MCP server process on ``port`` (``url`` is its streamable HTTP endpoint), tied to this process."""

    module: str
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, timeout: float | None = None) -> McpServerProcess:
        """Start the server and wait until it listens (:meth:`launch`, then :meth:`wait_listening`)."""
        self.launch()
        return self.wait_listening(timeout)

    def launch(self) -> McpServerProcess:
        """Start the server without waiting for it."""
        with self.log_path.open("ab") as log:
            self.process = start_tied(
                [sys.executable, "-m", self.module, "--port", str(self.port)],
                death_signal=signal.SIGTERM,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_listening(self, timeout: float | None = None) -> McpServerProcess:
        """Wait until the launched server listens, for as long as it makes progress (``timeout`` overrides
        ``ASSENT_START_TIMEOUT_SECONDS``); DevstackError with its log tail when it exits or gives up."""
        assert self.process is not None, "launch() first"
        process = self.process
        watch = StartWatch(f"the MCP server {self.module}", lambda: (process.pid,), (self.log_path,), timeout=timeout)
        while not port_open(self.port, timeout=0.5):
            why = f"it exited with {process.returncode}" if process.poll() is not None else watch.verdict()
            if why is not None:
                self.stop()
                raise DevstackError(
                    f"the MCP server {self.module} did not listen on {self.port}: {why}\n{tail(self.log_path)}"
                )
            time.sleep(0.05)
        return self

    def kill(self) -> None:
        """End it at once (SIGKILL), as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def start_mcp_server(
    port: int, log_path: Path, module: str = "assent_devstack.mcp_demo", *, wait: bool = True
) -> McpServerProcess:
    """Start the MCP server of ``module`` (by default the order desk) on ``port``: ``python -m <module> --port``;
    without ``wait``, return at once (:meth:`McpServerProcess.wait_listening` waits)."""
    server = McpServerProcess(module, port, log_path)
    return server.start() if wait else server.launch()


def main(argv: list[str] | None = None, server: MCPServer | None = None) -> None:
    """Serve ``server`` (by default the order desk) over streamable HTTP until SIGTERM or Ctrl-C."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    (server or demo_server()).run(transport="streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
