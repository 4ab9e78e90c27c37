"""An organisation's policy: ordered rules that say what happens to a proposal beside a person's decision.

A policy is data (JSON or YAML of :class:`Policy`; its JSON Schema is published as
``contracts/schemas/policy.json``). Each :class:`Rule` matches proposals (:class:`Match`: every condition given must
hold; a list holds when any of its values does) and has one effect: ``decide`` (apply or decline at once, as the
rule), ``require`` (N approvals by people holding a role or listed by name), ``expire_after`` (the proposal ends as
``expired``), ``notify`` (webhooks) or ``escalate`` (notify others after a while).

:func:`evaluate` is the whole of how rules combine, a pure function: rules are read in order, and for each effect the
first rule that matches and has it wins (so one policy can require two approvals, expire after a day and notify, for
the same proposal), except ``notify``, where every matching rule's webhooks are notified. A ``decide`` or a
``require`` that comes first excludes the other: whichever of the two matches first is the proposal's decision rule.
"""

from __future__ import annotations

import fnmatch
from datetime import datetime, time, timedelta
from typing import Annotated, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

Name = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.:-]*$")]
Pattern = Annotated[str, Field(min_length=1, max_length=300)]


def _written(value: object) -> object:
    # A duration or a time of day is written as text (ISO 8601), as the schema says; pydantic would also read a
    # number as seconds.
    if isinstance(value, bool | int | float):
        raise ValueError("must be written as text (ISO 8601: PT30M, P1D; 09:00)")
    return value


Duration = Annotated[timedelta, BeforeValidator(_written), Field(gt=timedelta(0), le=timedelta(days=365))]
"""An ISO 8601 duration (``PT30M``, ``P1D``), at most a year."""
Clock = Annotated[time, BeforeValidator(_written)]
Count = Annotated[int, Field(strict=True)]
"""An integer written as one (not ``true``, not ``"3"``)."""
Role = Literal["admin", "developer", "reviewer", "viewer"]
EFFECTS = ("decide", "require", "expire_after", "notify", "escalate")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TimeOfDay(_Strict):
    """Between ``after`` (inclusive) and ``before`` (exclusive) in ``zone`` (an IANA name); ``after`` later than
    ``before`` spans midnight (22:00 to 06:00)."""

    after: Clock
    before: Clock
    zone: str = "UTC"

    @field_validator("zone")
    @classmethod
    def _known(cls, zone: str) -> str:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{zone!r} is not a time zone (an IANA name such as Europe/Paris)") from None
        return zone

    def holds(self, at: datetime) -> bool:
        local = at.astimezone(ZoneInfo(self.zone)).time().replace(tzinfo=None)
        if self.after <= self.before:
            return self.after <= local < self.before
        return local >= self.after or local < self.before


class Coach(_Strict):
    """The proposing coach: where it runs (``channel``: studio, web, api, builder, …) and its model (globs)."""

    channel: list[str] | None = None
    model: list[Pattern] | None = None


class Match(_Strict):
    """What a rule applies to. Each condition given must hold; a list holds when any of its values does; a condition
    left out holds for every proposal. ``target`` globs the target's path, else its label (``skills/*``,
    ``Memory of *``); ``server`` globs a login's server; ``lines`` bounds the lines (or records) changed, added and
    removed together."""

    kind: list[str] | None = None
    action: list[str] | None = None
    agent: list[str] | None = None
    guild: list[str] | None = None
    target: list[Pattern] | None = None
    server: list[Pattern] | None = None
    lines_at_least: Count | None = Field(None, ge=0)
    lines_at_most: Count | None = Field(None, ge=0)
    widens: Annotated[bool, Field(strict=True)] | None = None
    coach: Coach | None = None
    time_of_day: TimeOfDay | None = None


class Require(_Strict):
    """``approvals`` approvals (an apply decision each) from distinct people who hold one of ``roles`` or are listed
    in ``people``; neither given: anyone who may decide. The proposer's own operator never counts, nor the same person
    twice; a decline by any of them declines."""

    approvals: Count = Field(ge=1, le=10)
    roles: list[Role] = Field(default_factory=list)
    people: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(default_factory=list)


NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _plural(role: str, n: int) -> str:
    return role if n == 1 else f"{role}s"


def approval_refusal(require: Require, user_id: str, roles: frozenset[str], operator: str | None) -> str | None:
    """Why an apply by ``user_id`` (holding ``roles``) does not count as an approval ``require`` asks for (None: it
    counts); ``operator`` is the person whose session proposed it. The same person twice is told by the store."""
    if operator is not None and user_id == operator:
        return (
            "your approval does not count: you run the session that proposed this request, and it needs "
            f"{require.approvals} approval{'' if require.approvals == 1 else 's'} from others"
        )
    if not require.roles and not require.people:
        return None
    if user_id in require.people or roles & set(require.roles):
        return None
    return f"your approval does not count: this request needs approvals from {who(require, require.approvals)}"


def who(require: Require, n: int) -> str:
    """Whom ``n`` approvals of ``require`` come from, in words: ``two admins``, ``one admin or developer``,
    ``one of olga, ben``."""
    count = NUMBERS[n] if n < len(NUMBERS) else str(n)
    roles = " or ".join(_plural(role, n) for role in require.roles)
    people = ", ".join(require.people)
    if roles and people:
        return f"{count} {roles}, or of {people}"
    if roles:
        return f"{count} {roles}"
    if people:
        return f"{count} of {people}"
    return f"{count} {'person' if n == 1 else 'people'} who may decide"


def waiting_for(require: Require, approved: int) -> str:
    """Why a proposal that ``require`` governs still waits, with ``approved`` approvals counted: ``1 of 2
    approvals: needs one more admin``."""
    left = max(require.approvals - approved, 0)
    more = "" if approved == 0 else " more"
    needs = who(require, left).split(" ", 1)
    noun = "approval" if require.approvals == 1 else "approvals"
    return f"{approved} of {require.approvals} {noun}: needs {needs[0]}{more} {needs[1]}"


class Escalate(_Strict):
    """Once the proposal has waited ``after``, notify ``webhooks`` (names) and say so to people holding ``roles``."""

    after: Duration
    webhooks: list[Name] = Field(default_factory=list)
    roles: list[Role] = Field(default_factory=list)

    @model_validator(mode="after")
    def _someone(self) -> Self:
        if not self.webhooks and not self.roles:
            raise ValueError("an escalation names webhooks or roles to tell")
        return self


class Rule(_Strict):
    """A named rule: what it matches, and its one effect."""

    name: Name
    description: str | None = Field(None, max_length=1000)
    match: Match = Field(default_factory=Match)
    decide: Literal["apply", "decline"] | None = None
    require: Require | None = None
    expire_after: Duration | None = None
    notify: list[Name] | None = None
    escalate: Escalate | None = None

    @model_validator(mode="after")
    def _one_effect(self) -> Self:
        given = [effect for effect in EFFECTS if getattr(self, effect) is not None]
        if len(given) != 1:
            raise ValueError(
                f"a rule has exactly one effect of {', '.join(EFFECTS)}; {self.name!r} has {given or 'none'}"
            )
        return self

    @property
    def effect(self) -> str:
        return next(effect for effect in EFFECTS if getattr(self, effect) is not None)


class Policy(_Strict):
    """An organisation's rules, in the order they are read."""

    rules: list[Rule] = Field(default_factory=list, max_length=500)

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise ValueError(f"two rules are named {rule.name!r}")
            seen.add(rule.name)
        return self


class Proposed(BaseModel):
    """What the rules read of a proposal."""

    model_config = ConfigDict(frozen=True)

    kind: str
    action: str
    agent_id: str | None
    guild_id: str | None
    label: str
    path: str | None = None
    server: str | None = None
    lines: int
    widens: bool
    channel: str = "studio"
    model: str | None = None
    proposed_at: datetime


def _any(patterns: list[str], value: str | None) -> bool:
    return value is not None and any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)


def matches(match: Match, proposed: Proposed) -> bool:
    """Whether every condition of ``match`` holds for ``proposed``."""
    checks = (
        match.kind is None or proposed.kind in match.kind,
        match.action is None or proposed.action in match.action,
        match.agent is None or proposed.agent_id in match.agent,
        match.guild is None or proposed.guild_id in match.guild,
        match.target is None or _any(match.target, proposed.path or proposed.label),
        match.server is None or _any(match.server, proposed.server),
        match.lines_at_least is None or proposed.lines >= match.lines_at_least,
        match.lines_at_most is None or proposed.lines <= match.lines_at_most,
        match.widens is None or proposed.widens == match.widens,
        match.coach is None
        or (
            (match.coach.channel is None or proposed.channel in match.coach.channel)
            and (match.coach.model is None or _any(match.coach.model, proposed.model))
        ),
        match.time_of_day is None or match.time_of_day.holds(proposed.proposed_at),
    )
    return all(checks)


class Verdict(BaseModel):
    """What a policy does to one proposal: the rule that decides it or requires approvals (None: a person decides,
    one approval), the rule that expires it, those that notify, the one that escalates; ``version`` is the policy's."""

    model_config = ConfigDict(frozen=True)

    version: int
    decision: Rule | None = None
    expiry: Rule | None = None
    notify: tuple[Rule, ...] = ()
    escalation: Rule | None = None

    @property
    def decided(self) -> Literal["apply", "decline"] | None:
        return None if self.decision is None else self.decision.decide

    @property
    def required(self) -> Require | None:
        return None if self.decision is None else self.decision.require


def evaluate(policy: Policy, version: int, proposed: Proposed) -> Verdict:
    """The verdict of ``policy`` (at ``version``) on ``proposed``: per effect, the first matching rule that has it
    (``decide`` and ``require`` are one effect: the decision rule); every matching ``notify`` rule."""
    decision = expiry = escalation = None
    notify: list[Rule] = []
    for rule in policy.rules:
        if not matches(rule.match, proposed):
            continue
        effect = rule.effect
        if effect in ("decide", "require") and decision is None:
            decision = rule
        elif effect == "expire_after" and expiry is None:
            expiry = rule
        elif effect == "escalate" and escalation is None:
            escalation = rule
        elif effect == "notify":
            notify.append(rule)
    return Verdict(version=version, decision=decision, expiry=expiry, notify=tuple(notify), escalation=escalation)


APPLIED = frozenset({"applied", "granted", "published", "approved"})
"""The outcomes that carried a proposal out (each kind's word for apply)."""


class Replay(BaseModel):
    """What a policy would have done to a past proposal, beside what people did: the rule that would have decided it
    (and how) or required approvals (how many), whether it would have expired or escalated before it was resolved
    (or by ``now``, if it still waits), the webhooks told; ``differs`` when the rule's decision is not the one people
    took."""

    model_config = ConfigDict(frozen=True)

    decided: Literal["apply", "decline"] | None
    decided_by: str | None
    approvals: int | None
    required_by: str | None
    expired_by: str | None
    escalated_by: str | None
    notified: tuple[str, ...]
    status: str
    differs: bool


def replay(verdict: Verdict, status: str, proposed_at: datetime, resolved_at: datetime | None, now: datetime) -> Replay:
    """What ``verdict`` would have done to a proposal that people resolved as ``status`` at ``resolved_at`` (None:
    it still waits, at ``now``)."""
    waited = (resolved_at or now) - proposed_at
    expiry = verdict.expiry
    expired = expiry is not None and expiry.expire_after is not None and waited > expiry.expire_after
    escalation = verdict.escalation
    escalated = escalation is not None and escalation.escalate is not None and waited > escalation.escalate.after
    decided = verdict.decided
    people = "apply" if status in APPLIED else "decline" if status not in ("pending", "superseded", "stale") else None
    differs = decided is not None and people is not None and decided != people
    return Replay(
        decided=decided,
        decided_by=verdict.decision.name if decided is not None and verdict.decision is not None else None,
        approvals=None if verdict.required is None else verdict.required.approvals,
        required_by=verdict.decision.name if verdict.required is not None and verdict.decision is not None else None,
        expired_by=expiry.name if expired and expiry is not None and decided is None else None,
        escalated_by=escalation.name if escalated and escalation is not None and decided is None else None,
        notified=tuple(name for rule in verdict.notify for name in rule.notify or ()),
        status=status,
        differs=differs,
    )
