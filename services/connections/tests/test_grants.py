"""A grant's lifetime: how it is written, when it lapses, and what a grant is at a moment (pure, no clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from connections.domain.grants import Grant, expiry, lapsed
from connections_contract.routes import LoginGrant, lifetime_of

AT = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("PT30M", timedelta(minutes=30)),
        ("PT8H", timedelta(hours=8)),
        ("P1D", timedelta(days=1)),
        ("PT1S", timedelta(seconds=1)),
        ("P1DT12H", timedelta(days=1, hours=12)),
        ("PT90M", timedelta(minutes=90)),
        ("P4W", timedelta(weeks=4)),
        ("P30D", timedelta(days=30)),
        ("PT720H", timedelta(days=30)),
    ],
)
def test_a_lifetime_is_an_iso_8601_duration(text: str, length: timedelta) -> None:
    assert lifetime_of(text) == length
    assert LoginGrant.model_validate({"lifetime": text}).lifetime == text


@pytest.mark.parametrize(
    "text",
    ["", "P", "PT", "PT0S", "P0D", "P31D", "PT721H", "P30DT1S", "P1M", "P1Y", "1h", "PT1.5H", "pt1h", "P-1D", "3600"],
)
def test_a_lifetime_that_is_not_one_or_is_out_of_range_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="greater than zero and at most 30 days"):
        lifetime_of(text)


@pytest.mark.parametrize("value", [3600, 1.5, True, ["PT1H"], "P31D", "PT0M", "P1M"])
def test_the_grant_option_refuses_a_number_or_a_lifetime_out_of_range_naming_the_rule(value: object) -> None:
    with pytest.raises(ValueError) as refused:
        LoginGrant.model_validate({"lifetime": value})
    [error] = refused.value.errors()  # type: ignore[attr-defined]  # a ValidationError
    assert error["loc"] == ("lifetime",)
    assert "ISO 8601 duration as text" in error["msg"]


def test_no_lifetime_is_until_the_session_closes() -> None:
    assert LoginGrant.model_validate({}).lifetime is None
    assert expiry(AT, None) is None
    assert expiry(AT, timedelta(hours=1)) == AT + timedelta(hours=1)


@pytest.mark.parametrize(
    ("expires_at", "now", "expected"),
    [
        (None, AT, False),
        (None, AT + timedelta(days=365), False),
        (AT + timedelta(hours=1), AT, False),
        (AT + timedelta(hours=1), AT + timedelta(minutes=59, seconds=59), False),
        (AT + timedelta(hours=1), AT + timedelta(hours=1), True),
        (AT + timedelta(hours=1), AT + timedelta(hours=1, microseconds=1), True),
        (AT + timedelta(hours=1), AT + timedelta(days=2), True),
    ],
)
def test_a_grant_lapses_at_its_expiry(expires_at: datetime | None, now: datetime, expected: bool) -> None:
    assert lapsed(expires_at, now) is expected


@pytest.mark.parametrize(
    ("revoked_at", "expires_at", "now", "state"),
    [
        (None, None, AT, "held"),
        (None, AT + timedelta(hours=1), AT + timedelta(minutes=30), "held"),
        (None, AT + timedelta(hours=1), AT + timedelta(hours=1), "lapsed"),
        (AT + timedelta(minutes=10), None, AT + timedelta(minutes=30), "revoked"),
        (AT + timedelta(minutes=10), AT + timedelta(hours=1), AT + timedelta(minutes=30), "revoked"),
        (AT + timedelta(minutes=10), AT + timedelta(hours=1), AT + timedelta(hours=2), "revoked"),
    ],
)
def test_a_grant_is_held_revoked_or_lapsed(
    revoked_at: datetime | None, expires_at: datetime | None, now: datetime, state: str
) -> None:
    grant = Grant("desk", "olga", AT, "request", 3, "olga" if revoked_at else None, revoked_at, expires_at)
    assert grant.state(now) == state
    assert grant.held(now) is (state == "held")
