"""Clients of the owner services' internal HTTP APIs: the live side of cards and the workspace API.

Which service owns a kind comes from the kind registry; where its internal API lives comes from
configuration (``ASSENT_OWNER_URLS``). The gateway asks and shows; it never recomputes an owner's rule.
Every call carries the gateway's own service credential for that owner (``Authorization: Bearer``, see
:mod:`assent.service_auth`). The instrumentation records no request header (unless an operator sets
``OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST``; the deployment does not).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.trace import TracerProvider

from assent.api import ORG_HEADER
from assent.kinds import KINDS
from assent.runtime import LiveCard
from assent.service_auth import ServiceSigner


def segment(value: str) -> str:
    """``value`` as one segment of an owner's URL path: ``?``, ``#``, ``/`` and the rest percent-encoded."""
    return quote(value, safe="")


class OwnerUnavailable(Exception):
    """The owning service did not answer, or is not configured; the gateway reports 503.

    ``retry``: trying again shortly may succeed (the owner did not answer, or answered that its database is
    unavailable), as the gateway's own 503 for its database says.
    """

    def __init__(self, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


def _asks_to_retry(response: httpx.Response) -> bool:
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("retry") is True


class OwnerReply:
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body


class Owners:
    def __init__(
        self,
        urls: dict[str, str],
        signer: ServiceSigner,
        *,
        timeout: float = 5.0,
        tracer_provider: TracerProvider | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.signer = signer
        self.clients = {
            owner: httpx.AsyncClient(base_url=url, timeout=timeout, transport=transport) for owner, url in urls.items()
        }
        for client in self.clients.values():
            HTTPXClientInstrumentor.instrument_client(
                client, tracer_provider=tracer_provider
            )  # trace context on live reads and workspace writes

    async def close(self) -> None:
        for client in self.clients.values():
            await client.aclose()

    async def call(
        self,
        owner: str,
        method: str,
        path: str,
        json: Any = None,
        *,
        org: str | None = None,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> OwnerReply:
        """Call an owner's internal API; ``org`` is the organisation of the person the gateway asks for, whose
        walls the owner enforces (``X-Assent-Org``: another organisation's entities answer 404). ``headers`` go
        along (the person, a webhook's signature); ``content`` is a JSON body's exact bytes, sent instead of
        ``json``."""
        client = self.clients.get(owner)
        if client is None:
            raise OwnerUnavailable(f"the {owner} service is not configured (ASSENT_OWNER_URLS)")
        sent = {**self.signer.headers(owner), **(headers or {})}
        if org is not None:
            sent[ORG_HEADER] = quote(org, safe="")  # as the owner reads it (assent.api.caller)
        if content is not None:
            sent["Content-Type"] = "application/json"
        try:
            response = await client.request(method, path, json=json, content=content, headers=sent)
        except httpx.HTTPError as exc:
            raise OwnerUnavailable(f"the {owner} service did not answer: {exc}", retry=True) from exc
        if response.status_code == 401:  # not the caller's fault: the deployment's keys disagree
            raise OwnerUnavailable(f"the {owner} service refused the gateway's service credential (ASSENT_SERVICE_KEY)")
        if response.status_code >= 500:
            retry = response.status_code == 503 and _asks_to_retry(response)
            raise OwnerUnavailable(f"the {owner} service failed ({response.status_code})", retry=retry)
        try:
            body = response.json()
        except ValueError:
            raise OwnerUnavailable(f"the {owner} service answered {response.status_code} without a JSON body") from None
        return OwnerReply(response.status_code, body)

    async def live_card(self, kind: str, proposal_id: str, *, org: str | None = None) -> LiveCard | None:
        """The owner's live side of a card now (its stale flag included), or None if it does not know it
        (for a person of ``org``)."""
        reply = await self.call(KINDS[kind].owner, "GET", f"/internal/proposals/{segment(proposal_id)}/live", org=org)
        return LiveCard.model_validate(reply.body) if reply.status == 200 else None
