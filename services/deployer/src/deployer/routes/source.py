"""Agents' source: the repository, a person's own commits, deployments, the Proposals page, the builder chat and
issues (the routes of :mod:`deployer_contract.source`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime

from assent.api import Caller, Permission
from assent.contracts import CardField
from assent.domain import Refusal
from assent.hashing import unified_diff
from assent.kinds import SUPERSEDED
from assent.runtime import StoredProposal
from assent.runtime.uow import UnitOfWork
from assent.runtime.walls import NotFound, agent_in
from deployer_contract import source as api
from deployer_contract.source import (
    CommitIn,
    DeploymentIn,
    ExternalRepositoryIn,
    IssueIn,
    IssuePatch,
    RepositoryIn,
    folder_clash,
)

from ..adapters.git import BranchMoved, GitError, Source
from ..adapters.repository import Deploy, Issue
from ..domain import builder, checks
from ..domain.proposals import FileChange, SourceChange, moved_files, text_hash
from ..kinds.source import decode
from . import Resource, Unprocessable, author, refused, store, written
from .answers import deploy_answer, issue_answer

NOT_SHOWN = (
    "the builder chat is only for people with permission to edit the agent's source: an admin or developer, or the "
    "agent's owner or editor"
)


class Repository(Resource):
    async def set_repository(self, caller: Caller, agent_id: str, body: RepositoryIn) -> api.Repository:
        """Create an agent's hosted repository (with its first source version), or attach an external one."""
        actor = caller.actor
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            if isinstance(body, ExternalRepositoryIn):
                try:
                    source = await self.repos.attach_external(agent_id, body.url, body.provider, body.branch)
                except GitError as exc:
                    raise Unprocessable(422, f"the remote could not be read: {exc}") from None
            else:
                files = builder.with_self_editing(body.files) if body.propose_changes_to_itself else dict(body.files)
                if isinstance(files, Refusal):
                    raise refused(files)
                source = await self.repos.create_hosted(agent_id)
                if files:
                    async with self.repos.lock(agent_id):
                        head = await self.repos.head(source)
                        await self.repos.commit(source, head, files, author=author(actor), message="Initial source\n")
            await store(uow).save_source(source, agent.org_id, actor)
            described = await self.describe(uow, agent_id)
            await written(
                uow,
                "set_repository",
                agent,
                "source",
                "attach" if source.mode == "external" else "create",
                f"Source of {agent.name}",
                actor,
                hash_after=described.head,
                detail=f"{source.mode} {source.url} ({source.branch})"
                if source.url
                else f"{source.mode} ({source.branch})",
            )
            return described

    async def get_repository(self, caller: Caller, agent_id: str) -> api.Repository:
        async with self.runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, caller.org)
            return await self.describe(uow, agent_id)

    async def commit_directly(self, caller: Caller, agent_id: str, body: CommitIn) -> api.Committed:
        """A person's own commit onto the production branch (a hosted source's next source version)."""
        actor = caller.actor
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            source = await self.source_of(uow, agent_id)
            async with self.repos.lock(agent_id):
                head = await self.repos.head(source)
                await self.fits_tree(source, head, body.files)
                message = body.message.rstrip("\n") + "\n"
                try:
                    commit = await self.repos.commit(
                        source, head, dict(body.files), author=author(actor), message=message
                    )
                except BranchMoved:
                    raise Unprocessable(
                        409, f"{source.branch} moved while committing; nothing was committed, commit again"
                    ) from None
            count = len(body.files)
            await written(
                uow,
                "commit_directly",
                agent,
                "source",
                "commit",
                f"Source of {agent.name}: {count} file{'s' if count != 1 else ''}",
                actor,
                hash_before=head,
                hash_after=commit,
                detail=f"{source.branch}: {message.strip().splitlines()[0]}" if message.strip() else source.branch,
            )
            return api.Committed(commit=commit, branch=source.branch)

    async def fits_tree(self, source: Source, head: str | None, files: Mapping[str, str | None]) -> None:
        """422 when a file of ``files`` would be a folder of another file of the tree at ``head``, or the other way
        round (git could not write that tree)."""
        kept = {entry.path for entry in await self.repos.tree(source, head)} if head is not None else set()
        kept -= {path for path, text in files.items() if text is None}
        clash = folder_clash(kept | {path for path, text in files.items() if text is not None})
        if clash is not None:
            raise Unprocessable(422, f"{clash} is a file and a folder of another file of the repository at once")

    async def record_deployment(self, caller: Caller, agent_id: str, body: DeploymentIn) -> api.Deployment:
        actor = caller.actor
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            source = await self.source_of(uow, agent_id)
            version = await self.commit_of(source, body.source_version, "deploy") if body.records_version else None
            deployment = await store(uow).add_deployment(agent_id, version, actor)
            await written(
                uow,
                "record_deployment",
                agent,
                "deployment",
                "record",
                f"Deployment of {agent.name}",
                actor,
                hash_after=version,
                detail=str(deployment.deployment_id),
            )
            return api.Deployment(deployment_id=deployment.deployment_id, agent_id=agent_id, source_version=version)

    async def describe(self, uow: UnitOfWork, agent_id: str) -> api.Repository:
        source = await self.source_of(uow, agent_id)
        deployment = await store(uow).latest_deployment(agent_id)
        live = next((d for d in await store(uow).deploys_of(agent_id) if d.status == "live"), None)
        head = await self.repos.head(source)
        return api.Repository(
            agent_id=agent_id,
            mode=source.mode,
            branch=source.branch,
            url=source.url,
            provider=source.provider,
            head=head,
            version_number=await self.repos.count(source, head) if head and source.mode == "hosted" else None,
            deployment=None
            if deployment is None
            else api.RecordedDeployment(
                deployment_id=deployment.deployment_id,
                source_version=deployment.source_version,
                deployed_by=deployment.deployed_by,
                deployed_at=deployment.deployed_at.isoformat(),
            ),
            live=None if live is None else deploy_answer(live),
        )


class Proposals(Resource):
    async def list_proposals(self, caller: Caller, agent_id: str) -> api.ProposalsPage:
        """The Proposals page: Waiting and Decided, with the count of each."""
        async with self.runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, caller.org)
            return await self.page(uow, agent_id)

    async def read_proposal(self, caller: Caller, agent_id: str, proposal_id: str) -> api.ProposalRead:
        async with self.runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, caller.org)
            found = await self.page(uow, agent_id, only=proposal_id)
        items = found.waiting + found.decided
        if not items:
            raise NotFound(f"agent {agent_id!r} has no proposal {proposal_id!r}")
        return api.ProposalRead(**dict(items[0]))  # its resolution: the gateway's to fill

    async def builder_chat(self, caller: Caller, agent_id: str) -> api.BuilderChat:
        """Whether the agent shows the builder chat to the caller: its active deployment declares
        ``propose_source_change`` (read at the version it recorded), or it has a proposal from chat; and only to a
        person with permission to edit its source (:attr:`Permission.APPROVE_SOURCE`)."""
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            source = await store(uow).source(agent_id)
            deployment = await store(uow).latest_deployment(agent_id)
            from_chat = await store(uow).has_chat_proposal(agent_id)
        version = None if deployment is None else deployment.source_version
        declared: list[builder.Declaration] = []
        if source is not None and version is not None:
            tree = [entry.path for entry in await self.repos.tree(source, version)]
            texts = {
                path: decode(raw)
                for path, raw in (await self.repos.read(source, version, builder.candidate_paths(tree))).items()
            }
            declared = builder.declarations(texts)
        shown, reason = builder.shown_reason(declared, from_chat)
        if version is None and not shown:
            if source is None:
                reason = "the agent has no source repository"
            elif deployment is None:
                reason = "the agent is not deployed"
            else:
                reason = "the agent's active deployment recorded no source version; redeploy it"
        person = caller.identity()
        if person is not None and not person.may(Permission.APPROVE_SOURCE, agent.owners, agent.editors):
            shown, reason = False, NOT_SHOWN
        return api.BuilderChat(
            agent_id=agent_id,
            shown=shown,
            reason=reason,
            source_version=version,
            declared_in=[api.Declaration(agent=d.agent, path=d.path) for d in declared],
            has_chat_proposal=from_chat,
        )

    async def page(self, uow: UnitOfWork, agent_id: str, only: str | None = None) -> api.ProposalsPage:
        rows = await store(uow).proposals_of_agent(agent_id)
        if only is not None:
            rows = [(p, at) for p, at in rows if p.proposal_id == only]
        source = await store(uow).source(agent_id)
        waiting_paths = sorted(
            {f.path for p, _ in rows if p.status == "pending" for f in SourceChange.model_validate(p.payload).files}
        )
        head_hashes = await self.head_hashes(source, waiting_paths) if source is not None and waiting_paths else {}
        issues = {issue.issue_id: issue for issue in await store(uow).issues_of(agent_id)}
        by_proposal = {d.proposal_id: d for d in await store(uow).deploys_of(agent_id) if d.proposal_id}
        items = [page_item(p, at, head_hashes, issues, by_proposal.get(p.proposal_id)) for p, at in rows]
        waiting = [item for item in items if item.status == "pending"]
        decided = [item for item in items if item.status != "pending"]
        return api.ProposalsPage(
            agent_id=agent_id,
            counts=api.ProposalCounts(waiting=len(waiting), decided=len(decided)),
            waiting=waiting,
            decided=decided,
        )

    async def head_hashes(self, source: Source, paths: list[str]) -> dict[str, str | None]:
        """The hash of each of ``paths`` at the production branch's head (what a waiting proposal read may have
        changed since)."""
        head = await self.repos.head(source)
        if head is None:
            return {}
        return {path: text_hash(decode(raw)) for path, raw in (await self.repos.read(source, head, paths)).items()}


class Issues(Resource):
    async def list_issues(self, caller: Caller, agent_id: str) -> api.Issues:
        async with self.runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, caller.org)
            return api.Issues(issues=[issue_answer(issue) for issue in await store(uow).issues_of(agent_id)])

    async def create_issue(self, caller: Caller, agent_id: str, body: IssueIn) -> api.Issue:
        actor = caller.actor
        self.check_evals(body.evals)
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            issue_id = f"iss_{uuid.uuid4().hex[:16]}"
            issue = await store(uow).add_issue(
                issue_id, agent_id, agent.org_id, body.title, body.text, dict(body.evals), actor
            )
            await written(
                uow,
                "create_issue",
                agent,
                "issue",
                "create",
                f"Issue #{issue.number} of {agent.name}: {issue.title}",
                actor,
            )
            return issue_answer(issue)

    async def read_issue(self, caller: Caller, agent_id: str, issue_id: str) -> api.Issue:
        async with self.runtime.unit_of_work() as uow:
            await agent_in(uow, agent_id, caller.org)
            return issue_answer(await self.issue_of(uow, agent_id, issue_id))

    async def change_issue(self, caller: Caller, agent_id: str, issue_id: str, body: IssuePatch) -> api.Issue:
        actor = caller.actor
        if body.evals is not None:
            self.check_evals(body.evals)
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            issue = await self.issue_of(uow, agent_id, issue_id)
            fields = body.model_dump(exclude_unset=True)
            if not fields:
                return issue_answer(issue)
            changed = await store(uow).update_issue(issue_id, actor, **fields)
            await written(
                uow,
                "change_issue",
                agent,
                "issue",
                "edit",
                f"Issue #{changed.number} of {agent.name}: {changed.title}",
                actor,
                detail=", ".join(sorted(fields)),
            )
            return issue_answer(changed)

    @staticmethod
    async def issue_of(uow: UnitOfWork, agent_id: str, issue_id: str) -> Issue:
        issue = await store(uow).issue(issue_id)
        if issue is None or issue.agent_id != agent_id:
            raise NotFound(f"agent {agent_id!r} has no issue {issue_id!r}")
        return issue

    def check_evals(self, evals: Mapping[str, str]) -> None:
        """Each regression eval (its path already one under evals/) is JSON that fits the eval schema."""
        for path, text in evals.items():
            refusal = checks.check_file(path, text, self.kind.schemas)
            if refusal is not None:
                raise Unprocessable(422, refusal.message)


def page_item(
    proposal: StoredProposal,
    proposed_at: datetime,
    head_hashes: Mapping[str, str | None],
    issues: Mapping[str, Issue],
    deploy: Deploy | None = None,
) -> api.Proposal:
    """One proposal as the Proposals page shows it."""
    payload = SourceChange.model_validate(proposal.payload)
    changes = payload.files
    stale = moved_files(changes, head_hashes) if proposal.status == "pending" else []
    issue = issues.get(payload.issue_id or "")
    resolution = proposal.resolution or {}
    chat = payload.chat
    from_builder = payload.origin == "builder"
    approved = proposal.status == "approved"
    return api.Proposal(
        proposal_id=proposal.proposal_id,
        session_id=proposal.session_id,
        seq=proposal.seq,
        # The page speaks of approved and discarded: a proposal its chat's next one superseded reads as discarded,
        # with the one that replaced it.
        status="discarded" if proposal.status == SUPERSEDED else proposal.status,
        reason=payload.reason,
        model=payload.model,
        asked_by=payload.asked_by,
        origin=payload.origin,
        chat=None if chat is None else api.ChatLink(session_id=chat, link=f"/api/studio/sessions/{chat}/pending"),
        from_builder_chat=from_builder,
        label="From the builder chat" if from_builder else "View chat",
        fix_for_issue=None
        if issue is None
        else api.IssueLink(
            issue_id=issue.issue_id,
            number=issue.number,
            title=issue.title,
            link=f"/api/workspace/agents/{proposal.agent_id}/issues/{issue.issue_id}",
        ),
        source_version=payload.source_version,
        files=[file_diff(change, stale) for change in changes],
        changed_since=stale,
        actions=(["discard"] if stale else ["approve", "discard"]) if proposal.status == "pending" else [],
        proposed_at=proposed_at.isoformat(),
        resolved_by=proposal.resolved_by,
        resolved_at=None if proposal.resolved_at is None else proposal.resolved_at.isoformat(),
        commit=resolution.get("commit"),
        branch=resolution.get("branch"),
        link=resolution.get("link"),
        deployed=(deploy is not None and deploy.status == "live") if approved else None,
        deploy=None if not approved else "not deployed" if deploy is None else deploy_answer(deploy),
        replaced_by=resolution.get("replaced_by"),
    )


def file_diff(change: FileChange, stale: list[str]) -> api.FileDiff:
    return api.FileDiff(
        path=change.path,
        action=change.action,
        deleted=change.after is None,
        diff=unified_diff(change.before or "", change.after or "", change.path),
        # Counted as a card counts a field, so the files' counts add up to the request's (the tray's).
        lines=CardField(name=change.path, before=change.before, after=change.after).lines,
        changed_since=change.path in stale,
    )
