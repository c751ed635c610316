"""Every query in the Grafana dashboard names a metric loadaware exports or records, or
one it reads itself (cAdvisor's and kube-state-metrics' series, named in app/)."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from tests.deploy.manifests import DEPLOY, ROOT

DASHBOARD = DEPLOY / "grafana" / "loadaware-dashboard.json"
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "and", "or", "unless", "le", "inf", "nan",
}  # fmt: skip
# What prometheus_client appends: a histogram's series, and a counter family's _total.
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count", "_total")


def exported_metrics() -> set[str]:
    """Metric names registered in app/ (string literals), recorded by the rules, or read
    by loadaware from cAdvisor and kube-state-metrics (string literals in app/ too)."""
    names = set()
    for path in (ROOT / "app").rglob("*.py"):
        names |= set(re.findall(r'"((?:loadaware|kube|container)_[a-z0-9_]+)"', path.read_text()))
    rules = yaml.safe_load((DEPLOY / "prometheus" / "loadaware-rules.yaml").read_text())
    names |= {rule["record"] for group in rules["groups"] for rule in group["rules"]}
    return names


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads."""
    text = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)  # grouping labels
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    text = re.sub(r'"[^"]*"', "", text)
    found = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        name = match.group(0)
        if text[match.end() :].lstrip().startswith("(") or name.lower() in KEYWORDS:
            continue
        found.add(name)
    return found


def queries(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"]]
    return exprs


def test_the_dashboard_is_importable_json_with_a_datasource_input() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["__inputs"][0]["pluginId"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert len(queries(dashboard)) > 10


def test_every_dashboard_query_names_an_exported_or_recorded_metric() -> None:
    known = exported_metrics()
    dashboard = json.loads(DASHBOARD.read_text())
    for expr in queries(dashboard):
        variable = re.fullmatch(r"label_values\((\w+),\s*\w+\)", expr)
        names = {variable.group(1)} if variable else metric_names(expr)
        assert names, f"no metric in {expr!r}"
        for name in names:
            base = next(
                (
                    name.removesuffix(s)
                    for s in HISTOGRAM_SUFFIXES
                    if name.endswith(s) and name.removesuffix(s) in known
                ),
                name,
            )
            assert base in known, f"{name} in {expr!r} is neither exported nor recorded"


def test_the_query_reader_finds_series_and_not_labels_or_functions() -> None:
    expr = 'histogram_quantile(0.99, sum by (le, verb) (rate(x_bucket{a="b"}[5m]))) - y'
    assert metric_names(expr) == {"x_bucket", "y"}
