"""The read-only policy, rule by rule, as a table: each row a tool, the connector's verification, and the verdict."""

from __future__ import annotations

import pytest

from connections.domain.policy import READ_VERBS, WRITE_VERBS, ToolSpec, classify, name_words

T = ToolSpec

# (tool, verified connector, readable, changes data, deciding rule)
TABLE: list[tuple[ToolSpec, bool, bool, bool, str]] = [
    # 1. default-off tools are refused, whatever else holds (whether they change data is told all the same)
    (T("list_orders", default_off=True), True, False, False, "default_off"),
    (T("list_orders", default_off=True, mutating=False, read_only_hint=True), True, False, False, "default_off"),
    (T("delete_order", default_off=True), True, False, True, "default_off"),
    # 2. a tool the connector's manifest lists is readable unless it is mutating (the name does not count)
    (T("sync_status", mutating=False), False, True, False, "manifest"),
    (T("get_and_lock", mutating=True), True, False, True, "manifest"),
    (T("list_orders", mutating=True, read_only_hint=True), True, False, True, "manifest"),
    # 3. readOnlyHint counts on a verified connector only; elsewhere the name decides
    (T("account_summary", read_only_hint=True), True, True, False, "read_only_hint"),
    (T("account_summary", read_only_hint=True), False, False, True, "verbs"),
    (T("delete_everything", read_only_hint=True), True, True, False, "read_only_hint"),
    (T("delete_everything", read_only_hint=True), False, False, True, "verbs"),
    (T("search_tickets", read_only_hint=True), False, True, False, "verbs"),
    # 4. any other tool by the verbs in its name: a write verb wins, then a read verb, else it changes data
    (T("list_orders"), False, True, False, "verbs"),
    (T("getTicket"), False, True, False, "verbs"),
    (T("search-issues"), False, True, False, "verbs"),
    (T("refund_order"), True, False, True, "verbs"),
    (T("get_or_create_user"), True, False, True, "verbs"),
    (T("updateHTTPConfig"), True, False, True, "verbs"),
    (T("orders"), True, False, True, "verbs"),
    (T("account_summary"), True, False, True, "verbs"),
]


@pytest.mark.parametrize(
    ("tool", "verified", "readable", "changes_data", "rule"),
    TABLE,
    ids=[f"{row[0].name}-{'verified' if row[1] else 'unverified'}-{row[4]}" for row in TABLE],
)
def test_the_policy_decides_each_tool_by_the_first_rule_that_applies(
    tool: ToolSpec, verified: bool, readable: bool, changes_data: bool, rule: str
) -> None:
    verdict = classify(tool, verified=verified)
    assert (verdict.readable, verdict.changes_data, verdict.rule) == (readable, changes_data, rule)
    assert tool.name in verdict.reason


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("list_orders", ("list", "orders")),
        ("getHTTPStatus", ("get", "http", "status")),
        ("search-issues.v2", ("search", "issues", "v", "2")),
        ("OrdersList", ("orders", "list")),
    ],
)
def test_a_name_is_split_into_its_words(name: str, words: tuple[str, ...]) -> None:
    assert name_words(name) == words


def test_no_verb_is_both_a_read_and_a_write() -> None:
    assert READ_VERBS.isdisjoint(WRITE_VERBS)
