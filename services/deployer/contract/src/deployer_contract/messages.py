"""Messages on ``deploys.events``: what the deployer did to an agent's source."""

from typing import Literal

from pydantic import Field

from assent.contracts import Id, Message


class SourceCommitted(Message):
    """An approved source proposal was committed onto the agent's production branch.

    ``source_version`` is the commit; on a hosted source it is the agent's next source version
    (``version_number`` counts them). Building and deploying the commit follow from this event.
    """

    type: Literal["SourceCommitted"] = "SourceCommitted"
    v: Literal[1] = 1
    org_id: Id
    agent_id: Id
    proposal_id: Id
    source_version: str = Field(pattern=r"^[0-9a-f]{40}$")
    branch: str
    mode: Literal["hosted", "external"]
    version_number: int | None = None
    author: Id
    asked_by: str | None = None
    issue_id: Id | None = None
    files: tuple[str, ...] = ()


Digest = str
"""An artifact's name: ``sha256:`` and the hex digest of its bytes (a deterministic tar of the source tree)."""
COMMIT = r"^[0-9a-f]{40}$"
DIGEST = r"^sha256:[0-9a-f]{64}$"


class BuildStarted(Message):
    """A build of one commit started (``attempt`` counts starts: a build interrupted by a crash starts again).

    ``triggers`` say what asked for it so far (``push``, ``poll``, ``approval``); one commit has one build.
    """

    type: Literal["BuildStarted"] = "BuildStarted"
    v: Literal[1] = 1
    org_id: Id
    agent_id: Id
    build_id: Id
    source_version: str = Field(pattern=COMMIT)
    attempt: int = Field(ge=1)
    triggers: tuple[str, ...] = ()


class BuildProgressed(Message):
    """A step of a running build: ``checked`` (every file of the tree passed the proposal checks) or ``packed``."""

    type: Literal["BuildProgressed"] = "BuildProgressed"
    v: Literal[1] = 1
    org_id: Id
    agent_id: Id
    build_id: Id
    source_version: str = Field(pattern=COMMIT)
    step: Literal["checked", "packed"]
    detail: str = ""


class BuildFinished(Message):
    """A build ended, once: ``succeeded`` with its artifact's digest, or ``failed`` with the reason."""

    type: Literal["BuildFinished"] = "BuildFinished"
    v: Literal[1] = 1
    org_id: Id
    agent_id: Id
    build_id: Id
    source_version: str = Field(pattern=COMMIT)
    status: Literal["succeeded", "failed"]
    artifact_digest: Digest | None = Field(None, pattern=DIGEST)
    error: str | None = None


class DeployStarted(Message):
    """A deploy of a built commit was accepted by its target (``target`` names the kind: local, webhook, ...)."""

    type: Literal["DeployStarted"] = "DeployStarted"
    v: Literal[1] = 1
    org_id: Id
    agent_id: Id
    deploy_id: Id
    build_id: Id
    source_version: str = Field(pattern=COMMIT)
    artifact_digest: Digest = Field(pattern=DIGEST)
    target: str
    proposal_id: Id | None = None


class DeployFailed(Message):
    """A deploy did not start (its build failed, or its target refused it); ``error`` names the commit. The
    commit stays; retrying the deploy starts it again."""

    type: Literal["DeployFailed"] = "DeployFailed"
    v: Literal[1] = 1
    org_id: Id
    agent_id: Id
    deploy_id: Id
    source_version: str = Field(pattern=COMMIT)
    error: str
    proposal_id: Id | None = None


class DeployPromoted(Message):
    """A person promoted a started deploy (auto-promote off); :class:`DeployLive` follows once it is live."""

    type: Literal["DeployPromoted"] = "DeployPromoted"
    v: Literal[1] = 1
    org_id: Id
    agent_id: Id
    deploy_id: Id
    source_version: str = Field(pattern=COMMIT)
    actor: Id


class DeployLive(Message):
    """A deploy went live: the agent now runs ``source_version``. ``promoted_by`` is None when it was promoted
    automatically."""

    type: Literal["DeployLive"] = "DeployLive"
    v: Literal[1] = 1
    org_id: Id
    agent_id: Id
    deploy_id: Id
    source_version: str = Field(pattern=COMMIT)
    artifact_digest: Digest = Field(pattern=DIGEST)
    promoted_by: Id | None = None


class IssueFixLinked(Message):
    """An approved fix for an issue was committed with the issue's evals, and its deploy linked as the fix."""

    type: Literal["IssueFixLinked"] = "IssueFixLinked"
    v: Literal[1] = 1
    org_id: Id
    agent_id: Id
    issue_id: Id
    deploy_id: Id
    source_version: str = Field(pattern=COMMIT)
    proposal_id: Id
    actor: Id
