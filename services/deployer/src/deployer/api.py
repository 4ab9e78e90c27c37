"""The deployer's internal HTTP API: its side of its public routes (:mod:`deployer.routes`: agents' repositories
and deployments, the Proposals page, the builder chat, issues, Deploys settings, builds, deploys and the providers'
push webhooks, passed on by the gateway), and its activity entries for the public activity feed.

Only the gateway calls it, with its service credential (``runtime.internal_router``). Organisations are walls
here too: with ``X-Assent-Org`` (the person's organisation), an agent of another organisation is answered 404 with
the words a missing one gets, and nothing is read or written. Without the header the call is a service's own.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse

from assent.api import Caller, caller, routes_of, serve
from assent.http import Identifier
from assent.runtime import ServiceRuntime
from deployer_contract.source import OWNER

from .adapters.git import GitError, GitRepos
from .deploys import Deploys
from .domain.activity import ActivityFeed
from .kinds.source import SourceKind
from .routes import Unprocessable, store
from .routes.deploys import Builds, Settings, Webhooks
from .routes.deploys import Deploys as DeployRoutes
from .routes.source import Issues, Proposals, Repository

RESOURCES = (Repository, Proposals, Issues, Settings, Builds, DeployRoutes, Webhooks)
"""The classes that handle the deployer's declared routes, one per resource."""


def install(app: FastAPI, runtime: ServiceRuntime, repos: GitRepos, kind: SourceKind, deploys: Deploys) -> None:
    router = runtime.internal_router(tags=["deployer"])
    serve(router, routes_of(OWNER), *(resource(runtime, repos, kind, deploys) for resource in RESOURCES))

    @router.get("/activity")
    async def activity(
        who: Annotated[Caller, Depends(caller)],
        agent_id: Annotated[Identifier | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> ActivityFeed:
        """The deployer's activity entries (deploy, deploy failed, promote, link fix) of the caller's
        organisation, newest first (the gateway merges them into the public activity feed)."""
        if who.org is None:
            raise Unprocessable(422, "the activity feed is an organisation's: X-Assent-Org is required")
        async with runtime.unit_of_work() as uow:
            return ActivityFeed(entries=tuple(await store(uow).activity_of(who.org, agent_id, limit)))

    app.include_router(router)

    @app.exception_handler(Unprocessable)
    async def unprocessable(_: Request, exc: Unprocessable) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    @app.exception_handler(GitError)
    async def git_failed(_: Request, exc: GitError) -> JSONResponse:
        return JSONResponse({"detail": f"the agent's source repository did not answer: {exc}"}, status_code=503)
