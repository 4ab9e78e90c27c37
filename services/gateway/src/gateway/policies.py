"""The organisation's policy on the public API: read it (any role), read its past versions, set it (an admin, against
the version read: a change made meanwhile is 409, never overwritten; each change an entry of the history), and try
a policy before setting it: replay it over the organisation's last proposals beside what people did.

The organisation is always the caller's, never a parameter.
"""

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from assent.api import Error, Permission
from assent.api.declare import BODY_ERRORS
from assent.policy import Policy, Replay, evaluate, replay

from .adapters.policies import PolicyStore, PolicyVersion, VersionMoved
from .answers import PERSON_ERRORS
from .handlers import Deps, NotFound, Refused

RULES = (
    "A policy that breaks a rule its schema cannot say: a rule with other than one effect, two rules of one name, a"
    " duration over a year, an unknown time zone"
)


BODY: dict[int | str, dict[str, Any]] = {
    status: {"model": Error, "description": why} for status, why in BODY_ERRORS.items()
}


class PolicyView(BaseModel):
    """A version of the policy: its number (0: none was ever set; the empty policy, no rule), the document, its hash
    (hex SHA-256 of the document as JSON with sorted keys and no whitespace), who set it and when."""

    version: int
    policy: Policy
    hash: str
    set_by: str | None
    set_at: datetime | None


class PolicyVersions(BaseModel):
    versions: list[PolicyView]


class PolicyChange(BaseModel):
    """A new policy, made against ``expected_version`` (the version read; 0 for the first)."""

    model_config = ConfigDict(extra="forbid")

    policy: Policy
    expected_version: int = Field(ge=0, le=2_147_483_646, strict=True)


class PolicyTrial(BaseModel):
    """A policy to try over the organisation's ``last`` proposals."""

    model_config = ConfigDict(extra="forbid")

    policy: Policy
    last: int = Field(100, ge=1, le=10_000, strict=True)


class Replayed(Replay):
    """A past proposal, and what the policy tried would have done to it."""

    session_id: str
    seq: int
    kind: str
    action: str
    agent_id: str | None
    target: str
    resolved_by: str | None


class TrialSummary(BaseModel):
    """How many proposals were replayed; how many the rules would have applied and declined, and of those how many
    people decided otherwise; how many would have needed several approvals, expired, escalated or been told."""

    replayed: int
    applied: int
    declined: int
    differ: int
    approvals_required: int
    expired: int
    escalated: int
    notified: int


class TrialResult(BaseModel):
    summary: TrialSummary
    proposals: list[Replayed]


def view(found: PolicyVersion) -> PolicyView:
    return PolicyView(
        version=found.version, policy=found.policy, hash=found.hash, set_by=found.set_by, set_at=found.set_at
    )


def router(deps: Deps, user: Any) -> APIRouter:
    """The policy's routes; ``user`` is the authenticating dependency."""
    routes = APIRouter(tags=["policy"], responses=PERSON_ERRORS)
    store = PolicyStore(deps.engine)

    @routes.get("/api/policy", response_model=PolicyView)
    async def read_policy(person: user) -> PolicyView:
        """The policy in force in the caller's organisation: its rules, in the order they are read."""
        return view(await store.current(person.org_id))

    @routes.get("/api/policy/versions", response_model=PolicyVersions)
    async def policy_versions(person: user, limit: Annotated[int, Query(ge=1, le=500)] = 50) -> PolicyVersions:
        """The policy's versions, newest first."""
        return PolicyVersions(versions=[view(found) for found in await store.versions(person.org_id, limit)])

    @routes.get(
        "/api/policy/versions/{version}",
        response_model=PolicyView,
        responses={404: {"model": Error, "description": "No such version of the caller's organisation's policy"}},
    )
    async def policy_version(person: user, version: Annotated[int, Path(ge=1, le=2_147_483_647)]) -> PolicyView:
        """One past version of the policy."""
        found = await store.at_version(person.org_id, version)
        if found is None:
            raise NotFound(f"the policy has no version {version}")
        return view(found)

    @routes.put(
        "/api/policy",
        response_model=PolicyView,
        responses={
            409: {"model": Error, "description": "The policy changed since the version the change was made against"},
            422: {"model": Error, "description": RULES},
            **BODY,
        },
        openapi_extra={"x-assent-rules": True},
    )
    async def set_policy(change: PolicyChange, person: user) -> PolicyView:
        """Set the caller's organisation's policy (an admin): it becomes the version after ``expected_version``, and
        the change is an entry of the history (who, when, the hashes of the documents before and after). A change
        made against an older version is 409 and writes nothing: read the policy again, and make it against that."""
        if not person.may(Permission.SET_POLICY):
            raise HTTPException(403, Permission.SET_POLICY.refusal)
        try:
            return view(await store.set(person.org_id, change.policy, change.expected_version, person.user_id))
        except VersionMoved as moved:
            raise Refused(
                409,
                f"the policy is at version {moved.current}, not {change.expected_version}: someone changed it"
                " meanwhile; read it again and make the change against that version",
            ) from None

    @routes.post(
        "/api/policy/test",
        response_model=TrialResult,
        responses={422: {"model": Error, "description": RULES}, **BODY},
        openapi_extra={"x-assent-rules": True},
    )
    async def try_policy(trial: PolicyTrial, person: user) -> TrialResult:
        """What ``policy`` would have done to the caller's organisation's last ``last`` proposals, newest first,
        beside what people did: which rule would have decided each (and whether people decided otherwise), required
        approvals, expired or escalated it (by how long it waited), and which webhooks would have been told. Nothing
        is changed; the policy need not be set."""
        if not person.may(Permission.SET_POLICY):
            raise HTTPException(403, Permission.SET_POLICY.refusal)
        now = datetime.now(UTC)
        replayed = []
        for past in await store.last_proposals(person.org_id, trial.last):
            done = replay(
                evaluate(trial.policy, 0, past.proposed), past.status, past.proposed.proposed_at, past.resolved_at, now
            )
            replayed.append(
                Replayed(
                    **done.model_dump(),
                    session_id=past.session_id,
                    seq=past.seq,
                    kind=past.proposed.kind,
                    action=past.proposed.action,
                    agent_id=past.proposed.agent_id,
                    target=past.proposed.label,
                    resolved_by=past.resolved_by,
                )
            )
        return TrialResult(summary=summary(replayed), proposals=replayed)

    return routes


def summary(replayed: list[Replayed]) -> TrialSummary:
    def count(decided: Literal["apply", "decline"]) -> int:
        return sum(1 for r in replayed if r.decided == decided)

    return TrialSummary(
        replayed=len(replayed),
        applied=count("apply"),
        declined=count("decline"),
        differ=sum(1 for r in replayed if r.differs),
        approvals_required=sum(1 for r in replayed if r.approvals is not None and r.approvals > 1),
        expired=sum(1 for r in replayed if r.expired_by is not None),
        escalated=sum(1 for r in replayed if r.escalated_by is not None),
        notified=sum(1 for r in replayed if r.notified),
    )
