"""The deployer's entries of the activity feed: what happened to a deploy (requested, failed, promoted, linked as an
issue's fix), who did it, and the links that lead to it. The gateway merges them into the public activity feed
(:data:`assent.api.FEEDS`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

What = Literal["deploy", "deploy failed", "promote", "link fix"]


class DeployLinks(BaseModel):
    """Where an entry leads: its deploy and its commit (a promotion's links)."""

    model_config = ConfigDict(frozen=True)

    deploy: str
    commit: str


class FailedDeployLinks(DeployLinks):
    """A deploy that did not start: also its proposal, if an approval asked for it."""

    proposal_id: str | None


class RequestedDeployLinks(FailedDeployLinks):
    """A deploy asked for: also its build, and the proposal's page."""

    build: str
    proposal: str | None


class FixLinks(RequestedDeployLinks):
    """A deploy linked as an issue's fix: also the issue."""

    issue: str


class ActivityEntry(BaseModel):
    """One entry as the feed lists it: the proposal apart from the other links."""

    model_config = ConfigDict(frozen=True)

    who: str | None
    what: str
    when: str
    agent_id: str
    proposal_id: str | None
    detail: str
    links: dict[str, str | None]


class ActivityFeed(BaseModel):
    """The deployer's answer to ``GET /internal/activity``, newest first."""

    model_config = ConfigDict(frozen=True)

    entries: tuple[ActivityEntry, ...]
