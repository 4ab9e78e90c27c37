"""The connections service's side of its public routes (:mod:`connections_contract.routes`): logins and a session's
connections. Each declared route has its handler here, found by name; only the gateway calls them, with its service
credential, on ``/internal`` + the route's path. (A login request is decided at the gateway, which sends the decision
to the kit, :mod:`connections.kinds.login`, and answers with ``session_connections``.)

Organisations are walls: with ``X-Assent-Org`` (the person's organisation) another organisation's login or session
answers 404 with the words a missing one gets, and nothing is read or written. Without the header the call is a
service's own (no wall applies).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from assent.api import Caller, routes_of, serve
from assent.runtime import ServiceRuntime
from assent.runtime.uow import SqlUnitOfWork
from assent.runtime.writes import actor_of
from connections_contract.routes import (
    OWNER,
    GrantIn,
    Login,
    LoginDeleted,
    LoginIn,
    LoginPatch,
    SessionConnections,
    StudioSession,
)

from . import workspace
from .adapters.crypto import CredentialBox
from .kinds.login import ConnectionsKit
from .workspace import Problem

T = TypeVar("T")


class Resource:
    """What the handlers share: one unit of work per call, the credentials' keys, the kit."""

    def __init__(self, runtime: ServiceRuntime, box: CredentialBox, kit: ConnectionsKit) -> None:
        self.runtime = runtime
        self.box = box
        self.kit = kit

    async def run(self, work: Callable[[SqlUnitOfWork], Awaitable[T]]) -> T:
        async with self.runtime.unit_of_work() as uow:
            return await work(uow)


class Logins(Resource):
    async def create_login(self, caller: Caller, body: LoginIn) -> Login:
        if caller.org is None:
            raise Problem(422, "a login belongs to an organisation: X-Assent-Org is required")
        org, actor = caller.org, caller.actor
        login = await self.run(lambda uow: workspace.create_login(uow, body, org, actor, self.box))
        return workspace.login_view(login)

    async def list_logins(self, caller: Caller, org_id: str) -> list[Login]:
        logins = await self.run(lambda uow: workspace.logins_of(uow, org_id, caller.org))
        return [workspace.login_view(login) for login in logins]

    async def get_login(self, caller: Caller, login_id: str) -> Login:
        return workspace.login_view(await self.run(lambda uow: workspace.login_in(uow, login_id, caller.org)))

    async def update_login(self, caller: Caller, login_id: str, body: LoginPatch) -> Login:
        actor = caller.actor
        login = await self.run(lambda uow: workspace.update_login(uow, login_id, body, caller.org, actor, self.box))
        return workspace.login_view(login)

    async def delete_login(self, caller: Caller, login_id: str) -> LoginDeleted:
        actor = actor_of(caller, OWNER)
        return await self.run(lambda uow: workspace.delete_login(uow, login_id, caller.org, actor))


class Sessions(Resource):
    async def session_connections(self, caller: Caller, session_id: str) -> SessionConnections:
        now = self.kit.login.now()
        return await self.run(lambda uow: workspace.session_connections(uow, session_id, caller.org, now))

    async def set_connection_grant(
        self, caller: Caller, session_id: str, connection_id: str, body: GrantIn
    ) -> StudioSession:
        actor = caller.actor
        return await self.run(
            lambda uow: workspace.set_grant(
                uow, self.kit, session_id, connection_id, body.granted, caller.org, actor, body.lifetime
            )
        )


RESOURCES = (Logins, Sessions)


def install(app: FastAPI, runtime: ServiceRuntime, box: CredentialBox, kit: ConnectionsKit) -> None:
    router = runtime.internal_router(tags=["connections"])
    serve(router, routes_of(OWNER), *(resource(runtime, box, kit) for resource in RESOURCES))
    app.include_router(router)

    @app.exception_handler(Problem)
    async def problem(_: Request, exc: Problem) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)
