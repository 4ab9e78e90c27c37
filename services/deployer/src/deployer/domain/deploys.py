"""What approving, building, pushing and deploying mean, as plain rules (no I/O).

An approval takes one route: onto the production branch (the default: check the files, commit, deploy), onto a
new branch made from the production branch, or onto an existing branch (commit there, no deploy, and a link that
opens a pull or merge request). A hosted source has no branches: it always commits the next source version and
deploys. A deploy is ``pending`` while its build runs, ``started`` once its target took it, ``live`` once promoted
(by itself when auto-promote is on), or ``failed`` when it did not start; a failed deploy can be retried.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from assent.domain import Refusal
from deployer_contract.source import BRANCH_NAME

RouteKind = Literal["production", "new", "existing"]
DeployStatus = Literal["pending", "started", "live", "failed"]
Trigger = Literal["push", "poll", "approval", "manual"]

MAX_MESSAGE = 4000
_BRANCH = re.compile(BRANCH_NAME)


@dataclass(frozen=True)
class Route:
    """Where an approval commits. ``deploys``: whether the commit is deployed (production only)."""

    kind: RouteKind
    branch: str
    message: str | None = None

    @property
    def deploys(self) -> bool:
        return self.kind == "production"


def branch_refusal(name: str) -> str | None:
    """Why ``name`` is not a usable branch name (git's rules for a ref), or None."""
    if not name or len(name) > 200:
        return "a branch name has 1 to 200 characters"
    if not _BRANCH.fullmatch(name):
        return f"{name!r} is not a valid branch name"
    return None


def approve_route(mode: str, production: str, options: Mapping[str, Any]) -> Route | Refusal:
    """The route an approval's ``options`` (``branch``: ``{"kind": "production"|"new"|"existing", "name": ...}``,
    ``message``) ask for, on a source of ``mode`` whose production branch is ``production``."""
    message = options.get("message")
    if message is not None and (
        not isinstance(message, str) or not message.strip() or len(message) > MAX_MESSAGE or "\x00" in message
    ):  # git refuses a NUL in a commit message
        return Refusal(422, "bad_message", f"a commit message is 1 to {MAX_MESSAGE} characters of text, without NUL")
    branch = options.get("branch") or {"kind": "production"}
    if not isinstance(branch, Mapping) or branch.get("kind") not in ("production", "new", "existing"):
        return Refusal(422, "bad_branch", "branch is {kind: production | new | existing, name}")
    kind: RouteKind = branch["kind"]
    if kind == "production":
        return Route("production", production, message)
    if mode == "hosted":
        return Refusal(
            422,
            "hosted_has_no_branches",
            "an Assent-hosted source has no branches: approving commits its next source version and deploys it",
        )
    name = branch.get("name")
    if not isinstance(name, str):
        return Refusal(422, "bad_branch", f"a {kind} branch needs its name")
    why = branch_refusal(name)
    if why is not None:
        return Refusal(422, "bad_branch", why)
    if name == production:
        return Refusal(
            422, "bad_branch", f"{name} is the production branch: approve onto the production branch to deploy"
        )
    return Route(kind, name, message)


def deploy_error(commit: str, reason: str) -> str:
    """The error of a deploy that did not start: it names the commit, which stays."""
    return f"committed {commit[:12]}, but its deploy did not start: {reason}. Retry the deploy to start it again"


def promotion_refusal(status: str, deploy_id: str) -> Refusal | None:
    """Only a started deploy (waiting for promotion) can be promoted."""
    if status == "started":
        return None
    if status == "live":
        return Refusal(409, "already_live", f"deploy {deploy_id} is live already")
    if status == "pending":
        return Refusal(409, "not_started", f"deploy {deploy_id} has not started yet: its build is still running")
    return Refusal(409, "deploy_failed", f"deploy {deploy_id} did not start; retry it first")


def retry_refusal(status: str, deploy_id: str) -> Refusal | None:
    """Only a deploy that did not start can be retried."""
    if status == "failed":
        return None
    return Refusal(409, "not_failed", f"deploy {deploy_id} is {status}; only a deploy that did not start is retried")


# --- push webhooks ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Push:
    """A provider's push event: to which repository (every URL the payload names), which branch, which commit."""

    urls: tuple[str, ...]
    branch: str | None
    commit: str | None


def parse_push(provider: str, payload: Mapping[str, Any]) -> Push | None:
    """A GitHub ``push`` or GitLab ``Push Hook`` payload; None when it is neither."""
    if provider == "github":
        repo = payload.get("repository")
        keys: tuple[str, ...] = ("clone_url", "html_url", "ssh_url", "git_url", "url")
    elif provider == "gitlab":
        repo = payload.get("project") or payload.get("repository")
        keys = ("git_http_url", "git_ssh_url", "web_url", "http_url", "url", "homepage")
    else:
        return None
    if not isinstance(repo, Mapping):
        return None
    urls = tuple(str(repo[k]) for k in keys if isinstance(repo.get(k), str) and repo[k])
    ref = payload.get("ref")
    branch = ref.removeprefix("refs/heads/") if isinstance(ref, str) and ref.startswith("refs/heads/") else None
    after = payload.get("after")
    commit = after if isinstance(after, str) and re.fullmatch(r"[0-9a-f]{40}", after) and set(after) != {"0"} else None
    return Push(urls, branch, commit) if urls else None


def repository_key(url: str) -> str:
    """One spelling of a repository's address: ``host/owner/name``, lower case, whatever the scheme, credential
    or ``.git`` suffix (``git@github.com:o/r.git`` and ``https://github.com/O/r`` are the same repository)."""
    url = url.strip().removesuffix("/").removesuffix(".git")
    if url.startswith("git@") and ":" in url:
        host, path = url[len("git@") :].split(":", 1)
        return f"{host}/{path}".lower()
    if "://" in url:
        rest = url.split("://", 1)[1].split("@", 1)[-1]
        return rest.lower() if not url.startswith("file://") else url.lower()
    return url.lower()


def github_signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    """GitHub signs the body with HMAC-SHA256 of the webhook secret: ``X-Hub-Signature-256: sha256=<hex>``."""
    if not header or not header.startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header.removeprefix("sha256="))


def gitlab_token_ok(secret: str, header: str | None) -> bool:
    """GitLab sends the webhook's secret token as it is: ``X-Gitlab-Token``."""
    return header is not None and hmac.compare_digest(secret.encode(), header.encode())
