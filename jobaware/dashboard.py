"""The Grafana dashboard of jobaware, in the provisioning format: `python -m jobaware.dashboard` writes it to
`deploy/grafana/jobaware.json` (`--check` says whether the committed one differs), beside the provider file
`deploy/grafana/jobaware.yaml` that a Grafana loads it with. Every query names series of the catalogue
(`jobaware.metrics`) only; `series_named` finds them in a PromQL expression (tests/test_dashboard.py holds every panel
to the catalogue, and the alert rules too). The data source is a dashboard variable: any Prometheus that scrapes
jobaware. Grafana itself was not run where this was written: the JSON is checked for its shape and its queries."""

from __future__ import annotations

import json
import re
import sys

from jobaware.packaged import bundled

UID = "jobaware"
WIDTH, HEIGHT = 12, 8  # a panel's size on Grafana's 24-column grid
RATE = "[5m]"
SOURCE = {"type": "prometheus", "uid": "${datasource}"}

# PromQL words that are not series: keywords, and what a `by (...)` or `{...}` holds is cut before these are looked for
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
             "inf", "nan", "le"}
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_NAME = re.compile(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(\s*\()?")


def series_named(expr: str) -> set[str]:
    """The series a PromQL expression reads (function names, keywords, label names and durations left out)."""
    text = _STRINGS.sub('""', expr)
    for pattern in (_MATCHERS, _GROUPING, _RANGES):
        text = pattern.sub(" ", text)
    return {name for name, call in _NAME.findall(text) if not call and name.lower() not in _KEYWORDS}


# ---------------------------------------------------------------- the panels
def _target(expr: str, legend: str) -> dict:
    return {"datasource": SOURCE, "expr": expr, "legendFormat": legend, "refId": "A"}


def _panel(title: str, description: str, targets: list[tuple[str, str]], unit: str = "short",
           kind: str = "timeseries", **extra) -> dict:
    panel = {"type": kind, "title": title, "description": description, "datasource": SOURCE,
             "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {},
             "targets": [{**_target(expr, legend), "refId": chr(ord("A") + i)} for i, (expr, legend) in
                         enumerate(targets)]}
    panel.update(extra)
    return panel


def _rate(series: str, by: str, window: str = RATE) -> str:
    return f"sum by ({by}) (rate({series}{window}))"


LATENCY = _rate("bentoml_service_request_duration_seconds_bucket", "le, service_name, endpoint")
ROWS: list[tuple[str, list[dict]]] = [
    ("Services", [
        _panel("Up", "Each jobaware target's last scrape: 1 answered, 0 down (the JobawareDown alert).",
               [('up{job=~"jobaware.*"}', "{{job}} {{instance}}")], kind="state-timeline"),
        _panel("Requests by endpoint and code", "Answers per second (BentoML's counter; unknown paths count as "
               "`other`).", [(_rate("bentoml_service_request_total", "service_name, endpoint, http_response_code"),
                              "{{service_name}} {{endpoint}} {{http_response_code}}")], unit="reqps"),
        _panel("Latency p50 and p99", "How long requests took, by service and endpoint (BentoML's histogram).",
               [(f"histogram_quantile({q}, {LATENCY})", f"p{int(q * 100)} {{{{service_name}}}} {{{{endpoint}}}}")
                for q in (0.5, 0.99)], unit="s"),
        _panel("Errors by reason", "Requests the services answered with an error themselves: bad input, too large, "
               "not JSON, no champion yet.", [(_rate("jobaware_service_errors_total", "service, reason"),
                                              "{{service}} {{reason}}")], unit="reqps"),
        _panel("Model versions served", "The version each service answers with.",
               [("max by (capability, version) (jobaware_service_model_info) == 1", "{{capability}} {{version}}")],
               kind="table", options={"showHeader": True}),
        _panel("Model age", "Days since the served version was registered (JobawareModelOld past 30).",
               [("(time() - max by (capability) (jobaware_service_model_created_timestamp_seconds)) / 86400",
                 "{{capability}}")], unit="d"),
        _panel("Registry unreadable", "1 while a service cannot follow the champion (it answers with the model it "
               "has).", [("max by (capability, instance) (jobaware_service_registry_failing)",
                          "{{capability}} {{instance}}")], kind="state-timeline"),
        _panel("Connections closed unanswered", "Read deadlines and the connection cap at work: a slow or "
               "flooding client.", [(_rate("jobaware_service_connections_closed_total", "service, reason"),
                                     "{{service}} {{reason}}")], unit="cps"),
        _panel("Card parts by status", "The card gateway's parts per second: ok, or why one is missing.",
               [(_rate("jobaware_card_parts_total", "capability, status"), "{{capability}} {{status}}")],
               unit="reqps"),
    ]),
    ("Collector", [
        _panel("Lag behind squeue", "Seconds since the last squeue snapshot was stored (JobawareCollectorLagging).",
               [("time() - jobaware_collector_last_squeue_timestamp_seconds", "squeue {{instance}}"),
                ("jobaware_collector_accounting_lag_seconds", "accounting {{instance}}")], unit="s"),
        _panel("Polls", "Polls per minute by outcome (partial: a command failed, tried next poll).",
               [(f"60 * {_rate('jobaware_collector_polls_total', 'outcome')}", "{{outcome}}")]),
        _panel("Poll duration p90", "How long a poll takes.",
               [(f"histogram_quantile(0.9, {_rate('jobaware_collector_poll_duration_seconds_bucket', 'le, instance')})",
                 "{{instance}}")], unit="s"),
        _panel("Jobs", "Jobs squeue listed, and what was stored per minute.",
               [("sum by (instance) (jobaware_collector_jobs_listed)", "listed {{instance}}"),
                (f"60 * {_rate('jobaware_collector_stored_total', 'what')}", "stored {{what}} /min")]),
        _panel("Slurm commands failing", "Failures per minute by command.",
               [(f"60 * {_rate('jobaware_collector_slurm_command_failures_total', 'command')}", "{{command}}")]),
    ]),
    ("Adapters", [
        _panel("Verdicts and deferrals", "Verdicts written and jobs left for later, per minute.",
               [(f"60 * {_rate('jobaware_adapter_verdicts_total', 'adapter')}", "verdicts {{adapter}}"),
                (f"60 * {_rate('jobaware_adapter_deferred_total', 'adapter')}", "deferred {{adapter}}")]),
        _panel("Acts", "Acts on the scheduler per minute (done, failed, dry run) and those refused.",
               [(f"60 * {_rate('jobaware_adapter_actions_total', 'adapter, action, outcome')}",
                 "{{adapter}} {{action}} {{outcome}}"),
                (f"60 * {_rate('jobaware_adapter_actions_refused_total', 'adapter, action, reason')}",
                 "refused {{adapter}} {{action}} {{reason}}")]),
        _panel("Failing open", "1 while a service is backed off: its parts are left out (JobawareAdapterFailingOpen).",
               [("max by (adapter, capability) (jobaware_adapter_service_backoff)", "{{adapter}} {{capability}}")],
               kind="state-timeline"),
        _panel("Verdict cache age", "Seconds since the adapter wrote what it keeps, against the age the plugins "
               "ignore the cache from (JobawareVerdictCacheStale).",
               [("time() - jobaware_adapter_cache_written_timestamp_seconds", "age {{adapter}}"),
                ("jobaware_adapter_cache_stale_after_seconds", "ignored after {{adapter}}")], unit="s"),
        _panel("Verdict cache size", "Entries and bytes of what the adapters keep.",
               [("jobaware_adapter_cache_entries", "entries {{adapter}}"),
                ("jobaware_adapter_cache_bytes", "bytes {{adapter}}")]),
        _panel("Pass duration p90", "How long a pass takes.",
               [(f"histogram_quantile(0.9, {_rate('jobaware_adapter_pass_duration_seconds_bucket', 'le, adapter')})",
                 "{{adapter}}")], unit="s"),
    ]),
    ("Capabilities", [
        _panel("Live accuracy: $figure", "Each capability's figure on this week's finished jobs (`jobaware report "
               "live`), per model version, against its registered evaluation (dashed).",
               [('max by (capability, model_version) (jobaware_live_accuracy{figure="$figure"})',
                 "live {{capability}} v{{model_version}}"),
                ('max by (capability, model_version) (jobaware_model_evaluation{figure="$figure"})',
                 "evaluated {{capability}} v{{model_version}}")],
               fieldConfig={"defaults": {"unit": "short"}, "overrides": [{
                   "matcher": {"id": "byRegexp", "options": "evaluated.*"},
                   "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}]}]}),
        _panel("Jobs judged this week", "Finished jobs each version's live figures stand on (the alert waits for "
               "50).", [('max by (capability, model_version) (jobaware_live_accuracy{figure="jobs"})',
                         "{{capability}} v{{model_version}}")]),
        _panel("Share of jobs flagged", "Per capability, the verdicts whose part flags the job (advice for its "
               "user, or a reason to hold), over the last hour.",
               [(_rate("jobaware_adapter_flagged_total", "capability", "[1h]") + " / "
                 + _rate('jobaware_adapter_parts_total{status="ok"}', "capability", "[1h]"), "{{capability}}")],
               unit="percentunit"),
        _panel("Card parts in verdicts", "Per capability, the parts of the verdicts written, by status.",
               [(f"60 * {_rate('jobaware_adapter_parts_total', 'capability, status')}", "{{capability}} {{status}}")]),
    ]),
]
VARIABLES = [
    {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus", "hide": 0},
    {"name": "figure", "label": "Live figure", "type": "query", "datasource": SOURCE, "refresh": 2, "hide": 0,
     "query": {"query": "label_values(jobaware_live_accuracy, figure)", "refId": "figure"},
     "definition": "label_values(jobaware_live_accuracy, figure)", "current": {"text": "roc_auc", "value": "roc_auc"}},
]


def dashboard() -> dict:
    """The dashboard model: a row per part of jobaware, its panels two abreast."""
    panels, y, number = [], 0, 1
    for title, row in ROWS:
        panels.append({"type": "row", "title": title, "id": number, "collapsed": False,
                       "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
        number, y = number + 1, y + 1
        for index, panel in enumerate(row):
            panels.append({**panel, "id": number, "gridPos": {"x": (index % 2) * WIDTH, "y": y + (index // 2) * HEIGHT,
                                                                "w": WIDTH, "h": HEIGHT}})
            number += 1
        y += (len(row) + 1) // 2 * HEIGHT
    return {"uid": UID, "title": "jobaware", "description": "Is jobaware alive, current and right: its services, the "
            "Slurm collector, the adapters, and each capability on live jobs.", "tags": ["jobaware", "hpc", "slurm"],
            "timezone": "browser", "schemaVersion": 39, "version": 1, "editable": False, "graphTooltip": 1,
            "refresh": "1m", "time": {"from": "now-24h", "to": "now"}, "templating": {"list": VARIABLES},
            "annotations": {"list": []}, "links": [], "panels": panels}


_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*\w+\)$")


def queries(model: dict) -> list[str]:
    """Every PromQL expression of a dashboard model: its panels' targets, and the series of its query variables
    (Grafana's `label_values(SERIES, LABEL)`)."""
    found = [target["expr"] for panel in model["panels"] for target in panel.get("targets", [])]
    for variable in model["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            found.append(_LABEL_VALUES.sub(r"\1", query))
    return found


def rendered() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    path = bundled("deploy", "grafana", "jobaware.json")
    if "--check" in argv:
        same = path.is_file() and path.read_text() == rendered()
        print("deploy/grafana/jobaware.json is as jobaware.dashboard renders it" if same else
              "deploy/grafana/jobaware.json differs: run `python -m jobaware.dashboard`")
        return 0 if same else 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rendered())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
