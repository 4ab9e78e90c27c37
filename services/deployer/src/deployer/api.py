"""The deployer's internal HTTP API: agents' repositories and deployments, the Proposals page, and issues.

The Deploys part: settings (builds on push, auto-promote, target), builds with their log and triggers, deploys
with promote and retry, the provider's push webhooks (forwarded by the gateway), and the deployer's activity entries.

Only the gateway calls it, with its service credential (``runtime.internal_router``). Organisations are walls
here too: with ``X-Assent-Org`` (the person's organisation), an agent of another organisation is answered 404 with
the words a missing one gets, and nothing is read or written. Without the header the call is a service's own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from assent.contracts import Id
from assent.domain import Agent, Refusal
from assent.hashing import line_counts, unified_diff
from assent.http import NoNul, Omissible, OneLine
from assent.kinds import SUPERSEDED
from assent.runtime import ServiceRuntime, StoredProposal
from assent.runtime.uow import UnitOfWork
from assent.runtime.walls import CallerOrg

from .adapters.git import BranchMoved, GitError, GitRepos
from .adapters.repository import Build, Deploy, DeployerRepository
from .deploys import Deploys
from .domain import builder, checks, paths
from .domain.deploys import github_signature_ok, gitlab_token_ok, parse_push, repository_key
from .domain.proposals import MAX_FILE_CHARS, FileChange, moved_files, text_hash
from .kinds.source import SourceKind, decode

PathId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


def _repository_path(path: str) -> str:
    normal = paths.normalize(path)
    if isinstance(normal, Refusal):
        raise PydanticCustomError(normal.code, "{message}", {"message": normal.message})
    return normal


FileText = Annotated[str, Field(max_length=MAX_FILE_CHARS), NoNul]
FilePath = Annotated[str, AfterValidator(_repository_path)]
"""A file of the repository (:func:`paths.normalize`): a path outside it, or under ``.git/``, is a 422 naming it,
before git is asked."""
Title = Annotated[str, Field(min_length=1, max_length=300), OneLine]
IssueText = Annotated[str, Field(max_length=20_000), NoNul]
Evals = Annotated[dict[FilePath, FileText], Field(max_length=50)]
"""Regression evals, by path under ``evals/`` (JSON, see ``schemas/eval.schema.json``)."""


class NotFound(LookupError):
    pass


class Unprocessable(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


class RepositoryIn(BaseModel):
    """Where an agent's source lives. ``hosted``: a repository of Assent (``files``, if any, are its first source
    version). ``external``: a remote ``url`` with its ``provider``; ``branch`` is the production branch (the
    remote's default branch when absent)."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["hosted", "external"]
    url: Annotated[str, Field(min_length=1, max_length=2000), OneLine] | None = None
    provider: Literal["github", "gitlab"] | None = None
    branch: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._/-]+$")] | None = None
    files: dict[FilePath, FileText] = Field(default_factory=dict, max_length=500)
    propose_changes_to_itself: bool = False
    """"Let the agent propose changes to itself" (hosted only): the first source version also holds both
    ``agents/main`` files, ``agent.json`` declaring the source tools and an ``AGENT.md`` prompt
    (``deployer.domain.builder.SELF_EDITING``); ``files`` may not name them."""
    actor: Id


class CommitIn(BaseModel):
    """A person's direct commit onto the production branch (not a proposal); ``null`` deletes a file."""

    model_config = ConfigDict(extra="forbid")
    files: dict[FilePath, FileText | None] = Field(min_length=1, max_length=500)
    message: Annotated[str, Field(min_length=1, max_length=4000), NoNul]
    actor: Id


class DeploymentIn(BaseModel):
    """Record a deployment of the agent: of ``source_version`` (default: the production branch's head). With
    ``records_version: false`` it is a deployment that recorded no source version (an older deploy)."""

    model_config = ConfigDict(extra="forbid")
    source_version: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")] | None = None
    records_version: bool = True
    actor: Id


class IssueIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: Title
    text: IssueText = ""
    evals: Evals = Field(default_factory=dict)
    actor: Id


class IssuePatch(BaseModel):
    """A change of an issue: a field left out is kept; none is ever null."""

    model_config = ConfigDict(extra="forbid")
    title: Omissible[Title] = None
    text: Omissible[IssueText] = None
    status: Omissible[Literal["open", "fixed", "closed"]] = None
    evals: Omissible[Evals] = None
    actor: Id


def check_evals(evals: Mapping[str, str], schemas: Mapping[checks.FileFormat, Mapping[str, Any]]) -> None:
    """Each regression eval (its path already a :data:`FilePath`) is a JSON file under evals/ that fits its schema."""
    for path, text in evals.items():
        if checks.file_format(path) != "eval":
            raise Unprocessable(422, f"{path}: a regression eval is a .json file under evals/")
        refusal = checks.check_file(path, text, schemas)
        if refusal is not None:
            raise Unprocessable(422, refusal.message)


Target = dict[Annotated[str, Field(max_length=100), OneLine], Annotated[str, Field(max_length=2000), OneLine]]
"""A deploy target's configuration (``targets.Targets.refusal`` checks it against its kind)."""


class DeploySettingsIn(BaseModel):
    """An agent's Deploys settings; a field left out keeps its value. ``webhook_secret``: the secret of the
    provider's push webhook (GitHub signs with it, GitLab sends it as its token); it is never shown again.
    ``target``: ``{"kind": "local"}``, ``{"kind": "webhook", "url", "token"?}`` or ``{"kind": "kubernetes",
    "namespace"?, "deployment", "container", "image"}``; null: the service's default."""

    model_config = ConfigDict(extra="forbid")
    builds_on_push: Omissible[bool] = None
    auto_promote: Omissible[bool] = None
    target: Target | None = None
    webhook_secret: Annotated[str, Field(min_length=16, max_length=200), OneLine] | None = None
    actor: Id


class BuildIn(BaseModel):
    """Build a commit (default: the production branch's head) by hand."""

    model_config = ConfigDict(extra="forbid")
    source_version: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")] | None = None
    actor: Id


class ActorIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    actor: Id


class PushIn(BaseModel):
    """A provider's push webhook as the gateway received it: the body's exact text and the headers that
    authenticate it."""

    model_config = ConfigDict(extra="forbid")
    body: Annotated[str, Field(max_length=5_000_000)]
    signature: Annotated[str, Field(max_length=500)] | None = None
    token: Annotated[str, Field(max_length=500)] | None = None
    event: Annotated[str, Field(max_length=100)] | None = None
    delivery: Annotated[str, Field(max_length=200)] | None = None


def refused(refusal: Refusal) -> Unprocessable:
    return Unprocessable(refusal.status, refusal.message)


def install(app: FastAPI, runtime: ServiceRuntime, repos: GitRepos, kind: SourceKind, deploys: Deploys) -> None:
    router = runtime.internal_router(tags=["deployer"])

    async def agent_in(uow: UnitOfWork, agent_id: str, org: str | None) -> Agent:
        agent = await uow.workspace.agent(agent_id)
        if agent is None or (org is not None and agent.org_id != org):
            raise NotFound(f"agent {agent_id!r} does not exist")
        return agent

    def store(uow: UnitOfWork) -> DeployerRepository:
        return uow.store("deployer")  # type: ignore[no-any-return]

    async def describe(agent_id: str, uow: UnitOfWork) -> dict[str, Any]:
        source = await store(uow).source(agent_id)
        if source is None:
            raise NotFound(f"agent {agent_id!r} has no source repository")
        deployment = await store(uow).latest_deployment(agent_id)
        live = next((d for d in await store(uow).deploys_of(agent_id) if d.status == "live"), None)
        head = await repos.head(source)
        return {
            "agent_id": agent_id,
            "mode": source.mode,
            "branch": source.branch,
            "url": source.url,
            "provider": source.provider,
            "head": head,
            "version_number": await repos.count(source, head) if head and source.mode == "hosted" else None,
            "deployment": None
            if deployment is None
            else {
                "deployment_id": deployment.deployment_id,
                "source_version": deployment.source_version,
                "deployed_by": deployment.deployed_by,
                "deployed_at": deployment.deployed_at.isoformat(),
            },
            "live": None if live is None else live.as_json(),
        }

    @router.put("/agents/{agent_id}/repository")
    async def set_repository(agent_id: PathId, body: RepositoryIn, org: CallerOrg) -> Any:
        """Create an agent's hosted repository (with its first source version), or attach an external one."""
        async with runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, org)
            if body.mode == "external":
                if body.url is None or body.provider is None:
                    raise Unprocessable(422, "an external source needs its url and its provider (github or gitlab)")
                if body.files or body.propose_changes_to_itself:
                    raise Unprocessable(422, "an external source's files live in its remote; commit them there")
                try:
                    source = await repos.attach_external(agent_id, body.url, body.provider, body.branch)
                except GitError as exc:
                    raise Unprocessable(422, f"the remote could not be read: {exc}") from None
            else:
                if body.url is not None or body.branch is not None:
                    raise Unprocessable(422, "a hosted source has no url and no branches")
                files = builder.with_self_editing(body.files) if body.propose_changes_to_itself else dict(body.files)
                if isinstance(files, Refusal):
                    raise refused(files)
                source = await repos.create_hosted(agent_id)
                if files:
                    async with repos.lock(agent_id):
                        head = await repos.head(source)
                        await repos.commit(
                            source,
                            head,
                            files,
                            author=(
                                body.actor,
                                body.actor if "@" in body.actor else f"{body.actor}@users.assent.invalid",
                            ),
                            message="Initial source\n",
                        )
            await store(uow).save_source(source, agent.org_id, body.actor)
            return await describe(agent_id, uow)

    @router.get("/agents/{agent_id}/repository")
    async def get_repository(agent_id: PathId, org: CallerOrg) -> Any:
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            return await describe(agent_id, uow)

    @router.post("/agents/{agent_id}/repository/commits", status_code=201)
    async def commit_directly(agent_id: PathId, body: CommitIn, org: CallerOrg) -> Any:
        """A person's own commit onto the production branch (a hosted source's next source version)."""
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            source = await store(uow).source(agent_id)
            if source is None:
                raise NotFound(f"agent {agent_id!r} has no source repository")
            async with repos.lock(agent_id):
                head = await repos.head(source)
                try:
                    commit = await repos.commit(
                        source,
                        head,
                        dict(body.files),
                        author=(body.actor, body.actor if "@" in body.actor else f"{body.actor}@users.assent.invalid"),
                        message=body.message.rstrip("\n") + "\n",
                    )
                except BranchMoved:
                    raise Unprocessable(
                        409, f"{source.branch} moved while committing; nothing was committed, commit again"
                    ) from None
            return {"commit": commit, "branch": source.branch}

    @router.post("/agents/{agent_id}/deployments", status_code=201)
    async def record_deployment(agent_id: PathId, body: DeploymentIn, org: CallerOrg) -> Any:
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            source = await store(uow).source(agent_id)
            if source is None:
                raise NotFound(f"agent {agent_id!r} has no source repository")
            version = None
            if body.records_version:
                version = body.source_version or await repos.head(source)
                if version is None:
                    raise Unprocessable(409, "the production branch has no commit to deploy yet")
                if not await repos.has_commit(source, version):
                    raise Unprocessable(422, f"commit {version} is not in the agent's repository")
            deployment = await store(uow).add_deployment(agent_id, version, body.actor)
            return {"deployment_id": deployment.deployment_id, "agent_id": agent_id, "source_version": version}

    @router.get("/agents/{agent_id}/builder-chat")
    async def builder_chat(agent_id: PathId, org: CallerOrg) -> Any:
        """Whether the agent shows the builder chat: its active deployment declares ``propose_source_change`` (read
        at the version it recorded), or it has a proposal from chat. Who may use it is the gateway's part."""
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            source = await store(uow).source(agent_id)
            deployment = await store(uow).latest_deployment(agent_id)
            from_chat = await store(uow).has_chat_proposal(agent_id)
        version = None if deployment is None else deployment.source_version
        declared: list[builder.Declaration] = []
        if source is not None and version is not None:
            tree = [entry.path for entry in await repos.tree(source, version)]
            wanted = builder.candidate_paths(tree)
            texts = {path: decode(raw) for path, raw in (await repos.read(source, version, wanted)).items()}
            declared = builder.declarations(texts)
        shown, reason = builder.shown_reason(declared, from_chat)
        if version is None and not shown:
            if source is None:
                reason = "the agent has no source repository"
            elif deployment is None:
                reason = "the agent is not deployed"
            else:
                reason = "the agent's active deployment recorded no source version; redeploy it"
        return {
            "agent_id": agent_id,
            "shown": shown,
            "reason": reason,
            "source_version": version,
            "declared_in": [{"agent": d.agent, "path": d.path} for d in declared],
            "has_chat_proposal": from_chat,
        }

    async def page(agent_id: str, uow: UnitOfWork, only: str | None = None) -> dict[str, Any]:
        rows = await store(uow).proposals_of_agent(agent_id)
        if only is not None:
            rows = [(p, at) for p, at in rows if p.proposal_id == only]
        source = await store(uow).source(agent_id)
        waiting_paths = sorted({f["path"] for p, _ in rows if p.status == "pending" for f in p.payload["files"]})
        head_hashes: dict[str, str | None] = {}
        if source is not None and waiting_paths:
            head = await repos.head(source)
            if head is not None:
                texts = await repos.read(source, head, waiting_paths)
                head_hashes = {path: text_hash(decode(raw)) for path, raw in texts.items()}
        issues = {issue.issue_id: issue for issue in await store(uow).issues_of(agent_id)}
        by_proposal = {d.proposal_id: d for d in await store(uow).deploys_of(agent_id) if d.proposal_id}
        items = [page_item(p, at, head_hashes, issues, by_proposal.get(p.proposal_id)) for p, at in rows]
        waiting = [item for item in items if item["status"] == "pending"]
        decided = [item for item in items if item["status"] != "pending"]
        return {
            "agent_id": agent_id,
            "counts": {"waiting": len(waiting), "decided": len(decided)},
            "waiting": waiting,
            "decided": decided,
        }

    @router.get("/agents/{agent_id}/proposals")
    async def proposals(agent_id: PathId, org: CallerOrg) -> Any:
        """The Proposals page: Waiting and Decided, with the count of each."""
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            return await page(agent_id, uow)

    @router.get("/agents/{agent_id}/proposals/{proposal_id}")
    async def proposal(agent_id: PathId, proposal_id: PathId, org: CallerOrg) -> Any:
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            found = await page(agent_id, uow, only=proposal_id)
        items = found["waiting"] + found["decided"]
        if not items:
            raise NotFound(f"agent {agent_id!r} has no proposal {proposal_id!r}")
        return items[0]

    @router.get("/agents/{agent_id}/issues")
    async def list_issues(agent_id: PathId, org: CallerOrg) -> Any:
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            return {"issues": [issue.as_json() for issue in await store(uow).issues_of(agent_id)]}

    @router.post("/agents/{agent_id}/issues", status_code=201)
    async def create_issue(agent_id: PathId, body: IssueIn, org: CallerOrg) -> Any:
        check_evals(body.evals, kind.schemas)
        async with runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, org)
            issue = await store(uow).add_issue(
                f"iss_{uuid.uuid4().hex[:16]}",
                agent_id,
                agent.org_id,
                body.title,
                body.text,
                dict(body.evals),
                body.actor,
            )
            return issue.as_json()

    @router.get("/agents/{agent_id}/issues/{issue_id}")
    async def get_issue(agent_id: PathId, issue_id: PathId, org: CallerOrg) -> Any:
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            issue = await store(uow).issue(issue_id)
            if issue is None or issue.agent_id != agent_id:
                raise NotFound(f"agent {agent_id!r} has no issue {issue_id!r}")
            return issue.as_json()

    @router.patch("/agents/{agent_id}/issues/{issue_id}")
    async def change_issue(agent_id: PathId, issue_id: PathId, body: IssuePatch, org: CallerOrg) -> Any:
        if body.evals is not None:
            check_evals(body.evals, kind.schemas)
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            issue = await store(uow).issue(issue_id)
            if issue is None or issue.agent_id != agent_id:
                raise NotFound(f"agent {agent_id!r} has no issue {issue_id!r}")
            fields = body.model_dump(exclude_unset=True, exclude={"actor"})
            if not fields:
                return issue.as_json()
            return (await store(uow).update_issue(issue_id, body.actor, **fields)).as_json()

    # --- Deploys: settings, builds, deploys, promotion, push webhooks, activity -------------------------------

    @router.get("/agents/{agent_id}/deploy-settings")
    async def get_deploy_settings(agent_id: PathId, org: CallerOrg) -> Any:
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            await source_of(uow, agent_id)
            return (await store(uow).deploy_settings(agent_id)).as_json()

    @router.put("/agents/{agent_id}/deploy-settings")
    async def set_deploy_settings(agent_id: PathId, body: DeploySettingsIn, org: CallerOrg) -> Any:
        """Builds on push (needs a webhook secret for the push webhook; the poller needs none), auto-promote and
        the deploy target."""
        fields = body.model_dump(exclude_unset=True, exclude={"actor"})
        if body.target is not None:
            why = deploys.targets.refusal(body.target)
            if why is not None:
                raise Unprocessable(422, why)
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            source = await source_of(uow, agent_id)
            if fields.get("builds_on_push") and source.mode == "hosted":
                raise Unprocessable(422, "a hosted source is built when a proposal is approved; it has no pushes")
            if fields.get("builds_on_push"):
                fields.setdefault("last_seen_head", await repos.head(source))
            return (await store(uow).save_deploy_settings(agent_id, body.actor, **fields)).as_json()

    async def source_of(uow: UnitOfWork, agent_id: str) -> Any:
        source = await store(uow).source(agent_id)
        if source is None:
            raise NotFound(f"agent {agent_id!r} has no source repository")
        return source

    async def build_json(uow: UnitOfWork, build: Build, *, log: bool = False) -> dict[str, Any]:
        data = build.as_json(await store(uow).triggers(build.build_id), log=log)
        data["deploys"] = [
            d.deploy_id for d in await store(uow).deploys_of(build.agent_id) if d.build_id == build.build_id
        ]
        return data

    @router.get("/agents/{agent_id}/builds")
    async def list_builds(agent_id: PathId, org: CallerOrg) -> Any:
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            return {"builds": [await build_json(uow, b) for b in await store(uow).builds_of(agent_id)]}

    @router.get("/agents/{agent_id}/builds/{build_id}")
    async def read_build(agent_id: PathId, build_id: PathId, org: CallerOrg) -> Any:
        """A build with its status, triggers, deploys and log."""
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            build = await store(uow).build(build_id)
            if build is None or build.agent_id != agent_id:
                raise NotFound(f"agent {agent_id!r} has no build {build_id!r}")
            return await build_json(uow, build, log=True)

    @router.post("/agents/{agent_id}/builds", status_code=202)
    async def start_build(agent_id: PathId, body: BuildIn, org: CallerOrg) -> Any:
        async with runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, org)
            source = await source_of(uow, agent_id)
            commit = body.source_version or await repos.head(source)
            if commit is None:
                raise Unprocessable(409, "the production branch has no commit to build yet")
            if not await repos.has_commit(source, commit):
                raise Unprocessable(422, f"commit {commit} is not in the agent's repository")
            build = await deploys.request_build(uow, source, agent.org_id, commit, "manual", body.actor, body.actor)
            return await build_json(uow, build)

    @router.get("/agents/{agent_id}/deploys")
    async def list_deploys(agent_id: PathId, org: CallerOrg) -> Any:
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            return {"deploys": [d.as_json() for d in await store(uow).deploys_of(agent_id)]}

    async def deploy_in(uow: UnitOfWork, agent_id: str, deploy_id: str) -> Deploy:
        deploy = await store(uow).deploy(deploy_id)
        if deploy is None or deploy.agent_id != agent_id:
            raise NotFound(f"agent {agent_id!r} has no deploy {deploy_id!r}")
        return deploy

    @router.get("/agents/{agent_id}/deploys/{deploy_id}")
    async def read_deploy(agent_id: PathId, deploy_id: PathId, org: CallerOrg) -> Any:
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            return (await deploy_in(uow, agent_id, deploy_id)).as_json()

    @router.post("/agents/{agent_id}/deploys/{deploy_id}/promote")
    async def promote(agent_id: PathId, deploy_id: PathId, body: ActorIn, org: CallerOrg) -> Any:
        """Make a started deploy live (when auto-promote is off)."""
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            await deploy_in(uow, agent_id, deploy_id)
            done = await deploys.promote(uow, deploy_id, body.actor)
            if isinstance(done, Refusal):
                raise refused(done)
            return done.as_json()

    @router.post("/agents/{agent_id}/deploys/{deploy_id}/retry", status_code=202)
    async def retry(agent_id: PathId, deploy_id: PathId, body: ActorIn, org: CallerOrg) -> Any:
        """Start again a deploy that did not start (its commit stays)."""
        async with runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, org)
            await deploy_in(uow, agent_id, deploy_id)
            done = await deploys.retry(uow, deploy_id)
            if isinstance(done, Refusal):
                raise refused(done)
            return done.as_json()

    @router.post("/webhooks/{provider}", status_code=202)
    async def push(provider: Literal["github", "gitlab"], body: PushIn) -> Any:
        """A provider's push: 404 when no agent's source has the repository's address, 403 when the signature
        (GitHub) or token (GitLab) does not fit that repository's webhook secret; otherwise a push to the
        production branch of a source that builds on push starts (or joins) the build of its commit."""
        try:
            payload = json.loads(body.body)
        except (ValueError, RecursionError):
            raise Unprocessable(422, "the webhook's body is not JSON") from None
        event = parse_push(provider, payload) if isinstance(payload, dict) else None
        if event is None:
            raise Unprocessable(422, f"the body is not a {provider} push event")
        keys = {repository_key(url) for url in event.urls}
        async with runtime.unit_of_work() as uow:
            matches = [
                (source, org_id)
                for source, org_id in await store(uow).external_sources(provider)
                if source.url is not None and repository_key(source.url) in keys
            ]
            if not matches:
                raise NotFound("no agent's source is this repository")
            verified = []
            for source, org_id in matches:
                settings = await store(uow).deploy_settings(source.agent_id)
                secret = settings.webhook_secret
                ok = secret is not None and (
                    github_signature_ok(secret, body.body.encode(), body.signature)
                    if provider == "github"
                    else gitlab_token_ok(secret, body.token)
                )
                if ok:
                    verified.append((source, org_id, settings))
            if not verified:
                what = "signature (X-Hub-Signature-256)" if provider == "github" else "token (X-Gitlab-Token)"
                raise Unprocessable(403, f"the webhook's {what} does not fit the repository's webhook secret")
            answers = []
            for source, org_id, settings in verified:
                if event.branch != source.branch or event.commit is None:
                    answers.append({"agent_id": source.agent_id, "ignored": f"not a push to {source.branch}"})
                    continue
                if not settings.builds_on_push:
                    answers.append({"agent_id": source.agent_id, "ignored": "builds on push is off"})
                    continue
                await repos.fetch(source)
                if not await repos.has_commit(source, event.commit):
                    raise Unprocessable(409, f"commit {event.commit} is not on the remote yet; send the push again")
                build = await deploys.request_build(
                    uow, source, org_id, event.commit, "push", body.delivery or event.commit, None
                )
                answers.append({"agent_id": source.agent_id, "build_id": build.build_id, "status": build.status})
            return {"results": answers}

    @router.get("/activity")
    async def activity(
        org: CallerOrg,
        agent_id: Annotated[Id | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> Any:
        """The deployer's activity entries (deploy, deploy failed, promote, link fix) of the caller's
        organisation, newest first."""
        if org is None:
            raise Unprocessable(422, "the activity feed is an organisation's: X-Assent-Org is required")
        async with runtime.unit_of_work() as uow:
            return {"entries": await store(uow).activity_of(org, agent_id, limit)}

    app.include_router(router)

    @app.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(Unprocessable)
    async def unprocessable(_: Request, exc: Unprocessable) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    @app.exception_handler(GitError)
    async def git_failed(_: Request, exc: GitError) -> JSONResponse:
        return JSONResponse({"detail": f"the agent's source repository did not answer: {exc}"}, status_code=503)


def page_item(
    proposal: StoredProposal,
    proposed_at: datetime,
    head_hashes: Mapping[str, str | None],
    issues: Mapping[str, Any],
    deploy: Deploy | None = None,
) -> dict[str, Any]:
    """One proposal as the Proposals page shows it."""
    payload = proposal.payload
    changes = [FileChange.from_json(f) for f in payload["files"]]
    stale = moved_files(changes, head_hashes) if proposal.status == "pending" else []
    files = []
    for change in changes:
        added, removed = line_counts(change.before or "", change.after or "")
        files.append(
            {
                "path": change.path,
                "action": change.action,
                "deleted": change.after is None,
                "diff": unified_diff(change.before or "", change.after or "", change.path),
                "lines": {"added": added, "removed": removed},
                "changed_since": change.path in stale,
            }
        )
    issue = issues.get(payload.get("issue_id") or "")
    resolution = proposal.resolution or {}
    chat = payload.get("chat")
    return {
        "proposal_id": proposal.proposal_id,
        "session_id": proposal.session_id,
        "seq": proposal.seq,
        # The page speaks of approved and discarded: a proposal its chat's next one superseded reads as discarded,
        # with the one that replaced it.
        "status": "discarded" if proposal.status == SUPERSEDED else proposal.status,
        "reason": payload["reason"],
        "model": payload.get("model"),
        "asked_by": payload.get("asked_by"),
        "origin": payload["origin"],
        "chat": None
        if chat is None
        else {"session_id": chat, "link": f"/api/studio/sessions/{chat}/pending", "label": "View chat"},
        "from_builder_chat": payload["origin"] == "builder",
        "label": "From the builder chat" if payload["origin"] == "builder" else "View chat",
        "fix_for_issue": None
        if issue is None
        else {
            "issue_id": issue.issue_id,
            "number": issue.number,
            "title": issue.title,
            "link": f"/api/workspace/agents/{proposal.agent_id}/issues/{issue.issue_id}",
            "label": "Fix for issue",
        },
        "source_version": payload["source_version"],
        "files": files,
        "changed_since": stale,
        "actions": (["discard"] if stale else ["approve", "discard"]) if proposal.status == "pending" else [],
        "proposed_at": proposed_at.isoformat(),
        "resolved_by": proposal.resolved_by,
        "resolved_at": None if proposal.resolved_at is None else proposal.resolved_at.isoformat(),
        "commit": resolution.get("commit"),
        "branch": resolution.get("branch"),
        "link": resolution.get("link"),
        "deployed": (deploy is not None and deploy.status == "live") if proposal.status == "approved" else None,
        "deploy": None if proposal.status != "approved" else "not deployed" if deploy is None else deploy.as_json(),
        "replaced_by": resolution.get("replaced_by"),
    }
