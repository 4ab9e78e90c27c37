"""deploy/monitoring: the alert rules and the Grafana dashboard are well formed, and every expression is PromQL.

promtool is a Go build of all of Prometheus; instead the rules' YAML is checked against the structure
``promtool check rules`` enforces, and every expression (the rules', the dashboard's) is parsed by promql-parser
(a port of Prometheus' own parser). tests/test_metrics.py checks each metric they name against a live scrape.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

MONITORING = Path(__file__).resolve().parents[1] / "deploy" / "monitoring"
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$job": ".*"}
"""What Grafana puts in place of the variables the dashboard's queries use, for parsing them."""
PROMETHEUS_OWN = frozenset({"up", "scrape_duration_seconds"})
"""Series Prometheus makes itself for each target; every other name must come from a service's /metrics."""


def rules() -> dict[str, Any]:
    loaded = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def dashboard() -> dict[str, Any]:
    loaded = json.loads((MONITORING / "dashboard.json").read_text())
    assert isinstance(loaded, dict)
    return loaded


def dashboard_queries() -> list[str]:
    """Every panel's query, with Grafana's variables put in place."""
    queries = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            query = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                query = query.replace(variable, value)
            queries.append(query)
    return queries


def rule_expressions() -> list[str]:
    return [rule["expr"] for group in rules()["groups"] for rule in group["rules"]]


def metric_names(expression: str) -> set[str]:
    """The metric names an expression selects (``name{...}`` or ``{__name__="name"}``)."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            names.update(m.value for m in node.matchers.matchers if m.name == "__name__")

    promql_parser.walk(promql_parser.parse(expression), visit)
    return names


def monitored_names() -> set[str]:
    """Every metric the rules and the dashboard (its queries and its variables) name."""
    names = {name for expression in [*rule_expressions(), *dashboard_queries()] for name in metric_names(expression)}
    for variable in dashboard()["templating"]["list"]:
        query = variable.get("definition", "")
        names.update(re.findall(r"label_values\((\w+)", query))
    return names - PROMETHEUS_OWN


def test_the_rules_have_the_structure_promtool_checks() -> None:
    loaded = rules()
    assert set(loaded) == {"groups"}
    groups = loaded["groups"]
    assert [group["name"] for group in groups] == list(dict.fromkeys(group["name"] for group in groups))
    alerts = []
    for group in groups:
        assert set(group) <= {"name", "interval", "rules", "limit"}, group.keys()
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, rule.keys()
            assert isinstance(rule["alert"], str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"])
            assert isinstance(rule["expr"], str) and rule["expr"].strip()
            if "for" in rule:
                assert promql_parser.parse_duration(rule["for"]).total_seconds() > 0
            assert rule["labels"]["severity"] in {"warning", "critical"}, rule
            for mapping in (rule.get("labels", {}), rule.get("annotations", {})):
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()), mapping
                assert all(re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", key) for key in mapping)
            assert "summary" in rule["annotations"], rule["alert"]
            alerts.append(rule["alert"])
    assert len(alerts) == len(set(alerts))
    # What the alerts must cover: lag growing, dead letters, the outbox backlog, a replica not ready, a replica
    # that cannot be scraped at all.
    covered = {name for expression in rule_expressions() for name in metric_names(expression)}
    assert {
        "up",
        "assent_consumer_lag",
        "assent_messages_dead_lettered_total",
        "assent_outbox_backlog",
        "assent_ready",
    } <= covered


@pytest.mark.parametrize("expression", rule_expressions())
def test_every_rule_is_promql(expression: str) -> None:
    assert metric_names(expression)  # parses, and selects something


@pytest.mark.parametrize("query", dashboard_queries())
def test_every_dashboard_query_is_promql(query: str) -> None:
    assert metric_names(query)


def test_the_dashboard_is_one_grafana_can_import() -> None:
    board = dashboard()
    assert board["uid"] and board["title"] and isinstance(board["schemaVersion"], int)
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["targets"] and [t["refId"] for t in panel["targets"]] == [
                chr(ord("A") + i) for i in range(len(panel["targets"]))
            ]


def test_an_unparsable_expression_is_caught() -> None:
    """The parser refuses what Prometheus would: the checks above can fail."""
    with pytest.raises(ValueError):
        promql_parser.parse("sum by (job) (rate(assent_consumer_lag[5m])")
    with pytest.raises(ValueError):
        promql_parser.parse("rate(assent_consumer_lag[5 minutes])")
    assert metric_names('sum(rate({__name__="a_total"}[1m])) / b') == {"a_total", "b"}
