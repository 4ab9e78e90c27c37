"""Clients of the owning services' internal HTTP APIs, for live reads and workspace writes."""

from __future__ import annotations

from typing import Any

import httpx
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor


class OwnerUnavailable(Exception):
    """The owning service did not answer; the gateway reports 503."""


class OwnerReply:
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body


class Owners:
    def __init__(self, edits_url: str) -> None:
        self.edits = httpx.AsyncClient(base_url=edits_url, timeout=5.0)
        HTTPXClientInstrumentor.instrument_client(self.edits)  # trace context on live reads and workspace writes

    async def close(self) -> None:
        await self.edits.aclose()

    async def call(self, method: str, path: str, json: Any = None) -> OwnerReply:
        try:
            response = await self.edits.request(method, path, json=json)
        except httpx.HTTPError as exc:
            raise OwnerUnavailable(f"the edits service did not answer: {exc}") from exc
        if response.status_code >= 500:
            raise OwnerUnavailable(f"the edits service failed ({response.status_code})")
        return OwnerReply(response.status_code, response.json())

    async def live_memory(self, agent_id: str) -> dict[str, Any] | None:
        reply = await self.call("GET", f"/internal/agents/{agent_id}/memory")
        return reply.body if reply.status == 200 else None
