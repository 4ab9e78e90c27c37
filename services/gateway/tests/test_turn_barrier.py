"""The turn barrier, without a broker or a database (the pending items' counts: ``test_desk_rules.py``)."""

from __future__ import annotations

import pytest

from gateway.domain.turns import RESOLVED, ProposalState, RefusedCall, continuation_text, settle


def state(call: str, seq: int, status: str) -> ProposalState:
    return ProposalState(
        call, seq, f"p{seq}", "memory", f"Memory of {call}", status, "op" if status != "pending" else None
    )


def stale(call: str, seq: int) -> ProposalState:
    """A proposal whose apply came back "stale": the projection sets ``stale`` and leaves the status pending,
    and ``settle`` sees only the status (see :func:`test_a_stale_outcome_resolves_nothing`)."""
    return state(call, seq, "pending")


def test_a_stale_outcome_resolves_nothing() -> None:
    # The gateway resolves a proposal only with an outcome in RESOLVED; a stale refusal leaves it pending.
    assert "stale" not in RESOLVED and "pending" not in RESOLVED


@pytest.mark.parametrize(
    ("waited", "proposals", "refused", "settled"),
    [
        pytest.param(
            ["c1", "c2"],
            {"c1": state("c1", 1, "applied"), "c2": state("c2", 2, "pending")},
            {},
            None,
            id="one-proposal-still-pending",
        ),
        pytest.param(["c1", "c2"], {"c1": state("c1", 1, "applied")}, {}, None, id="a-proposal-not-yet-seen"),
        pytest.param(["c1"], {"c1": stale("c1", 1)}, {}, None, id="the-only-proposal-was-refused-as-stale"),
        pytest.param(
            ["c1", "c2", "c3"],
            {"c1": state("c1", 1, "applied"), "c2": stale("c2", 2)},
            {"c3": RefusedCall("c3", 3, "agent_out_of_reach")},
            None,
            id="the-rest-decided-but-one-refused-as-stale",
        ),
        pytest.param(
            ["c1", "c2", "c3"],
            {"c1": state("c1", 1, "applied"), "c2": state("c2", 2, "declined")},
            {"c3": RefusedCall("c3", 3, "agent_out_of_reach")},
            [(1, "applied"), (2, "declined"), (3, "refused")],
            id="the-stale-proposal-declined-settles-the-turn",
        ),
        pytest.param(
            ["c1"],
            {"c1": state("c1", 1, "pending")},
            {"c1": RefusedCall("c1", 2, "duplicate_tool_call")},
            None,
            id="a-duplicate-resend-refused-does-not-close-the-pending-proposal",
        ),
        pytest.param(
            ["c1", "c2"],
            {"c1": state("c1", 1, "superseded"), "c2": state("c2", 2, "pending")},
            {},
            None,
            id="a-replaced-proposal-needs-no-answer-but-its-successor-does",
        ),
        pytest.param(
            ["c1", "c2"],
            {"c1": state("c1", 1, "superseded"), "c2": state("c2", 2, "discarded")},
            {},
            [(1, "superseded"), (2, "discarded")],
            id="the-successor-decided-settles-the-turn",
        ),
    ],
)
def test_the_barrier_settles_only_once_every_proposal_is_decided(
    waited: list[str],
    proposals: dict[str, ProposalState],
    refused: dict[str, RefusedCall],
    settled: list[tuple[int, str]] | None,
) -> None:
    decisions = settle(waited, proposals, refused)
    assert (None if decisions is None else [(d.seq, d.outcome) for d in decisions]) == settled


def test_a_settled_turn_lists_each_decision_in_step_order() -> None:
    proposals = {"c1": state("c1", 1, "applied"), "c2": state("c2", 2, "declined")}
    refused = {"c3": RefusedCall("c3", 3, "agent_out_of_reach")}
    decisions = settle(["c2", "c3", "c1"], proposals, refused)
    assert decisions is not None
    assert [(d.seq, d.outcome) for d in decisions] == [(2, "declined"), (3, "refused"), (1, "applied")]
    text = continuation_text(decisions)
    assert text.splitlines()[0] == "The operator decided 3 requests:"
    assert "- seq 1: Memory of c1: applied by op" in text


def test_a_replaced_proposal_is_listed_as_replaced_not_as_decided() -> None:
    proposals = {
        "c1": state("c1", 1, "superseded"),
        "c2": state("c2", 2, "superseded"),
        "c3": state("c3", 3, "applied"),
    }
    decisions = settle(["c1", "c2", "c3"], proposals, {})
    assert decisions is not None
    lines = continuation_text(decisions).splitlines()
    assert lines == [
        "The operator decided 1 request; 2 were replaced by a later proposal:",
        "- seq 1: Memory of c1: replaced by a later proposal; it needs no answer",
        "- seq 2: Memory of c2: replaced by a later proposal; it needs no answer",
        "- seq 3: Memory of c3: applied by op",
    ]


def test_an_expired_proposal_settles_the_turn_and_is_listed_as_declined() -> None:
    proposals = {"c1": state("c1", 1, "expired"), "c2": state("c2", 2, "applied")}
    decisions = settle(["c1", "c2"], proposals, {})
    assert decisions is not None and [(d.seq, d.outcome) for d in decisions] == [(1, "expired"), (2, "applied")]
    lines = continuation_text(decisions).splitlines()
    assert lines[1] == "- seq 1: Memory of c1: expired by op: it waited too long; nothing was written, as if declined"
