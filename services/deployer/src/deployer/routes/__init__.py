"""The deployer's side of its public routes (:mod:`deployer_contract.source`, :mod:`deployer_contract.deploys`): one
class per resource, each method the handler of the declared route of its name.

Organisations are walls here too: for a person (``X-Assent-Org``), an agent of another organisation is answered 404
with the words a missing one gets, and nothing is read or written. Without the header the call is a service's own.

Each write is recorded for the organisation's history in its transaction (:func:`written`): a source's hashes are its
commits (the production branch's head before and after), a build's and a deploy's the commit they are of.
"""

from __future__ import annotations

from assent.domain import Agent, Refusal
from assent.runtime import ServiceRuntime
from assent.runtime.uow import UnitOfWork
from assent.runtime.walls import NotFound
from assent.runtime.writes import record_write

from ..adapters.git import GitRepos, Source
from ..adapters.repository import DeployerRepository
from ..deploys import Deploys
from ..kinds.source import SourceKind


class Unprocessable(Exception):
    """A refusal with its status (422, or 409 for a state that may change, 413, ...) and why."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def refused(refusal: Refusal) -> Unprocessable:
    return Unprocessable(refusal.status, refusal.message)


def store(uow: UnitOfWork) -> DeployerRepository:
    return uow.store(DeployerRepository)


async def written(
    uow: UnitOfWork,
    route: str,
    agent: Agent,
    kind: str,
    action: str,
    target: str,
    actor: str,
    *,
    hash_before: str | None = None,
    hash_after: str | None = None,
    detail: str | None = None,
) -> None:
    """Record a direct write of ``agent``'s (:func:`assent.runtime.writes.record_write`)."""
    await record_write(
        uow,
        route,
        org_id=agent.org_id,
        guild_id=agent.guild_id,
        agent_id=agent.agent_id,
        kind=kind,
        action=action,
        target=target,
        actor=actor,
        hash_before=hash_before,
        hash_after=hash_after,
        detail=detail,
    )


def author(actor: str) -> tuple[str, str]:
    """A commit's author for a person (their user id; an email-like one as the address)."""
    return actor, actor if "@" in actor else f"{actor}@users.assent.invalid"


class Resource:
    """What every resource's handlers share: the runtime (one unit of work per call), the repositories, the source
    kind's schemas, the deploys."""

    def __init__(self, runtime: ServiceRuntime, repos: GitRepos, kind: SourceKind, deploys: Deploys) -> None:
        self.runtime = runtime
        self.repos = repos
        self.kind = kind
        self.deploys = deploys

    @staticmethod
    async def source_of(uow: UnitOfWork, agent_id: str) -> Source:
        source = await store(uow).source(agent_id)
        if source is None:
            raise NotFound(f"agent {agent_id!r} has no source repository")
        return source

    async def commit_of(self, source: Source, wanted: str | None, what: str) -> str:
        """``wanted``, or the production branch's head; 409 when there is none yet, 422 when it is not a commit of
        the repository."""
        commit = wanted or await self.repos.head(source)
        if commit is None:
            raise Unprocessable(409, f"the production branch has no commit to {what} yet")
        if not await self.repos.has_commit(source, commit):
            raise Unprocessable(422, f"commit {commit} is not in the agent's repository")
        return commit
