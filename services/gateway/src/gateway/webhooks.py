"""The organisation's webhooks on the public API (an admin's): make one (its secret answered once), list them, remove
one; read their deliveries, the dead ones, and replay a dead one. The organisation is always the caller's: another
organisation's webhook or delivery is 404."""

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from assent.api import Error, Permission
from assent.api.declare import BODY_ERRORS
from assent.policy import Name

from .adapters.webhooks import NameTaken, Webhook, WebhookStore
from .answers import PERSON_ERRORS
from .handlers import Deps, NotFound, Refused

BODY: dict[int | str, dict[str, Any]] = {
    status: {"model": Error, "description": why} for status, why in BODY_ERRORS.items()
}
EventName = Literal["proposed", "decided", "expired", "escalated"]
EVERY: tuple[EventName, ...] = ("proposed", "decided", "expired", "escalated")
Status = Literal["pending", "delivered", "dead"]
URL = Annotated[
    str, Field(min_length=10, max_length=2000, pattern=r"^https?://[A-Za-z0-9._~:\[\]@!$&'()*+,;=%-]+(/[\x21-\x7e]*)?$")
]
"""An ``http`` or ``https`` address (any other scheme is refused)."""
WebhookName = Annotated[str, Path(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.:-]*$")]
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Error, "description": "No webhook of this name in the caller's organisation"}
}


class WebhookNew(BaseModel):
    """A webhook: the name policy rules use (``notify: [name]``, ``escalate: {webhooks: [name]}``), its address, the
    events it is told of, and its body's format (``json``, or ``slack``: a message Slack's incoming webhooks take)."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    url: URL
    events: list[EventName] = Field(default_factory=lambda: list(EVERY), min_length=1, max_length=4)
    format: Literal["json", "slack"] = "json"


class WebhookView(BaseModel):
    """A webhook (its secret is never read back)."""

    name: str
    url: str
    events: list[str]
    format: str
    created_by: str
    created_at: datetime


class WebhookCreated(WebhookView):
    """A webhook just made, with its secret: answered this once, it signs every delivery (``Assent-Signature``)."""

    secret: str


class Webhooks(BaseModel):
    webhooks: list[WebhookView]


class Delivery(BaseModel):
    """A delivery of an event to a webhook: its body as sent, how many attempts it took, what the last answered
    (``last_status``: the HTTP status; ``last_error``: why it failed), and its fate: ``pending`` (tried again at
    ``next_at``), ``delivered`` or ``dead`` (given up: an admin may replay it)."""

    delivery_id: str
    webhook: str
    event: str
    proposal_id: str | None
    body: Any
    attempts: int
    status: str
    next_at: datetime
    last_status: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


class Deliveries(BaseModel):
    deliveries: list[Delivery]


def view(found: Webhook) -> WebhookView:
    return WebhookView(
        name=found.name,
        url=found.url,
        events=found.events,
        format=found.format,
        created_by=found.created_by,
        created_at=found.created_at,
    )


def router(deps: Deps, user: Any) -> APIRouter:
    """The webhooks' routes; ``user`` is the authenticating dependency."""
    routes = APIRouter(tags=["webhooks"], responses=PERSON_ERRORS)
    store = WebhookStore(deps.engine)

    def admin(person: Any) -> None:
        if not person.may(Permission.SET_POLICY):
            raise HTTPException(403, Permission.SET_POLICY.refusal)

    @routes.post(
        "/api/notifications/webhooks",
        response_model=WebhookCreated,
        responses={409: {"model": Error, "description": "A webhook of this name exists in the organisation"}, **BODY},
    )
    async def create_webhook(new: WebhookNew, person: user) -> WebhookCreated:
        """Make a webhook in the caller's organisation (an admin). Its secret is in this answer only: keep it, to
        check each delivery's ``Assent-Signature``."""
        admin(person)
        try:
            made, secret = await store.create(
                person.org_id, new.name, new.url, list(dict.fromkeys(new.events)), new.format, person.user_id
            )
        except NameTaken:
            raise Refused(
                409, f"a webhook named {new.name!r} exists; remove it first, or choose another name"
            ) from None
        return WebhookCreated(**view(made).model_dump(), secret=secret)

    @routes.get("/api/notifications/webhooks", response_model=Webhooks)
    async def list_webhooks(person: user) -> Webhooks:
        """The caller's organisation's webhooks, by name (an admin)."""
        admin(person)
        return Webhooks(webhooks=[view(found) for found in await store.all(person.org_id)])

    @routes.get("/api/notifications/deliveries", response_model=Deliveries)
    async def all_deliveries(
        person: user,
        status: Annotated[Status | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> Deliveries:
        """The deliveries of every webhook of the organisation, newest first; ``status=dead``: the dead-letter list
        (an admin)."""
        admin(person)
        found = await store.deliveries(person.org_id, None, status, limit)
        return Deliveries(deliveries=[Delivery(**row) for row in found])

    @routes.delete("/api/notifications/webhooks/{name}", response_model=WebhookView, responses=NOT_FOUND)
    async def remove_webhook(name: WebhookName, person: user) -> WebhookView:
        """Remove a webhook, and its deliveries (an admin): nothing more is sent to it."""
        admin(person)
        removed = await store.delete(person.org_id, name)
        if removed is None:
            raise NotFound(f"no webhook named {name!r}")
        return view(removed)

    @routes.get("/api/notifications/webhooks/{name}/deliveries", response_model=Deliveries, responses=NOT_FOUND)
    async def webhook_deliveries(
        name: WebhookName,
        person: user,
        status: Annotated[Status | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> Deliveries:
        """One webhook's delivery log, newest first (an admin)."""
        admin(person)
        if not await store.exists(person.org_id, name):
            raise NotFound(f"no webhook named {name!r}")
        found = await store.deliveries(person.org_id, name, status, limit)
        return Deliveries(deliveries=[Delivery(**row) for row in found])

    @routes.post(
        "/api/notifications/deliveries/{delivery_id}/replay",
        response_model=Delivery,
        responses={
            404: {"model": Error, "description": "No such delivery in the caller's organisation"},
            409: {"model": Error, "description": "The delivery is not dead (pending, or delivered)"},
        },
    )
    async def replay_delivery(
        delivery_id: Annotated[str, Path(min_length=1, max_length=100)], person: user
    ) -> Delivery:
        """Send a dead delivery again (an admin): it is pending from now, with the same body and id, retried as a new
        one would be."""
        admin(person)
        found, replayed = await store.replay(person.org_id, delivery_id)
        if found is None:
            raise NotFound(f"no delivery {delivery_id}")
        if not replayed:
            raise Refused(409, f"delivery {delivery_id} is {found['status']}, not dead: only a dead one is replayed")
        return Delivery(**found)

    return routes
