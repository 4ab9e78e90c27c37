"""The ``source`` kind: ``list_repo_files``, ``read_repo_file``, ``read_docs`` and ``propose_source_change``.

The tools exist only in an agent's web or API chat and in the builder chat (``SessionContext.channel``), never in
a local-dev run, a channel session (Slack, ...) or a coach's Studio session; and only for an agent whose active
deployment recorded its source version, at which every file is read (otherwise "redeploy first"). A proposal
replaces whole files, each read by the deployer itself; the path rules, the secret and format checks and the rules
of one waiting proposal per chat are in :mod:`deployer.domain`. A chat's new proposal holds every file so far and
supersedes the chat's waiting one (the registry's ``supersedes="chat"``: the kit resolves it); ``content: null`` for
a file the waiting one creates drops it. Approving commits onto the production branch as
the approver, once every file still holds the text that was read (else 409 naming the file; the proposal stays
waiting, and only discarding it is offered), announces the commit (``SourceCommitted``) and deploys it
(:mod:`deployer.deploys`). Onto a new or existing branch it commits there instead, deploys nothing, and answers the
link that opens a pull or merge request; a hosted source has no branches.

In the builder chat, a call whose requester cannot be allowed to edit the agent's source is refused, and a file
that fails its checks gets one more try within the reply (:mod:`deployer.domain.builder`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from assent.contracts import CardField, DecisionMade, Id, ProposalBase, ProposalTarget
from assent.domain import Agent, Refusal
from assent.faults import crash_point
from assent.hashing import content_hash
from assent.kinds import SUPERSEDED
from assent.runtime import Applied, Call, LiveView, Output, Proposal, ProposalKind, Stale, StoredProposal, Tool
from assent.runtime.kit import proposal_id_for
from assent.runtime.uow import UnitOfWork
from deployer_contract.messages import SourceCommitted
from deployer_contract.topics import DEPLOYS_EVENTS

from ..adapters.git import BranchMoved, GitError, GitRepos, Source
from ..adapters.repository import DeployerRepository, Issue
from ..deploys import Deploys, deploy_id_for
from ..domain import builder, checks, paths
from ..domain.deploys import DeployStatus, RouteKind, approve_route
from ..domain.links import change_request_link
from ..domain.proposals import (
    MAX_FILE_CHARS,
    FileAction,
    FileChange,
    SourceChange,
    carry_over,
    drop_unchanged,
    files_hash,
    fit_budget,
    moved_files,
    text_hash,
    who_asked,
)

SOURCE_CHANNELS = ("web", "api", "builder")
FilePath = Annotated[str, Field(min_length=1, max_length=paths.MAX_PATH)]


class ListRepoFiles(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: Id


class ReadRepoFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: Id
    path: FilePath


class ReadDocs(BaseModel):
    """No ``page``: the index of pages. A page by name (``connections``) or path (``/guide/connections``)."""

    model_config = ConfigDict(extra="forbid")
    page: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class ProposedFile(BaseModel):
    """One whole file: its new text, or ``content: null`` to delete it."""

    model_config = ConfigDict(extra="forbid")
    path: FilePath
    content: Annotated[str, Field(max_length=MAX_FILE_CHARS)] | None


class ProposeSourceChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: Id
    files: list[ProposedFile] = Field(min_length=1, max_length=200)
    reason: Annotated[str, Field(min_length=1, max_length=4000)]
    issue_id: Id | None = None
    """The issue this proposal fixes: it shows "Fix for issue" with a link, and commits the issue's evals."""


# --- what the tools answer, and what approving did ---------------------------------------------------------------


class ToolOutput(BaseModel):
    """What a tool answers, or a part of it."""

    model_config = ConfigDict(frozen=True)

    def output(self) -> Output:
        """The answer as the tool result's ``output``."""
        return Output(self.model_dump(mode="json"))


class RepoEntry(ToolOutput):
    path: str
    size: int


class RepoFiles(ToolOutput):
    """``list_repo_files``: every file at the deployed version, and where the agent loads each located folder from."""

    agent_id: str
    source_version: str
    files: tuple[RepoEntry, ...]
    layout: dict[str, str]


class BuilderRepoFiles(RepoFiles):
    """``list_repo_files`` in the builder chat: also the text of the files that fit its read budget."""

    contents: dict[str, str]
    listed_only: tuple[str, ...]


class RepoFile(ToolOutput):
    """``read_repo_file``."""

    path: str
    source_version: str
    content: str
    hash: str


class DocsPageTitle(ToolOutput):
    page: str
    title: str


class DocsIndex(ToolOutput):
    """``read_docs`` without a page."""

    pages: tuple[DocsPageTitle, ...]


class DocsPage(DocsPageTitle):
    """``read_docs`` of a page."""

    content: str


class ProposedFileAction(ToolOutput):
    path: str
    action: FileAction


class LeftOutFile(ToolOutput):
    """A file of the replaced proposal left out because the repository's text of it changed: that text now."""

    path: str
    repository_content: str | None


class SourceProposed(ToolOutput):
    """What ``propose_source_change`` says beside the widget."""

    files: tuple[ProposedFileAction, ...]
    replaces: str | None
    left_out: tuple[LeftOutFile, ...]
    review: str


class Committed(BaseModel):
    """What approving did (the outcome's ``effects``): the commit, onto which branch and route; the deploy, if any,
    is started, never yet done."""

    model_config = ConfigDict(frozen=True)

    commit: str
    branch: str
    route: RouteKind
    version_number: int | None
    deployed: bool = False


class CommittedOnBranch(Committed):
    """Committed onto a new or existing branch, not deployed: ``link`` opens its pull or merge request."""

    link: str | None
    deploy: Literal["not deployed"] = "not deployed"


class CommittedAndDeploying(Committed):
    """Committed onto the production branch, and its deploy started."""

    deploy_id: str
    build_id: str
    deploy_status: DeployStatus


class CommittedDeployFailed(CommittedAndDeploying):
    """Committed onto the production branch; its deploy did not start."""

    deploy_error: str | None


class StaleFiles(BaseModel):
    """The files that changed in the repository since they were read (a stale approval's ``effects``)."""

    model_config = ConfigDict(frozen=True)

    stale_files: tuple[str, ...]


@dataclass(frozen=True)
class Context:
    agent: Agent
    source: Source
    version: str
    origin: paths.Origin


def repo(uow: UnitOfWork) -> DeployerRepository:
    return uow.store(DeployerRepository)


def decode(raw: bytes | None) -> str | None:
    """A file's text, or None when it is not UTF-8 text or too large to read."""
    if raw is None or len(raw) > 4 * MAX_FILE_CHARS:
        return None
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None
    return text if len(text) <= MAX_FILE_CHARS and "\x00" not in text else None


def unavailable(exc: GitError) -> Refusal:
    return Refusal(503, "repository_unavailable", f"the agent's source repository did not answer: {exc}")


class SourceKind(ProposalKind):
    name = "source"

    def __init__(
        self,
        repos: GitRepos,
        schemas: Mapping[checks.FileFormat, Mapping[str, Any]],
        docs: Mapping[str, str],
        deploys: Deploys,
    ):
        self.deploys = deploys
        self.repos = repos
        self.schemas = schemas
        self.docs = docs

    def tools(self) -> dict[str, Tool]:
        return {
            "list_repo_files": Tool(ListRepoFiles, self.list_files),
            "read_repo_file": Tool(ReadRepoFile, self.read_file),
            "read_docs": Tool(ReadDocs, self.read_docs),
            "propose_source_change": Tool(ProposeSourceChange, self.propose),
        }

    # --- where the tools exist ----------------------------------------------------------------------

    @staticmethod
    def _channel(call: Call) -> str:
        return call.message.session.channel if call.message.session is not None else "studio"

    def _available(self, call: Call) -> Refusal | None:
        channel = self._channel(call)
        if channel in SOURCE_CHANNELS:
            return None
        return Refusal(
            422,
            "tool_unavailable",
            f"{call.message.tool} is not available in a {channel} session: source tools exist only in the web and "
            "API chat of an agent deployed on Assent, and in the builder chat",
        )

    async def _context(self, call: Call, agent_id: str, uow: UnitOfWork) -> Context | Refusal:
        refusal = self._available(call)
        if refusal is not None:
            return refusal
        agent = await uow.workspace.agent(agent_id)
        if agent is None or agent.org_id != call.session.org_id:
            return Refusal(404, "unknown_agent", f"agent {agent_id!r} does not exist in this organisation")
        store = repo(uow)
        source = await store.source(agent_id)
        if source is None:
            return Refusal(404, "no_source", f"agent {agent_id!r} has no source repository")
        deployment = await store.latest_deployment(agent_id)
        if deployment is None or deployment.source_version is None:
            return Refusal(
                409,
                "redeploy_first",
                f"agent {agent_id!r}'s deployment did not record its source version; redeploy the agent first, "
                "then ask again",
            )
        origin: paths.Origin = "builder" if self._channel(call) == "builder" else "agent"
        if origin == "builder":
            session = call.message.session
            refusal = builder.requester_refusal(
                session.requester if session is not None else None,
                call.session.org_id,
                agent_id,
                agent.owners,
                agent.editors,
            )
            if refusal is not None:
                return refusal
        await self._waiting(call, uow)  # the reply's first call fixes the proposal it builds on
        return Context(agent, source, deployment.source_version, origin)

    @staticmethod
    async def _waiting(call: Call, uow: UnitOfWork) -> tuple[StoredProposal | None, str | None]:
        """The chat's waiting proposal now, and the one this reply (turn) builds on: the chat's waiting proposal
        when the reply made its first call, or the last one the reply made itself."""
        store = repo(uow)
        session_id = call.message.session_id
        waiting_id = await store.waiting(session_id)
        waiting = await uow.proposals.get(waiting_id) if waiting_id is not None else None
        current = waiting if waiting is not None and waiting.status == "pending" else None
        baseline = await store.turn_baseline(
            session_id, call.message.turn_id, None if current is None else current.proposal_id
        )
        return current, baseline

    # --- read tools ---------------------------------------------------------------------------------

    async def list_files(self, call: Call, args: ListRepoFiles, uow: UnitOfWork) -> Output | Refusal:
        """Every file at the deployed version; the builder chat also gets the text of the files that fit its
        read budget (the others are listed by path only)."""
        ctx = await self._context(call, args.agent_id, uow)
        if isinstance(ctx, Refusal):
            return ctx
        try:
            entries = await self.repos.tree(ctx.source, ctx.version)
            listing = RepoFiles(
                agent_id=args.agent_id,
                source_version=ctx.version,
                files=tuple(RepoEntry(path=e.path, size=e.size) for e in entries),
                layout=paths.layout(e.path for e in entries),
            )
            if ctx.origin != "builder":
                return listing.output()
            small = [e.path for e in entries if e.size <= 4 * MAX_FILE_CHARS]
            texts = {p: decode(raw) for p, raw in (await self.repos.read(ctx.source, ctx.version, small)).items()}
        except GitError as exc:
            return unavailable(exc)
        readable = {p: text for p, text in texts.items() if text is not None}
        read, listed = fit_budget([(p, len(text)) for p, text in readable.items()])
        unreadable = sorted(e.path for e in entries if texts.get(e.path) is None)
        await repo(uow).record_reads(call.message.session_id, {p: text_hash(readable[p]) for p in read}, ctx.version)
        return BuilderRepoFiles(
            **dict(listing),
            contents={p: readable[p] for p in read},
            listed_only=tuple(sorted([*listed, *unreadable])),
        ).output()

    async def read_file(self, call: Call, args: ReadRepoFile, uow: UnitOfWork) -> Output | Refusal:
        ctx = await self._context(call, args.agent_id, uow)
        if isinstance(ctx, Refusal):
            return ctx
        path = paths.normalize(args.path)
        if isinstance(path, Refusal):
            return path
        try:
            raw = (await self.repos.read(ctx.source, ctx.version, [path]))[path]
        except GitError as exc:
            return unavailable(exc)
        if raw is None:
            return Refusal(404, "unknown_file", f"{path} does not exist at source version {ctx.version[:12]}")
        text = decode(raw)
        if text is None:
            return Refusal(
                413,
                "file_too_large",
                f"{path} cannot be read: it is not text, or larger than {MAX_FILE_CHARS} characters",
            )
        await repo(uow).record_reads(call.message.session_id, {path: text_hash(text)}, ctx.version)
        return RepoFile(path=path, source_version=ctx.version, content=text, hash=content_hash(text)).output()

    async def read_docs(self, call: Call, args: ReadDocs, uow: UnitOfWork) -> Output | Refusal:
        refusal = self._available(call)
        if refusal is not None:
            return refusal
        if args.page is None:
            return DocsIndex(
                pages=tuple(DocsPageTitle(page=name, title=_title(text)) for name, text in self.docs.items())
            ).output()
        name = args.page.strip("/").removeprefix("guide/").removesuffix(".md")
        if name not in self.docs:
            return Refusal(404, "unknown_page", f"there is no page {args.page!r}; the pages are {', '.join(self.docs)}")
        return DocsPage(page=name, title=_title(self.docs[name]), content=self.docs[name]).output()

    # --- proposing ----------------------------------------------------------------------------------

    async def propose(self, call: Call, args: ProposeSourceChange, uow: UnitOfWork) -> Proposal | Refusal:
        ctx = await self._context(call, args.agent_id, uow)
        if isinstance(ctx, Refusal):
            return ctx
        store = repo(uow)
        message = call.message
        session_id = message.session_id
        await uow.lock_session(session_id)
        predecessor, baseline_id = await self._waiting(call, uow)
        baseline = await uow.proposals.get(baseline_id) if baseline_id is not None else None
        if baseline is not None and baseline.status != "pending":
            how = (
                f"replaced by {(baseline.resolution or {}).get('replaced_by')}"
                if baseline.status == SUPERSEDED
                else f"{baseline.status} by {baseline.resolved_by}"
            )
            return Refusal(
                409,
                "proposal_decided",
                f"nothing was proposed: this chat's proposal {baseline.proposal_id} was {how} while this reply was "
                "running; ask again to build on the current source",
            )
        if predecessor is not None and predecessor.agent_id != args.agent_id:
            return Refusal(
                409,
                "another_agent",
                f"nothing was proposed: this chat's waiting proposal {predecessor.proposal_id} changes agent "
                f"{predecessor.agent_id!r}, and a chat keeps one waiting proposal, for one agent; propose for "
                f"{predecessor.agent_id!r}, or start a new chat",
            )
        issue = None
        if args.issue_id is not None:
            issue = await store.issue(args.issue_id)
            if issue is None or issue.agent_id != args.agent_id:
                return Refusal(404, "unknown_issue", f"agent {args.agent_id!r} has no issue {args.issue_id!r}")
        previous = list(SourceChange.model_validate(predecessor.payload).files) if predecessor else []
        try:
            created = {change.path for change in previous if change.action == "create"}
            reviewed = await self._review(ctx, args.files, session_id, store, created)
            if isinstance(reviewed, Refusal):
                if ctx.origin == "builder" and reviewed.code in builder.FILE_CHECKS:
                    earlier = await store.turn_failure(session_id, message.turn_id, message.tool_call_id)
                    return builder.one_chance(reviewed, earlier)
                return reviewed
            named = {change.path for change in reviewed}
            others = [change.path for change in previous if change.path not in named]
            head = await self.repos.head(ctx.source)
            head_texts = (
                {p: decode(raw) for p, raw in (await self.repos.read(ctx.source, head, others)).items()}
                if head is not None
                else dict.fromkeys(others)
            )
        except GitError as exc:
            return unavailable(exc)
        kept, left_out = carry_over(previous, named, {p: text_hash(text) for p, text in head_texts.items()})
        changes = sorted([*drop_unchanged(reviewed), *kept], key=lambda c: c.path)
        if not changes:
            also = f"; left out because they changed in the repository: {', '.join(left_out)}" if left_out else ""
            if predecessor is not None:
                also += f". To withdraw every file, discard the waiting proposal {predecessor.proposal_id}"
            return Refusal(
                422, "nothing_to_propose", f"the proposal changes nothing: every file already holds that text{also}"
            )
        proposal_id = proposal_id_for(session_id, message.tool_call_id)
        await store.set_waiting(session_id, proposal_id)  # the kit resolves the predecessor as superseded
        await store.set_turn_baseline(session_id, message.turn_id, proposal_id)
        return self._proposal(ctx, args, call, changes, left_out, head_texts, predecessor, issue)

    async def _review(
        self,
        ctx: Context,
        files: Sequence[ProposedFile],
        session_id: str,
        store: DeployerRepository,
        created: Collection[str] = (),
    ) -> list[FileChange] | Refusal:
        """Each proposed file against the path rules, the deployed text and the checks, in the order given.

        ``created`` are the files the chat's waiting proposal creates: ``content: null`` for one of them drops it
        from the proposal (there is nothing to delete), as the deployed text drops a file the proposal edits.
        """
        entries = {e.path: e.size for e in await self.repos.tree(ctx.source, ctx.version)}
        loads = paths.layout(entries)
        named: list[str] = []
        for file in files:
            path = paths.normalize(file.path)
            if isinstance(path, Refusal):
                return path
            if path in named:
                return Refusal(422, "duplicate_path", f"{path} is named twice; a proposal holds each file once")
            refusal = paths.check_path(ctx.origin, path, loads, exists=path in entries)
            if refusal is not None:
                return refusal
            named.append(path)
        raws = await self.repos.read(ctx.source, ctx.version, named)
        reads = await store.reads(session_id) if any(f.content is None for f in files) else {}
        changes = []
        for path, file in zip(named, files, strict=True):
            raw = raws[path]
            before = decode(raw)
            if raw is not None and before is None:
                return Refusal(
                    413,
                    "file_too_large",
                    f"{path} cannot be changed or deleted: it is not text, or larger than {MAX_FILE_CHARS} characters",
                )
            if file.content is None and before is None:
                if path not in created:
                    return Refusal(404, "unknown_file", f"{path} cannot be deleted: it does not exist")
                # Dropped: absent as deployed and absent as proposed, so drop_unchanged leaves it out.
            elif file.content is None:
                if path not in reads:
                    return Refusal(422, "unread_file", f"{path} cannot be deleted: this chat has not read it")
            else:
                refusal = checks.check_file(path, file.content, self.schemas)
                if refusal is not None:
                    return refusal
            changes.append(FileChange(path=path, before=before, after=file.content))
        return changes

    def _proposal(
        self,
        ctx: Context,
        args: ProposeSourceChange,
        call: Call,
        changes: list[FileChange],
        left_out: list[str],
        head_texts: Mapping[str, str | None],
        predecessor: StoredProposal | None,
        issue: Issue | None,
    ) -> Proposal:
        session = call.message.session
        asked_by = who_asked(
            session.requester if session is not None else None, call.session.operator_user_id, call.session.org_id
        )
        from_builder = ctx.origin == "builder"
        notes = ["From the builder chat" if from_builder else f"View chat: session {call.message.session_id}"]
        notes.append(f"Asked by {asked_by}" if asked_by else "Asked on a token minted with an API key")
        if issue is not None:
            notes.append(f"Fix for issue #{issue.number}: {issue.title}")
        if predecessor is not None:
            notes.append(f"Replaces {predecessor.proposal_id}")
        payload = SourceChange(
            org_id=ctx.agent.org_id,
            agent_id=ctx.agent.agent_id,
            origin=ctx.origin,
            source_version=ctx.version,
            files=tuple(changes),
            reason=args.reason,
            asked_by=asked_by,
            model=session.model if session is not None else None,
            issue_id=None if issue is None else issue.issue_id,
            chat=None if from_builder else call.message.session_id,
            replaces=None if predecessor is None else predecessor.proposal_id,
            left_out=tuple(left_out),
        )
        count = len(changes)
        return Proposal(
            action="propose",
            target=ProposalTarget(
                kind="source",
                label=f"Source of {ctx.agent.name}: {count} file{'s' if count != 1 else ''}",
                agent_id=ctx.agent.agent_id,
                path=changes[0].path if count == 1 else None,
            ),
            base=ProposalBase(
                hash=files_hash({c.path: c.base_hash for c in changes}),
                files={c.path: c.base_hash for c in changes},
            ),
            proposed_hash=files_hash({c.path: text_hash(c.after) for c in changes}),
            reason=args.reason,
            before="".join(c.before or "" for c in changes),
            after="".join(c.after or "" for c in changes),
            fields=tuple(CardField(name=c.path, before=c.before, after=c.after) for c in changes),
            notes=tuple(notes),
            origin=ctx.origin,
            payload=payload.model_dump(mode="json"),
            output=SourceProposed(
                files=tuple(ProposedFileAction(path=c.path, action=c.action) for c in changes),
                replaces=payload.replaces,
                left_out=tuple(LeftOutFile(path=p, repository_content=head_texts.get(p)) for p in left_out),
                review=f"/api/agents/{ctx.agent.agent_id}/proposals",
            ).model_dump(mode="json"),
            supersedes=predecessor,
        )

    # --- the card and approving -----------------------------------------------------------------------

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        change = SourceChange.model_validate(proposal.payload)
        changes = change.files
        source = await repo(uow).source(change.agent_id)
        texts: dict[str, str | None] = {}
        if source is not None:
            head = await self.repos.head(source)
            if head is not None:
                texts = {
                    p: decode(raw)
                    for p, raw in (await self.repos.read(source, head, [c.path for c in changes])).items()
                }
        hashes = {c.path: text_hash(texts.get(c.path)) for c in changes}
        moved = moved_files(changes, hashes)
        notes = (
            (f"Changed in the repository since it was proposed: {', '.join(moved)}; only discarding is offered",)
            if moved and proposal.status == "pending"
            else ()
        )
        return LiveView(
            hash=files_hash(hashes),
            version=None,
            fields=tuple(CardField(name=c.path, before=texts.get(c.path), after=c.after) for c in changes),
            notes=notes,
        )

    async def apply(
        self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork
    ) -> Applied | Stale | Refusal:
        """Commit onto the route the approver chose (``decision.options``), then deploy (production only)."""
        payload = SourceChange.model_validate(proposal.payload)
        store = repo(uow)
        source = await store.source(payload.agent_id)
        if source is None:
            return Refusal(404, "no_source", f"agent {payload.agent_id!r} has no source repository")
        route = approve_route(source.mode, source.branch, decision.options)
        if isinstance(route, Refusal):
            return route
        changes = payload.files
        issue = await store.issue(payload.issue_id) if payload.issue_id else None
        marker = f"Assent-Proposal: {proposal.proposal_id}"
        on_branch = None if route.kind == "production" else route.branch
        try:
            async with self.repos.lock(source.agent_id):
                production = await self.repos.head(source)
                # a redelivered approval committed already
                commit = await self.repos.commit_naming(source, marker, on_branch)
                if commit is None:
                    parent = production
                    if route.kind != "production":
                        there = await self.repos.branch_head(source, route.branch, fetch=False)
                        if route.kind == "new" and there is not None:
                            return Refusal(
                                409,
                                "branch_exists",
                                f"branch {route.branch} exists already: approve onto it as an existing branch, "
                                "or name a new one",
                            )
                        if route.kind == "existing":
                            if there is None:
                                return Refusal(404, "unknown_branch", f"the repository has no branch {route.branch}")
                            parent = there
                    paths_ = [c.path for c in changes]
                    texts = await self.repos.read(source, parent, paths_) if parent is not None else {}
                    moved = moved_files(changes, {p: text_hash(decode(texts.get(p))) for p in paths_})
                    if moved:
                        where = "the repository" if route.kind != "existing" else f"branch {route.branch}"
                        return Stale(
                            f"{', '.join(moved)} changed in {where} since it was proposed; approving would "
                            "overwrite that change. The proposal stays waiting and can only be discarded: ask for the "
                            "change again",
                            StaleFiles(stale_files=tuple(moved)).model_dump(mode="json"),
                        )
                    writes: dict[str, str | None] = {c.path: c.after for c in changes}
                    if issue is not None:
                        writes.update({p: text for p, text in issue.evals.items() if p not in writes})
                    commit = await self.repos.commit(
                        source,
                        parent,
                        writes,
                        author=(
                            decision.actor,
                            decision.actor if "@" in decision.actor else f"{decision.actor}@users.assent.invalid",
                        ),
                        message=commit_message(proposal, payload, decision.actor, issue, marker, route.message),
                        branch=on_branch,
                        new_branch=route.kind == "new",
                    )
                    crash_point("deployer.approve.after_commit")
                number = await self.repos.count(source, commit) if source.mode == "hosted" else None
        except BranchMoved:
            return Stale(f"{route.branch} moved while committing; nothing was committed, approve again")
        except GitError as exc:
            return unavailable(exc)
        await uow.emit(
            DEPLOYS_EVENTS,
            source.agent_id,
            SourceCommitted(
                org_id=payload.org_id,
                agent_id=source.agent_id,
                proposal_id=proposal.proposal_id,
                source_version=commit,
                branch=route.branch,
                mode=source.mode,
                version_number=number,
                author=decision.actor,
                asked_by=payload.asked_by,
                issue_id=payload.issue_id,
                files=tuple(c.path for c in changes),
                causation_id=decision.id,
                correlation_id=decision.correlation_id or decision.id,
            ),
        )
        committed = Committed(commit=commit, branch=route.branch, route=route.kind, version_number=number)
        if not route.deploys:
            link = (
                change_request_link(source.provider, source.url, source.branch, route.branch)
                if source.provider is not None and source.url is not None
                else None
            )
            request = "pull request" if source.provider == "github" else "merge request"
            kind = "a new branch" if route.kind == "new" else "branch"
            return Applied(
                f"approved; committed {commit[:12]} onto {kind} {route.branch}, not deployed; open a {request}: {link}",
                None,
                CommittedOnBranch(**dict(committed), link=link).model_dump(mode="json"),
            )
        if issue is not None:
            await store.update_issue(issue.issue_id, decision.actor, status="fixed")
        deploy = await self.deploys.start_deploy(
            uow,
            source,
            payload.org_id,
            commit,
            decision.actor,
            deploy_id=deploy_id_for(proposal.proposal_id),
            proposal_id=proposal.proposal_id,
            issue_id=None if issue is None else issue.issue_id,
        )
        deploying = CommittedAndDeploying(
            **dict(committed), deploy_id=deploy.deploy_id, build_id=deploy.build_id, deploy_status=deploy.status
        )
        where = f"source version {number}" if number is not None else f"{source.branch}"
        if deploy.status == "failed":
            failed = CommittedDeployFailed(**dict(deploying), deploy_error=deploy.error)
            return Applied(f"approved; {deploy.error}", None, failed.model_dump(mode="json"))
        return Applied(
            f"approved; committed {commit[:12]} onto {where}; deploying it (deploy {deploy.deploy_id})",
            None,
            deploying.model_dump(mode="json"),
        )


def commit_message(
    proposal: StoredProposal,
    payload: SourceChange,
    approver: str,
    issue: Issue | None,
    marker: str,
    message: str | None = None,
) -> str:
    """The approver's ``message`` (else the reason's first line and the reason), then the proposal's trailers."""
    asked = payload.asked_by or "a chat on an API key"
    text = (message or "").strip()
    reason = payload.reason.strip()
    lines = [
        *([text] if text else [reason.splitlines()[0][:72] if reason else "Source proposal", "", reason]),
        "",
        f"Proposal: {proposal.proposal_id}",
        f"Asked by: {asked}",
        f"Approved by: {approver}",
    ]
    if issue is not None:
        lines.append(f"Fixes issue #{issue.number}: {issue.title}")
    lines += ["", marker, ""]
    return "\n".join(lines)


def _title(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first.lstrip("# ").strip()
