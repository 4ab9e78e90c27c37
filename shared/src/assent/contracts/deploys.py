"""Messages on ``deploys.events``: what the deployer did to an agent's source."""

from typing import Literal

from pydantic import Field

from .envelope import Id, Message


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
