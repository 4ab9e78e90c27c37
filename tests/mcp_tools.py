"""The MCP server the connections tests call through the proxy: the devstack's order desk (a read and a write tool)
and a tool for each branch of the read-only policy and of what the proxy does to a result.

``python -m tests.mcp_tools --port N`` serves it at ``http://127.0.0.1:N/mcp``. ``list_calls`` tells which tools it
was asked to run, so a test proves that a refused call never reached it; ``held_lookup`` answers only when the test
says so (over plain HTTP beside ``/mcp``), so a test holds a call in the server for as long as it needs.
"""

from __future__ import annotations

import asyncio
import json

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import TextContent, ToolAnnotations
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from assent_devstack.mcp_demo import demo_server, main

BIG_LINES = 2000
"""Lines of ``read_log``: 2000 lines of 64 bytes, about 125 KiB."""


def tools_server() -> MCPServer:
    server = demo_server("Assent test tools")
    calls: list[str] = []

    def called(name: str) -> None:
        calls.append(name)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def list_calls() -> str:
        """The tools this server ran so far, one a line (this one left out)."""
        return "\n".join(calls)

    @server.tool()
    def whoami(ctx: Context) -> list[TextContent]:
        """Who the caller is: echoes its Authorization header, split across blocks and as JSON."""
        called("whoami")
        request = ctx.request_context.request
        header = "" if request is None else request.headers.get("authorization", "")
        token = header.removeprefix("Bearer ")
        half = len(token) // 2
        return [
            TextContent(type="text", text=f"you are authenticated with {token[:half]}"),
            TextContent(type="text", text=f"{token[half:]} (header: {header})"),
            TextContent(type="text", text=json.dumps({"token": token, "quoted": f'"{token}"'})),
        ]

    @server.tool()
    def read_log() -> str:
        """The whole log: more than the proxy's 64 KiB cap."""
        called("read_log")
        return "\n".join(f"{n:06d} " + "l" * 57 for n in range(BIG_LINES))

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def account_summary() -> str:
        """The account's summary (read-only by its hint; its name has no verb)."""
        called("account_summary")
        return "plan: business; seats: 12"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def get_audit_trail() -> str:
        """Who did what (off by default in the connector's manifest)."""
        called("get_audit_trail")
        return "audit trail"

    @server.tool()
    def sync_status() -> str:
        """When the last sync ran (the connector's manifest lists it as read-only despite its name)."""
        called("sync_status")
        return "last sync: 5 minutes ago"

    @server.tool()
    def close_ticket(ticket_id: str) -> str:
        """Close a ticket."""
        called("close_ticket")
        return f"closed {ticket_id}"

    @server.tool()
    async def slow_lookup(seconds: float) -> str:
        """Answers after ``seconds``."""
        called("slow_lookup")
        await asyncio.sleep(seconds)
        return "late"

    entered: dict[str, asyncio.Event] = {}
    released: dict[str, asyncio.Event] = {}

    @server.tool()
    async def held_lookup(key: str) -> str:
        """Answers once the test releases ``key`` (``POST /release/{key}``); ``GET /entered/{key}`` answers once this
        call waits for it."""
        called("held_lookup")
        entered.setdefault(key, asyncio.Event()).set()
        await released.setdefault(key, asyncio.Event()).wait()
        return f"released {key}"

    @server.custom_route("/entered/{key}", methods=["GET"])
    async def has_entered(request: Request) -> Response:
        await entered.setdefault(request.path_params["key"], asyncio.Event()).wait()
        return PlainTextResponse("entered")

    @server.custom_route("/release/{key}", methods=["POST"])
    async def release(request: Request) -> Response:
        released.setdefault(request.path_params["key"], asyncio.Event()).set()
        return PlainTextResponse("released")

    return server


if __name__ == "__main__":
    main(server=tools_server())
