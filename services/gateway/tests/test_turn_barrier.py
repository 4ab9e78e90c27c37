"""The turn barrier and the pending-items counts, without a broker or a database."""

from gateway.domain.items import summarize
from gateway.domain.turns import RefusedCall, RequestState, continuation_text, settle


def state(call: str, seq: int, status: str) -> RequestState:
    return RequestState(
        call, seq, f"p{seq}", "memory", f"Memory of {call}", status, "op" if status != "pending" else None
    )


def test_a_turn_waits_for_every_request() -> None:
    requests = {"c1": state("c1", 1, "applied"), "c2": state("c2", 2, "pending")}
    assert settle(["c1", "c2"], requests, {}) is None


def test_a_request_not_yet_seen_keeps_the_turn_waiting() -> None:
    assert settle(["c1", "c2"], {"c1": state("c1", 1, "applied")}, {}) is None


def test_a_settled_turn_lists_each_decision_in_step_order() -> None:
    requests = {"c1": state("c1", 1, "applied"), "c2": state("c2", 2, "declined")}
    refused = {"c3": RefusedCall("c3", 3, "agent_out_of_reach")}
    decisions = settle(["c2", "c3", "c1"], requests, refused)
    assert decisions is not None
    assert [(d.seq, d.outcome) for d in decisions] == [(2, "declined"), (3, "refused"), (1, "applied")]
    text = continuation_text(decisions)
    assert text.splitlines()[0] == "The operator decided 3 requests:"
    assert "- seq 1: Memory of c1: applied by op" in text


def test_a_stale_request_is_still_open() -> None:
    assert settle(["c1"], {"c1": state("c1", 1, "pending")}, {}) is None


def test_summary_counts_by_section_and_agent() -> None:
    items = [
        {"section": "Agents", "agent_id": "a"},
        {"section": "Agents", "agent_id": "b"},
        {"section": "Agents", "agent_id": "a"},
        {"section": "Guild", "agent_id": None},
    ]
    summary = summarize(items)
    assert summary["waiting_on"] == 4 and summary["summary"] == "Waiting on 4 decisions"
    assert summary["sections"] == {"Agents": 3, "Guild": 1} and summary["agents"] == {"a": 2, "b": 1}
    assert summarize([])["summary"] == "Waiting on 0 decisions"
    assert summarize([{"section": "Agents", "agent_id": "a"}])["summary"] == "Waiting on 1 decision"
