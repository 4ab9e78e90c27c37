"""Clients of the owner services' internal HTTP APIs: the live side of cards and the workspace API.

Which service owns a kind comes from the kind registry; where its internal API lives comes from
configuration (``ASSENT_OWNER_URLS``). The gateway asks and shows; it never recomputes an owner's rule.
"""

from __future__ import annotations

from typing import Any

import httpx
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

from assent.kinds import KINDS
from assent.runtime import LiveCard


class OwnerUnavailable(Exception):
    """The owning service did not answer, or is not configured; the gateway reports 503."""


class OwnerReply:
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body


class Owners:
    def __init__(self, urls: dict[str, str], *, timeout: float = 5.0) -> None:
        self.clients = {owner: httpx.AsyncClient(base_url=url, timeout=timeout) for owner, url in urls.items()}
        for client in self.clients.values():
            HTTPXClientInstrumentor.instrument_client(client)  # trace context on live reads and workspace writes

    async def close(self) -> None:
        for client in self.clients.values():
            await client.aclose()

    async def call(self, owner: str, method: str, path: str, json: Any = None) -> OwnerReply:
        client = self.clients.get(owner)
        if client is None:
            raise OwnerUnavailable(f"the {owner} service is not configured (ASSENT_OWNER_URLS)")
        try:
            response = await client.request(method, path, json=json)
        except httpx.HTTPError as exc:
            raise OwnerUnavailable(f"the {owner} service did not answer: {exc}") from exc
        if response.status_code >= 500:
            raise OwnerUnavailable(f"the {owner} service failed ({response.status_code})")
        return OwnerReply(response.status_code, response.json())

    async def live_card(self, kind: str, proposal_id: str) -> LiveCard | None:
        """The owner's live side of a card now (its stale flag included), or None if it does not know it."""
        reply = await self.call(KINDS[kind].owner, "GET", f"/internal/proposals/{proposal_id}/live")
        return LiveCard.model_validate(reply.body) if reply.status == 200 else None
