"""The source kind's handlers on the proposal kit, with an in-memory unit of work and real git repositories in a
temporary folder."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from assent.contracts import (
    DecisionMade,
    ProposalOutcome,
    ProposalProposed,
    Requester,
    SessionContext,
    ToolCall,
    ToolResult,
)
from assent.domain import Agent, Guild
from assent.runtime import OwnerKit
from assent.testing import FakeUnitOfWork, FakeWorkspace, shown_line_counts
from deployer.adapters.artifacts import Artifacts
from deployer.adapters.formats import load_docs, load_schemas
from deployer.adapters.git import GitRepos, Source
from deployer.adapters.repository import Build, Deploy, DeployerRepository, Deployment, DeploySettings, Issue
from deployer.adapters.targets import Targets
from deployer.deploys import Deploys
from deployer.domain.activity import DeployLinks
from deployer.domain.proposals import SourceChange
from deployer.kinds.source import SourceKind
from deployer.routes.source import file_diff
from deployer_contract.deploys import LocalTarget
from deployer_contract.messages import SourceCommitted

FILES = {"skills/refunds.md": "# Refunds\n", "knowledge/policy.md": "Five days.\n", "amodal.json": "{}\n"}
SAM = Requester(user_id="u_sam", email="sam@acme.example", org_id="acme")


class FakeDeployerRepository:
    """The handlers' view of the deployer's tables, as dicts."""

    def __init__(self) -> None:
        self.sources: dict[str, Source] = {}
        self.deployments: dict[str, Deployment] = {}
        self.chats: dict[str, str] = {}
        self.turns: dict[tuple[str, str], str | None] = {}
        self.failed_calls: dict[tuple[str, str], list[str]] = {}
        self.read_hashes: dict[str, dict[str, str | None]] = {}
        self.issues: dict[str, Issue] = {}
        self.settings: dict[str, DeploySettings] = {}
        self.builds: dict[str, Build] = {}
        self.build_triggers: dict[str, set[tuple[str, str]]] = {}
        self.deploys: dict[str, Deploy] = {}
        self.activity: list[tuple[str, str | None, str]] = []
        self.jobs: list[tuple[str, str]] = []

    async def source(self, agent_id: str) -> Source | None:
        return self.sources.get(agent_id)

    async def latest_deployment(self, agent_id: str) -> Deployment | None:
        return self.deployments.get(agent_id)

    async def waiting(self, session_id: str) -> str | None:
        return self.chats.get(session_id)

    async def set_waiting(self, session_id: str, proposal_id: str) -> None:
        self.chats[session_id] = proposal_id

    async def turn_baseline(self, session_id: str, turn_id: str, current: str | None) -> str | None:
        return self.turns.setdefault((session_id, turn_id), current)

    async def set_turn_baseline(self, session_id: str, turn_id: str, proposal_id: str) -> None:
        self.turns[(session_id, turn_id)] = proposal_id

    async def turn_failure(self, session_id: str, turn_id: str, tool_call_id: str) -> int:
        failed = self.failed_calls.setdefault((session_id, turn_id), [])
        if tool_call_id not in failed:
            failed.append(tool_call_id)
        return failed.index(tool_call_id)

    async def record_reads(self, session_id: str, hashes: dict[str, str | None], source_version: str) -> None:
        self.read_hashes.setdefault(session_id, {}).update(hashes)

    async def reads(self, session_id: str) -> dict[str, str | None]:
        return dict(self.read_hashes.get(session_id, {}))

    async def issue(self, issue_id: str) -> Issue | None:
        return self.issues.get(issue_id)

    async def update_issue(self, issue_id: str, actor: str, **fields: Any) -> Issue:
        self.issues[issue_id] = dataclasses.replace(self.issues[issue_id], **fields, updated_by=actor)
        return self.issues[issue_id]

    # --- builds and deploys ---

    async def deploy_settings(self, agent_id: str) -> DeploySettings:
        return self.settings.get(agent_id, DeploySettings(agent_id))

    async def ensure_build(
        self, build_id: str, agent_id: str, org_id: str, commit: str, trigger: str, ref: str, actor: str | None
    ) -> tuple[Build, bool]:
        found = next((b for b in self.builds.values() if (b.agent_id, b.source_version) == (agent_id, commit)), None)
        made = found is None
        if found is None:
            now = datetime.now(UTC)
            found = Build(build_id, agent_id, org_id, commit, "queued", None, "", None, 0, now, None, None)
            self.builds[build_id] = found
            self.jobs.append(("build", build_id))
        self.build_triggers.setdefault(found.build_id, set()).add((trigger, ref))
        return found, made

    async def build(self, build_id: str, *, for_update: bool = False) -> Build | None:
        return self.builds.get(build_id)

    async def deploy(self, deploy_id: str, *, for_update: bool = False) -> Deploy | None:
        return self.deploys.get(deploy_id)

    async def add_deploy(self, **values: Any) -> Deploy:
        now = datetime.now(UTC)
        fields = {"error": None, "attempts": 0, "promoted_by": None, "created_at": now}
        deploy = Deploy(**{**fields, "started_at": None, "live_at": None, **values})
        return self.deploys.setdefault(deploy.deploy_id, deploy)

    async def add_activity(
        self, org_id: str, agent_id: str, what: str, who: str | None, detail: str, links: DeployLinks
    ) -> None:
        self.activity.append((what, who, detail))

    async def link_fix(self, issue_id: str, deploy_id: str) -> None:
        self.issues[issue_id] = dataclasses.replace(self.issues[issue_id], fix_deploy_id=deploy_id)

    async def enqueue(self, kind: str, ref: str) -> None:
        self.jobs.append((kind, ref))


@dataclasses.dataclass
class Rig:
    kit: OwnerKit
    uow: FakeUnitOfWork
    store: FakeDeployerRepository
    repos: GitRepos
    source: Source
    seq: itertools.count[int]

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        turn: str = "t1",
        channel: str = "web",
        requester: Requester | None = SAM,
        tool_call_id: str | None = None,
    ) -> ToolResult:
        self.uow.clear()
        context = SessionContext(
            org_id="acme",
            source_guild_id="g1",
            operator_user_id="olga",
            channel=channel,  # type: ignore[arg-type]
            requester=requester,
            model="m1",
        )
        n = next(self.seq)
        message = ToolCall(
            session_id="s1",
            seq=n,
            turn_id=turn,
            step=0,
            tool_call_id=tool_call_id or f"call_{n}",
            tool=tool,
            arguments=arguments,
            session=context,
        )
        await self.kit.on_tool_call(message, self.uow)  # type: ignore[arg-type]
        (result,) = self.uow.messages(ToolResult)
        return result

    async def decide(self, proposal_id: str, decision: str, **options: Any) -> ProposalOutcome:
        self.uow.clear()
        held = self.uow.proposals.proposals[proposal_id]
        message = DecisionMade(
            decision_id=f"dec_{proposal_id}_{decision}",
            proposal_id=proposal_id,
            session_id=held.session_id,
            seq=held.seq,
            kind="source",
            decision=decision,  # type: ignore[arg-type]
            actor="dana@acme.example",
            options=options,
        )
        await self.kit.on_decision(message, self.uow)  # type: ignore[arg-type]
        (outcome,) = self.uow.messages(ProposalOutcome)
        return outcome


@pytest.fixture
async def rig(tmp_path: Path) -> Rig:
    repos = GitRepos(tmp_path / "repos")
    source = await repos.create_hosted("ada")
    first = await repos.commit(source, None, FILES, author=("olga", "olga@acme.example"), message="first\n")
    store = FakeDeployerRepository()
    store.sources["ada"] = source
    store.deployments["ada"] = Deployment(1, "ada", first, "olga", datetime.now(UTC))
    workspace = FakeWorkspace(
        {"acme": "Acme"}, [Guild("g1", "acme", "Support")], [Agent("ada", "acme", "g1", "Ada", editors=("u_ed",))]
    )
    uow = FakeUnitOfWork(workspace=workspace, stores={DeployerRepository: store})
    deploys = Deploys(
        repos, Artifacts(tmp_path / "artifacts"), Targets(tmp_path / "live", LocalTarget(kind="local")), {}
    )
    kit = OwnerKit("deployer", [SourceKind(repos, load_schemas(), load_docs(), deploys)])
    return Rig(kit, uow, store, repos, source, itertools.count(1))


async def propose(
    rig: Rig, changes: dict[str, str | None], *, turn: str = "t1", channel: str = "web", **call: Any
) -> ToolResult:
    body = [{"path": p, "content": c} for p, c in changes.items()]
    return await rig.call(
        "propose_source_change",
        {"agent_id": "ada", "files": body, "reason": "asked"},
        turn=turn,
        channel=channel,
        **call,
    )


async def test_a_proposal_is_recorded_with_its_files_requester_and_model(rig: Rig) -> None:
    result = await propose(rig, {"skills/refunds.md": "# Refunds\nConfirm.\n"})
    assert result.ok and result.widget is not None
    (proposed,) = rig.uow.messages(ProposalProposed)
    assert (
        proposed.kind == "source" and proposed.section == "Source" and proposed.card.apply_label == "Approve and deploy"
    )
    assert proposed.base.files is not None and list(proposed.base.files) == ["skills/refunds.md"]
    held = rig.uow.proposals.proposals[result.widget.proposal_id]
    assert held.payload["asked_by"] == "sam@acme.example" and held.payload["model"] == "m1"
    assert held.payload["chat"] == "s1" and held.payload["origin"] == "agent" == proposed.card.origin


async def test_tools_are_refused_outside_web_api_and_builder_chat_and_before_a_recorded_version(rig: Rig) -> None:
    for channel in ("local-dev", "channel", "studio"):
        result = await rig.call("list_repo_files", {"agent_id": "ada"}, channel=channel)
        assert result.error is not None and result.error.code == "tool_unavailable"
    rig.store.deployments["ada"] = Deployment(2, "ada", None, "olga", datetime.now(UTC))
    result = await propose(rig, {"skills/refunds.md": "x\n"})
    assert result.error is not None and result.error.code == "redeploy_first"
    assert rig.uow.messages(ProposalProposed) == []


async def test_a_new_proposal_supersedes_the_waiting_one_through_an_outcome(rig: Rig) -> None:
    first = await propose(rig, {"skills/refunds.md": "# Refunds\nv2\n"})
    second = await propose(rig, {"knowledge/policy.md": "Three days.\n"}, turn="t2")
    assert first.widget is not None and second.widget is not None and second.output is not None
    assert second.output["replaces"] == first.widget.proposal_id
    (outcome,) = rig.uow.messages(ProposalOutcome)
    assert outcome.proposal_id == first.widget.proposal_id and outcome.outcome == "superseded"
    assert outcome.effects == {"replaced_by": second.widget.proposal_id}
    assert rig.uow.proposals.proposals[first.widget.proposal_id].status == "superseded"
    (proposed,) = rig.uow.messages(ProposalProposed)
    assert [f.name for f in proposed.card.fields] == ["knowledge/policy.md", "skills/refunds.md"]


async def test_dropping_a_file_the_waiting_proposal_creates_removes_it(rig: Rig) -> None:
    first = await propose(rig, {"knowledge/faq.md": "# FAQ\n", "skills/refunds.md": "# Refunds\nv2\n"})
    assert first.ok
    dropped = await propose(rig, {"knowledge/faq.md": None}, turn="t2")
    assert dropped.ok and dropped.output is not None, dropped
    assert dropped.output["files"] == [{"path": "skills/refunds.md", "action": "edit"}]
    (proposed,) = rig.uow.messages(ProposalProposed)
    assert [f.name for f in proposed.card.fields] == ["skills/refunds.md"]
    # Dropping the last file leaves nothing to propose; the waiting proposal is discarded instead.
    last = await propose(rig, {"skills/refunds.md": "# Refunds\n"}, turn="t3")
    assert last.error is not None and last.error.code == "nothing_to_propose"
    assert "discard the waiting proposal" in last.error.message
    # A file neither deployed nor in the waiting proposal still cannot be deleted.
    unknown = await propose(rig, {"knowledge/none.md": None}, turn="t4")
    assert unknown.error is not None and unknown.error.code == "unknown_file"


async def test_a_chat_keeps_its_one_waiting_proposal_for_one_agent(rig: Rig) -> None:
    rig.uow.workspace.agents["bob"] = Agent("bob", "acme", "g1", "Bob")
    rig.store.sources["bob"] = rig.source
    rig.store.deployments["bob"] = rig.store.deployments["ada"]
    first = await propose(rig, {"skills/refunds.md": "# Refunds\nv2\n"})
    assert first.widget is not None
    other = await rig.call(
        "propose_source_change",
        {"agent_id": "bob", "files": [{"path": "knowledge/faq.md", "content": "# FAQ\n"}], "reason": "asked"},
        turn="t2",
    )
    assert other.error is not None and other.error.code == "another_agent", other
    assert rig.uow.proposals.proposals[first.widget.proposal_id].status == "pending"


async def test_a_reply_that_outlived_its_waiting_proposal_proposes_nothing(rig: Rig) -> None:
    first = await propose(rig, {"skills/refunds.md": "# Refunds\nv2\n"})
    assert first.widget is not None
    await rig.call("read_repo_file", {"agent_id": "ada", "path": "amodal.json"}, turn="t2")
    assert (await rig.decide(first.widget.proposal_id, "discard")).outcome == "discarded"
    late = await propose(rig, {"knowledge/policy.md": "Three days.\n"}, turn="t2")
    assert late.error is not None and late.error.code == "proposal_decided"
    fresh = await propose(rig, {"knowledge/policy.md": "Three days.\n"}, turn="t3")
    assert fresh.ok and fresh.output is not None and fresh.output["replaces"] is None


async def test_approving_commits_as_the_approver_and_announces_it(rig: Rig) -> None:
    result = await propose(rig, {"skills/refunds.md": "# Refunds\nv2\n"})
    assert result.widget is not None
    outcome = await rig.decide(result.widget.proposal_id, "approve")
    assert outcome.outcome == "approved" and outcome.status == 200
    commit = outcome.effects["commit"]
    assert await rig.repos.head(rig.source) == commit and outcome.effects["version_number"] == 2
    assert (await rig.repos.read(rig.source, commit, ["skills/refunds.md"]))["skills/refunds.md"] == b"# Refunds\nv2\n"
    (event,) = rig.uow.messages(SourceCommitted)
    assert event.source_version == commit and event.author == "dana@acme.example"
    assert event.asked_by == "sam@acme.example"


async def test_approving_after_the_file_moved_is_stale_and_changes_nothing(rig: Rig) -> None:
    result = await propose(rig, {"skills/refunds.md": "# Refunds\nv2\n"})
    assert result.widget is not None
    head = await rig.repos.head(rig.source)
    moved = await rig.repos.commit(
        rig.source, head, {"skills/refunds.md": "by hand\n"}, author=("x", "x@acme.example"), message="m\n"
    )
    outcome = await rig.decide(result.widget.proposal_id, "approve")
    assert outcome.outcome == "stale" and outcome.status == 409 and "skills/refunds.md" in outcome.detail
    assert await rig.repos.head(rig.source) == moved
    assert rig.uow.proposals.proposals[result.widget.proposal_id].status == "pending"
    assert rig.uow.messages(SourceCommitted) == []
    card = await rig.kit.live_card(result.widget.proposal_id, rig.uow)
    assert card is not None and card.stale and "skills/refunds.md" in card.notes[0]
    assert (await rig.decide(result.widget.proposal_id, "discard")).outcome == "discarded"


async def test_approving_onto_production_starts_a_build_and_a_deploy_of_the_commit(rig: Rig) -> None:
    result = await propose(rig, {"skills/refunds.md": "# Refunds\nv2\n"})
    assert result.widget is not None
    outcome = await rig.decide(result.widget.proposal_id, "approve")
    commit, deploy_id = outcome.effects["commit"], outcome.effects["deploy_id"]
    assert outcome.effects["route"] == "production" and outcome.effects["deploy_status"] == "pending"
    (deploy,) = rig.store.deploys.values()
    (build,) = rig.store.builds.values()
    assert deploy.deploy_id == deploy_id and deploy.build_id == build.build_id and deploy.source_version == commit
    assert build.source_version == commit
    assert rig.store.build_triggers[build.build_id] == {("approval", result.widget.proposal_id)}
    assert rig.store.jobs == [("build", build.build_id)]
    assert [what for what, _, _ in rig.store.activity] == ["deploy"]
    (event,) = rig.uow.messages(SourceCommitted)
    assert event.branch == "main"


async def test_a_hosted_source_refuses_a_branch_and_commits_nothing(rig: Rig) -> None:
    result = await propose(rig, {"skills/refunds.md": "# Refunds\nv2\n"})
    assert result.widget is not None
    head = await rig.repos.head(rig.source)
    outcome = await rig.decide(result.widget.proposal_id, "approve", branch={"kind": "new", "name": "try"})
    assert outcome.outcome == "refused" and outcome.status == 422 and "no branches" in outcome.detail
    assert await rig.repos.head(rig.source) == head and rig.store.deploys == {}
    assert rig.uow.proposals.proposals[result.widget.proposal_id].status == "pending"


async def test_an_external_source_commits_onto_a_new_branch_without_deploying(rig: Rig, tmp_path: Path) -> None:
    remotes = GitRepos(tmp_path / "remotes")  # a bare repository to serve as the remote
    upstream = await remotes.create_hosted("upstream")
    await remotes.commit(upstream, None, FILES, author=("o", "o@acme.example"), message="first\n")
    remote = remotes.path("upstream")
    shutil.rmtree(rig.repos.path("ada"))  # the agent's source moves from hosted to external
    source = await rig.repos.attach_external("ada", f"file://{remote}", "gitlab")
    rig.store.sources["ada"] = source
    production = await rig.repos.head(source)
    assert production is not None
    rig.store.deployments["ada"] = Deployment(3, "ada", production, "olga", datetime.now(UTC))
    result = await propose(rig, {"skills/refunds.md": "# Refunds\nv2\n"})
    assert result.widget is not None
    outcome = await rig.decide(
        result.widget.proposal_id, "approve", branch={"kind": "new", "name": "fix/refunds"}, message="Refunds v2"
    )
    assert outcome.outcome == "approved" and outcome.effects["route"] == "new"
    commit = outcome.effects["commit"]
    assert await rig.repos.branch_head(source, "fix/refunds") == commit and await rig.repos.head(source) == production
    assert outcome.effects["link"] == (
        f"file://{str(remote).removesuffix('.git')}/-/merge_requests/new?"
        "merge_request%5Bsource_branch%5D=fix%2Frefunds&merge_request%5Btarget_branch%5D=main"
    )
    assert "merge request" in outcome.detail and rig.store.deploys == {} and rig.store.builds == {}


# --- the builder chat: who may use it, and its one chance to fix a file per reply ---------------------------------

BAD_JSON = {"stores/orders.json": "{not json"}
GOOD_STORE = {
    "stores/orders.json": '{"name": "orders", "entity": {"name": "Order", "key": "{id}", "schema": {"id": {"type": "string"}}}}'
}


async def test_the_builder_gets_one_chance_per_reply_to_fix_a_file(rig: Rig) -> None:
    first = await propose(rig, BAD_JSON, channel="builder", turn="t1")
    second = await propose(rig, {"amodal.json": "[1,"}, channel="builder", turn="t1")
    third = await propose(rig, BAD_JSON, channel="builder", turn="t1")
    assert first.error is not None and first.error.code == "invalid_json"
    assert "stores/orders.json" in first.error.message and "one more try" in first.error.message
    assert not first.error.message.startswith("nothing was proposed")
    for later, path in ((second, "amodal.json"), (third, "stores/orders.json")):
        assert later.error is not None and later.error.code == "invalid_json"
        assert later.error.message.startswith("nothing was proposed: ") and path in later.error.message
    assert rig.store.failed_calls[("s1", "t1")] == ["call_1", "call_2", "call_3"]
    fresh = await propose(rig, BAD_JSON, channel="builder", turn="t2")
    assert fresh.error is not None and "one more try" in fresh.error.message
    fixed = await propose(rig, GOOD_STORE, channel="builder", turn="t2")
    assert fixed.ok and fixed.widget is not None
    assert len(rig.uow.proposals.proposals) == 1
    assert rig.uow.messages(ProposalProposed)[-1].card.origin == "builder"


async def test_a_call_sent_again_keeps_its_place_among_the_replys_failures(rig: Rig) -> None:
    first = await propose(rig, BAD_JSON, channel="builder", tool_call_id="call_a")
    again = await propose(rig, BAD_JSON, channel="builder", tool_call_id="call_a")
    assert first.error is not None and again.error is not None
    assert again.error.message == first.error.message and "one more try" in again.error.message
    second = await propose(rig, BAD_JSON, channel="builder", tool_call_id="call_b")
    second_again = await propose(rig, BAD_JSON, channel="builder", tool_call_id="call_b")
    assert second.error is not None and second_again.error is not None
    assert (
        second.error.message.startswith("nothing was proposed") and second_again.error.message == second.error.message
    )
    assert rig.store.failed_calls[("s1", "t1")] == ["call_a", "call_b"]


async def test_path_refusals_and_an_agents_own_chat_do_not_use_the_chance(rig: Rig) -> None:
    refused = await propose(rig, {".env": "A=1\n"}, channel="builder")
    assert (
        refused.error is not None
        and refused.error.code == "path_refused"
        and "one more try" not in refused.error.message
    )
    agent = await propose(rig, {"skills/keys.md": "sk-ant-abcdefghijklmnopqrstuvwxyz012345\n"}, turn="t9")
    assert agent.error is not None and agent.error.code == "secret_value" and "one more try" not in agent.error.message
    assert rig.store.failed_calls == {}
    first = await propose(rig, BAD_JSON, channel="builder")
    assert first.error is not None and "one more try" in first.error.message


async def test_a_builder_call_is_refused_when_its_requester_cannot_edit_the_source(rig: Rig) -> None:
    for requester in (
        Requester(user_id=None),
        Requester(user_id="u_x", email="x@other.example", org_id="other"),
    ):
        result = await rig.call("list_repo_files", {"agent_id": "ada"}, channel="builder", requester=requester)
        assert result.error is not None and result.error.code == "builder_not_allowed", result
        assert result.error.status == 403
        result = await propose(rig, GOOD_STORE, channel="builder", requester=requester)
        assert result.error is not None and result.error.code == "builder_not_allowed"
    assert rig.uow.proposals.proposals == {}
    for requester in (SAM, Requester(user_id="u_ed", org_id="other"), None):
        result = await rig.call("list_repo_files", {"agent_id": "ada"}, channel="builder", requester=requester)
        assert result.ok, result
    # an agent's own chat on an API key is still served
    result = await rig.call("list_repo_files", {"agent_id": "ada"}, channel="api", requester=Requester(user_id=None))
    assert result.ok


async def test_approving_a_deletion_removes_the_file_from_the_bare_repository(rig: Rig) -> None:
    read = await rig.call("read_repo_file", {"agent_id": "ada", "path": "knowledge/policy.md"}, channel="builder")
    assert read.ok
    result = await propose(rig, {"knowledge/policy.md": None}, channel="builder")
    assert result.widget is not None
    outcome = await rig.decide(result.widget.proposal_id, "approve")
    assert outcome.outcome == "approved", outcome.detail
    commit = outcome.effects["commit"]
    assert [e.path for e in await rig.repos.tree(rig.source, commit)] == ["amodal.json", "skills/refunds.md"]


@pytest.mark.parametrize(
    ("changes", "tray", "card"),
    [
        (
            {"skills/refunds.md": "# Refunds\nConfirm.\n", "knowledge/faq.md": "Q.\nA.\n"},
            (3, 0),
            [("knowledge/faq.md", 2, 0), ("skills/refunds.md", 1, 0)],  # by path
        ),
        ({"knowledge/policy.md": "Three days.\n"}, (1, 1), [("knowledge/policy.md", 1, 1)]),
        ({"knowledge/policy.md": None}, (0, 1), [("knowledge/policy.md", 0, 1)]),
    ],
    ids=["a change and a new file", "an edit", "a deletion"],
)
async def test_the_tray_counts_the_lines_the_files_show(
    rig: Rig, changes: dict[str, str | None], tray: tuple[int, int], card: list[tuple[str, int, int]]
) -> None:
    """The tray's count of a source proposal is its files' on the card and on the Proposals page, added up."""
    read = await rig.call("read_repo_file", {"agent_id": "ada", "path": "knowledge/policy.md"}, channel="builder")
    assert read.ok
    result = await propose(rig, changes, channel="builder")
    assert result.widget is not None, result.error
    shown = await shown_line_counts(rig.kit, rig.uow, result.widget.proposal_id)
    assert (shown.tray, shown.card) == (tray, card)
    assert shown.tray == shown.card_total
    payload = SourceChange.model_validate(rig.uow.proposals.proposals[result.widget.proposal_id].payload)
    page = [file_diff(change, []) for change in payload.files]
    assert [(f.path, f.lines.added, f.lines.removed) for f in page] == card
