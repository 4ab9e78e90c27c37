"""Agents' source on the public API, owned by the deployer: the repository (hosted or external), a person's own
commits, deployments, the Proposals page, the builder chat, and issues.

The organisation's wall holds on every route: another organisation's agent answers 404, in the words a missing
one gets. A file of the repository is named by a path inside it (:data:`FilePath`): a path outside it, or under
``.git/``, is refused before git is asked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, model_validator
from pydantic_core import PydanticCustomError

from assent.api.declare import KeysMatch, Matching, PublicRoute, RequestModel
from assent.api.resolution import Resolution
from assent.api.roles import Permission
from assent.contracts import LineCounts
from assent.domain import Refusal
from assent.http import SPACE, NoNul, Omissible, OneLine

OWNER = "deployer"
MAX_PATH = 500
MAX_FILE_CHARS = 160_000
"""A file's text, in characters: what the deployer reads and proposes at most."""

_SEGMENT = r"(?!(?:\.\.?|[Gg][Ii][Tt]~1|\.[Gg][Ii][Tt][. ]*)(?:/|$))[^/\\\x00-\x1f\x7f]+"
REPOSITORY_PATH = rf"^{_SEGMENT}(?:/{_SEGMENT})*$"
"""A relative file path of a repository, as :func:`repository_path` accepts it."""
EVAL_PATH = r"^(?:amodal/)?evals/(?:[^/]+/)*[^/]*\.json$"
"""Where a regression eval sits: a ``.json`` file under ``evals/`` (or ``amodal/evals/``)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")
_EVAL = re.compile(EVAL_PATH)


def repository_path(path: str) -> str | Refusal:
    """The path as the repository names it, or why it names no file of the repository: it must be relative, stay
    inside the repository (no ``.``, ``..`` or empty part), hold no control character or backslash, and not be in
    ``.git/``, git's own folder (nor a file named ``.git``). Git would refuse such a path; it is refused before git
    is asked. :data:`REPOSITORY_PATH` says the same as a pattern."""
    if not path or len(path) > MAX_PATH or _CONTROL.search(path) or path.startswith("/"):
        return Refusal(422, "invalid_path", f"{path!r} is not a relative file path of the repository")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return Refusal(422, "invalid_path", f"{path!r} is not a relative file path of the repository")
    if any(_is_git_folder(part) for part in parts):
        return Refusal(422, "path_refused", f"{path}: .git/ is git's own folder, not a file of the repository")
    return path


def _is_git_folder(part: str) -> bool:
    # As git itself tells them (verify_path): in any case, and as NTFS also reads ".git." or "git~1".
    name = part.lower()
    return name.rstrip(". ") == ".git" or name == "git~1"


def folder_clash(paths: Iterable[str]) -> str | None:
    """A path of ``paths`` that is also a folder of another one (``a.md`` beside ``a.md/b.md``), which no tree can
    hold; None when there is none."""
    paths = list(paths)
    folders = {path[:i] for path in paths for i, c in enumerate(path) if c == "/"}
    return next((path for path in sorted(paths) if path in folders), None)


def _no_folder_clash(files: Mapping[str, str | None]) -> None:
    clash = folder_clash(path for path, text in files.items() if text is not None)
    if clash is not None:
        raise PydanticCustomError(
            "folder_clash", "{path} is a file and a folder of another file at once", {"path": clash}
        )


def _in_repository(path: str) -> str:
    normal = repository_path(path)
    if isinstance(normal, Refusal):
        raise PydanticCustomError(normal.code, "{message}", {"message": normal.message})
    return normal


def _an_eval(path: str) -> str:
    if not _EVAL.match(path):
        raise PydanticCustomError(
            "not_an_eval", "{path}: a regression eval is a .json file under evals/", {"path": path}
        )
    return path


FilePath = Annotated[str, AfterValidator(_in_repository)]
"""A file of the repository (:func:`repository_path`)."""
EvalPath = Annotated[str, AfterValidator(_in_repository), AfterValidator(_an_eval)]
FileText = Annotated[str, Field(max_length=MAX_FILE_CHARS), NoNul]
Files = Annotated[dict[FilePath, FileText], Field(max_length=500), KeysMatch(REPOSITORY_PATH, max_length=MAX_PATH)]
Title = Annotated[str, Field(min_length=1, max_length=300), OneLine]
IssueText = Annotated[str, Field(max_length=20_000), NoNul]
Evals = Annotated[
    dict[EvalPath, FileText], Field(max_length=50), KeysMatch(REPOSITORY_PATH, EVAL_PATH, max_length=MAX_PATH)
]
"""Regression evals by path (JSON files that fit the eval schema, ``schemas/eval.schema.json``)."""
Commit = Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
Branch = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._/-]+$")]
"""An external repository's production branch."""
BRANCH_NAME = r"^(?!HEAD$|[-/.]|.*(?:[/.]$|\.\.|//|@\{|\.lock(?:/|$)|/\.))[^\x00-\x20\x7f~^:?*\[\\]{1,200}$"
"""A branch name git accepts for a new or existing branch (``git check-ref-format --branch``): 1 to 200 characters
without white space, control characters or any of ``~^:?*[\\``; not ``HEAD``; not starting with ``-``,
``/`` or ``.``; no ``..``, ``//`` or ``@{``; no part starting with ``.`` or ending with ``.lock``; not ending with
``/`` or ``.``."""
BranchName = Annotated[str, Field(min_length=1, max_length=200), Matching(BRANCH_NAME, "a branch name git accepts")]
Message = Annotated[
    str, Field(min_length=1, max_length=4000, pattern=rf"^[^\x00]*[^\x00\x09-\x0d\x1c-\x1f{SPACE}][^\x00]*$"), NoNul
]
"""A commit message: 1 to 4,000 characters of text, not only white space."""


# --- requests -------------------------------------------------------------------------------------------------


class HostedRepositoryIn(RequestModel):
    """A repository of Assent; ``files``, if any, are its first source version."""

    mode: Literal["hosted"]
    files: Files = Field(default_factory=dict)
    propose_changes_to_itself: bool = False
    """"Let the agent propose changes to itself": the first source version also holds both ``agents/main`` files,
    ``agent.json`` declaring the source tools and an ``AGENT.md`` prompt; ``files`` may not name them."""

    @model_validator(mode="after")
    def _one_tree(self) -> HostedRepositoryIn:
        _no_folder_clash(self.files)
        return self


class ExternalRepositoryIn(RequestModel):
    """A remote ``url`` with its ``provider``; ``branch`` is the production branch (the remote's default branch
    when left out)."""

    mode: Literal["external"]
    url: Annotated[str, Field(min_length=1, max_length=2000, pattern=r"^[^\x00-\x20\x7f-][^\x00-\x1f\x7f]*$"), OneLine]
    """The remote's address, as git takes it (never an option: it does not start with ``-``)."""
    provider: Literal["github", "gitlab"]
    branch: Branch | None = None


RepositoryIn = Annotated[HostedRepositoryIn | ExternalRepositoryIn, Field(discriminator="mode")]


class CommitIn(RequestModel):
    """Files to commit onto the production branch (``null`` deletes one): a person's own change."""

    files: Annotated[
        dict[FilePath, FileText | None],
        Field(min_length=1, max_length=500),
        KeysMatch(REPOSITORY_PATH, max_length=MAX_PATH),
    ]
    message: Message

    @model_validator(mode="after")
    def _one_tree(self) -> CommitIn:
        _no_folder_clash(self.files)
        return self


class DeploymentIn(RequestModel):
    """Record a deployment of ``source_version`` (default: the production branch's head); ``records_version:
    false`` records one that names no source version, as an older deploy did."""

    source_version: Commit | None = None
    records_version: bool = True


class IssueIn(RequestModel):
    title: Title
    text: IssueText = ""
    evals: Evals = Field(default_factory=dict)


class IssuePatch(RequestModel):
    """A change of an issue: a field left out is kept; none is ever null."""

    title: Omissible[Title] = None
    text: Omissible[IssueText] = None
    status: Omissible[Literal["open", "fixed", "closed"]] = None
    evals: Omissible[Evals] = None


class BranchChoice(RequestModel):
    """Where an approval commits: the production branch (the default: commit and deploy), a ``new`` branch made
    from it, or an ``existing`` one (commit there, no deploy; the answer links to a pull or merge request)."""

    kind: Literal["production", "new", "existing"] = "production"
    name: BranchName | None = None


class SourceApproval(RequestModel):
    """What approving a source proposal takes besides the decision (the ``approve`` decision's options, as the kind
    row refers to them). Approving commits onto the production branch and deploys (the default), or onto a ``new``
    or ``existing`` branch without deploying (the answer's ``effects.link`` opens the pull or merge request);
    ``message`` is the commit's message, the proposal's reason when absent."""

    branch: BranchChoice | None = None
    message: Message | None = None


# --- answers --------------------------------------------------------------------------------------------------


class DeployLinks(BaseModel):
    deploy: str
    build: str


class Deploy(BaseModel):
    deploy_id: str
    agent_id: str
    build_id: str
    source_version: str
    proposal_id: str | None
    issue_id: str | None
    status: Literal["pending", "started", "live", "failed"]
    live: bool
    target: str
    auto_promote: bool
    error: str | None
    requested_by: str | None
    promoted_by: str | None
    created_at: str
    started_at: str | None
    live_at: str | None
    links: DeployLinks


class RecordedDeployment(BaseModel):
    deployment_id: int
    source_version: str | None
    deployed_by: str
    deployed_at: str


class Repository(BaseModel):
    agent_id: str
    mode: Literal["hosted", "external"]
    branch: str | None
    url: str | None
    provider: str | None
    head: str | None
    version_number: int | None
    """A hosted source's source version: how many commits its production branch holds."""
    deployment: RecordedDeployment | None
    live: Deploy | None


class Committed(BaseModel):
    commit: str
    branch: str | None


class Deployment(BaseModel):
    deployment_id: int
    agent_id: str
    source_version: str | None


class Declaration(BaseModel):
    agent: str
    path: str


class BuilderChat(BaseModel):
    """Whether Studio shows the agent's builder chat to the caller, and why."""

    agent_id: str
    shown: bool
    reason: str
    source_version: str | None
    declared_in: list[Declaration]
    has_chat_proposal: bool


class FileDiff(BaseModel):
    path: str
    action: Literal["create", "edit", "delete"]
    deleted: bool
    diff: str
    lines: LineCounts
    """Counted as a card counts a field, so the files' counts add up to the request's."""
    changed_since: bool


class ChatLink(BaseModel):
    """The agent's chat a proposal was asked in."""

    session_id: str
    link: str
    label: Literal["View chat"] = "View chat"


class IssueLink(BaseModel):
    """The issue a proposal fixes."""

    issue_id: str
    number: int
    title: str
    link: str
    label: Literal["Fix for issue"] = "Fix for issue"


class Proposal(BaseModel):
    """A source proposal as the Proposals page shows it."""

    proposal_id: str
    session_id: str
    seq: int
    status: str
    reason: str
    model: str | None
    asked_by: str | None
    origin: str
    chat: ChatLink | None
    from_builder_chat: bool
    label: str
    fix_for_issue: IssueLink | None
    source_version: str | None
    files: list[FileDiff]
    changed_since: list[str]
    actions: list[str]
    proposed_at: str
    resolved_by: str | None
    resolved_at: str | None
    commit: str | None
    branch: str | None
    link: str | None
    deployed: bool | None
    deploy: Deploy | Literal["not deployed"] | None
    """``not deployed`` for one approved onto a branch."""
    replaced_by: str | None


class ProposalRead(Proposal):
    """One source proposal as its own read answers it: as the Proposals page shows it, and once it is decided, how
    (``resolution``: the decisions taken on it, the outcome and its reason, what the coach was told; the gateway fills
    it from its projection, the deployer answers null)."""

    resolution: Resolution | None = None


class ProposalCounts(BaseModel):
    waiting: int
    decided: int


class ProposalsPage(BaseModel):
    agent_id: str
    counts: ProposalCounts
    waiting: list[Proposal]
    decided: list[Proposal]


class Issue(BaseModel):
    issue_id: str
    agent_id: str
    number: int
    title: str
    text: str
    status: Literal["open", "fixed", "closed"]
    evals: dict[str, str]
    created_by: str
    updated_by: str
    fix_deploy_id: str | None


class Issues(BaseModel):
    issues: list[Issue]


# --- routes ---------------------------------------------------------------------------------------------------

AGENT_404 = {404: "No such agent in the caller's organisation"}
SOURCE_404 = {404: "No such agent in the caller's organisation, or it has no source repository"}
COMMIT_RULE = "a source_version that is not a commit of the agent's repository"
EVAL_RULE = "an eval that is not JSON fitting the eval schema (schemas/eval.schema.json)"


def _route(
    method: Any, path: str, name: str, summary: str, permission: Permission, tag: str, **more: Any
) -> PublicRoute:
    return PublicRoute(OWNER, method, path, name, summary, permission, tag, **more)


REPOSITORY = (
    _route(
        "PUT",
        "/agents/{agent_id}/repository",
        "set_repository",
        "Create the agent's hosted source, or attach its external repository",
        Permission.CHANGE_AGENT,
        "repository",
        body=RepositoryIn,
        response=Repository,
        errors=AGENT_404,
        rules="an external remote that cannot be read (or has no such branch); a file that is a folder of another; "
        "with propose_changes_to_itself, files that name agents/main/agent.json or agents/main/AGENT.md",
    ),
    _route(
        "GET",
        "/agents/{agent_id}/repository",
        "get_repository",
        "The agent's source: mode, production branch, head, its recorded deployment and live deploy",
        Permission.READ,
        "repository",
        response=Repository,
        errors=SOURCE_404,
    ),
    _route(
        "POST",
        "/agents/{agent_id}/repository/commits",
        "commit_directly",
        "A person's own commit onto the production branch (a hosted source's next source version)",
        Permission.CHANGE_AGENT,
        "repository",
        body=CommitIn,
        response=Committed,
        status=201,
        errors={**SOURCE_404, 409: "The production branch moved while committing; nothing was committed"},
        rules="a file that is a folder of another file (of the request or the repository)",
    ),
    _route(
        "POST",
        "/agents/{agent_id}/deployments",
        "record_deployment",
        "Record a deployment of a source version (default: the production branch's head)",
        Permission.CHANGE_AGENT,
        "repository",
        body=DeploymentIn,
        response=Deployment,
        status=201,
        errors={**SOURCE_404, 409: "The production branch has no commit to deploy yet"},
        rules=COMMIT_RULE,
    ),
)

PROPOSALS = (
    _route(
        "GET",
        "/agents/{agent_id}/proposals",
        "list_proposals",
        "The Proposals page: waiting and decided proposals with their counts",
        Permission.READ,
        "proposals",
        prefix="/api",
        response=ProposalsPage,
        errors=AGENT_404,
        description='Each proposal with its reason, a diff per file, the model, who asked, its chat or "From the '
        'builder chat", its issue, and the files changed since (then only ``discard`` is offered).',
    ),
    _route(
        "GET",
        "/agents/{agent_id}/proposals/{proposal_id}",
        "read_proposal",
        "One source proposal as the Proposals page shows it, and how it was decided",
        Permission.READ,
        "proposals",
        prefix="/api",
        response=ProposalRead,
        errors={404: "No such proposal of this agent in the caller's organisation"},
    ),
    _route(
        "GET",
        "/agents/{agent_id}/builder-chat",
        "builder_chat",
        "Whether Studio shows the agent's builder chat to the caller, and why",
        Permission.READ,
        "proposals",
        prefix="/api",
        response=BuilderChat,
        errors=AGENT_404,
        description="Only to people with permission to edit its source (admin or developer, or the agent's owner or "
        "editor), and only when its active deployment declares ``propose_source_change`` or it already has a "
        "proposal from chat.",
    ),
)

ISSUES = (
    _route(
        "GET",
        "/agents/{agent_id}/issues",
        "list_issues",
        "The agent's issues",
        Permission.READ,
        "issues",
        response=Issues,
        errors=AGENT_404,
    ),
    _route(
        "POST",
        "/agents/{agent_id}/issues",
        "create_issue",
        "File an issue (title, text, regression evals under evals/)",
        Permission.REVIEW_FEEDBACK,
        "issues",
        body=IssueIn,
        response=Issue,
        status=201,
        errors=AGENT_404,
        rules=EVAL_RULE,
    ),
    _route(
        "GET",
        "/agents/{agent_id}/issues/{issue_id}",
        "read_issue",
        "An issue",
        Permission.READ,
        "issues",
        response=Issue,
        errors={404: "No such issue of this agent in the caller's organisation"},
    ),
    _route(
        "PATCH",
        "/agents/{agent_id}/issues/{issue_id}",
        "change_issue",
        "Change an issue's title, text, status or evals",
        Permission.REVIEW_FEEDBACK,
        "issues",
        body=IssuePatch,
        response=Issue,
        errors={404: "No such issue of this agent in the caller's organisation"},
        rules=EVAL_RULE,
    ),
)

ROUTES: tuple[PublicRoute, ...] = (*REPOSITORY, *PROPOSALS, *ISSUES)
"""The deployer's public routes of agents' source."""
