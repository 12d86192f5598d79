"""The Grafana dashboard (deploy/grafana/): the committed JSON is what `jobaware.dashboard` renders, every query of
every panel names series the code defines (the catalogue, `jobaware.metrics`), and it has the shape Grafana's file
provisioning loads. Grafana itself is not run here."""

from __future__ import annotations

import json

import pytest
import yaml

from jobaware import dashboard, metrics
from jobaware.packaged import bundled

GRAFANA = bundled("deploy", "grafana")


def test_the_committed_dashboard_is_what_the_module_renders():
    assert (GRAFANA / "jobaware.json").read_text() == dashboard.rendered(), "run `python -m jobaware.dashboard`"
    assert dashboard.main(["--check"]) == 0


def test_every_panel_s_query_names_series_the_code_defines():
    model = json.loads((GRAFANA / "jobaware.json").read_text())
    queries = dashboard.queries(model)
    panels = [p for p in model["panels"] if p["type"] != "row"]
    assert len(queries) >= len(panels) > 20
    defined = metrics.sample_names()
    for query in queries:
        named = dashboard.series_named(query)
        assert named and named <= defined, f"{query}: {sorted(named - defined)} not defined by jobaware.metrics"
    shown = set().union(*(dashboard.series_named(q) for q in queries))
    for group in (metrics.SERVICE, metrics.COLLECTOR, metrics.ADAPTER, metrics.LIVE):  # each part of jobaware shown
        assert any(series.samples() & shown for series in group)


def test_the_check_fails_on_a_series_the_code_does_not_define():
    model = dashboard.dashboard()
    model["panels"][1]["targets"][0]["expr"] = 'sum(rate(jobaware_services_request_total{job="x"}[5m]))'
    named = set().union(*(dashboard.series_named(q) for q in dashboard.queries(model)))
    assert "jobaware_services_request_total" in named - metrics.sample_names()


@pytest.mark.parametrize(("expr", "named"), [
    ('sum by (a, le) (rate(x_total{status="ok", b=~"up|down"}[5m] offset 1h))', {"x_total"}),
    ("histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m]))) > bool 3", {"h_bucket"}),
    ("a / on (c) group_left (d) b and ignoring (e) c unless d or e", {"a", "b", "c", "d", "e"}),
    ("time() - max by (capability) (g{x='by (y)'}) > 30 * 86400", {"g"}),
    ("jobaware:flagged_share:rate1h", {"jobaware:flagged_share:rate1h"}),
])
def test_the_series_a_promql_expression_reads(expr, named):
    assert dashboard.series_named(expr) == named


def test_the_dashboard_and_its_provider_have_the_shape_grafana_provisions():
    model = json.loads((GRAFANA / "jobaware.json").read_text())
    assert model["uid"] == "jobaware" and model["title"] and "id" not in model and model["schemaVersion"] >= 36
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in model["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for panel in model["panels"]:
        box = panel["gridPos"]
        assert box["x"] >= 0 and box["x"] + box["w"] <= 24 and box["h"] > 0
        covered = {(x, y) for x in range(box["x"], box["x"] + box["w"]) for y in range(box["y"], box["y"] + box["h"])}
        assert not covered & cells, f"{panel['title']} overlaps another panel"
        cells |= covered
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"} and panel["description"]
            refs = [t["refId"] for t in panel["targets"]]
            assert refs and len(refs) == len(set(refs))
    provider = yaml.safe_load((GRAFANA / "jobaware.yaml").read_text())
    assert provider["apiVersion"] == 1
    [entry] = provider["providers"]
    assert entry["type"] == "file" and entry["options"]["path"].startswith("/")
