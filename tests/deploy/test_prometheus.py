"""jobaware's Prometheus rules and configuration (deploy/prometheus/): `promtool` checks them and runs their unit tests
(jobaware.rules.test.yml), every series they name is one the code defines, and Debian's real `prometheus`, on
loopback, scrapes two real services and a daemon and fires `JobawareDown` when a service stops, clearing it when
the service is back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from harness.ports import stop
from jobaware import metrics
from jobaware.dashboard import series_named
from jobaware.packaged import bundled
from tests.conftest import free_port, wait_for

RULES = bundled("deploy", "prometheus", "jobaware.rules.yml")
CONFIG = bundled("deploy", "prometheus", "prometheus.yml")
RULE_TESTS = Path(__file__).with_name("jobaware.rules.test.yml")
JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("JOBAWARE_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(f"JOBAWARE_REQUIRE_PROMETHEUS=1 but no {name} (apt-get install prometheus)")
        pytest.skip(f"{name} is not installed (Debian package 'prometheus')")
    return found


def test_promtool_checks_the_rules_and_the_configuration_and_runs_the_rules_unit_tests(tmp_path):
    promtool = tool("promtool")
    for command in (["check", "rules", str(RULES)], ["check", "config", str(CONFIG)],
                    ["test", "rules", RULE_TESTS.name]):
        done = subprocess.run([promtool, *command], capture_output=True, text=True, timeout=120, cwd=RULE_TESTS.parent)
        assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken.rules.yml"  # the check can fail
    broken.write_text(RULES.read_text().replace("expr: up{", "expr: up{{", 1))
    assert subprocess.run([promtool, "check", "rules", str(broken)], capture_output=True).returncode != 0


def test_every_series_the_rules_read_is_one_the_code_defines():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    named = set().union(*(series_named(rule["expr"]) for rule in rules))
    assert named and named <= metrics.sample_names(), sorted(named - metrics.sample_names())
    assert {"up", "jobaware_live_accuracy", "jobaware_model_evaluation"} <= named


# ---------------------------------------------------------------- a real Prometheus
EVENTS = (b"000 (101.000.000) 2026-01-05 10:00:00 Job submitted from host: <10.0.0.1:9618>\n...\n"
          b"012 (101.000.000) 2026-01-05 10:30:00 Job was held.\n"
          b"\tTransfer input files failure at execution point slot1@node2 using protocol osdf.\n"
          b"\tCode 13 Subcode 256\n...\n")


class Started:
    """A command on a free loopback port, in a session of its own, its output in a log; stopped with its group."""

    def __init__(self, command: list[str], log: Path, port: int | None = None):
        self.command, self.log, self.port, self.process = command, log, port or free_port(), None

    def start(self, ready: str | None = "/livez", seconds: float = 180) -> Started:
        command = [part.replace("{port}", str(self.port)) for part in self.command]
        env = {**os.environ, "JOBAWARE_CONFIG": "/nonexistent"}
        self.process = subprocess.Popen(command, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
        if ready is not None:
            wait_for(f"http://127.0.0.1:{self.port}{ready}", seconds, self.process)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop(self.process)


def alerts(prometheus: str, name: str) -> list[dict]:
    answer = httpx.get(f"{prometheus}/api/v1/alerts", timeout=10).json()
    return [a for a in answer["data"]["alerts"] if a["labels"]["alertname"] == name]


def query(prometheus: str, expr: str) -> list[dict]:
    return httpx.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10).json()["data"]["result"]


def until(check, seconds: float, what: str):
    """Poll `check()` until it gives something true, at most `seconds` (bounded); its value."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    pytest.fail(f"not within {seconds:.0f} s: {what}")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_real_prometheus_sees_a_stopped_service_fire_jobaware_down_and_clear_when_it_returns(tmp_path):
    """Debian's prometheus on loopback scrapes the card gateway and the hold service (real `jobaware serve`) and the
    HTCondor follower (`jobaware hold follow --metrics-port`) every second, with the shipped rules evaluated every
    second (their `for:` cut to 1 s: promtool's unit tests hold the durations). The card gateway is stopped:
    JobawareDown fires for it; it is started again on its port: the alert clears."""
    binary = tool("prometheus")
    log = tmp_path / "EventLog"
    log.write_bytes(EVENTS)
    card = Started([JOBAWARE, "serve", "card", "--port", "{port}"], tmp_path / "card.log")
    hold = Started([JOBAWARE, "serve", "hold", "--port", "{port}"], tmp_path / "hold.log")
    follower = Started([JOBAWARE, "hold", "follow", "--input", str(log), "--audit", str(tmp_path / "audit.jsonl"),
                        "--metrics-port", "{port}"], tmp_path / "follow.log")
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "1s"
    (tmp_path / "jobaware.rules.yml").write_text(yaml.safe_dump(rules))
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
              "rule_files": ["jobaware.rules.yml"],
              "scrape_configs": [
                  {"job_name": "jobaware-card", "static_configs": [{"targets": [f"127.0.0.1:{card.port}"]}]},
                  {"job_name": "jobaware-services", "static_configs": [{"targets": [f"127.0.0.1:{hold.port}"]}]},
                  {"job_name": "jobaware-hold-follow",
                   "static_configs": [{"targets": [f"127.0.0.1:{follower.port}"]}]}]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    prometheus = Started([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                          f"--storage.tsdb.path={tmp_path / 'tsdb'}", "--web.listen-address=127.0.0.1:{port}",
                          "--log.level=warn"], tmp_path / "prometheus.log")
    url = f"http://127.0.0.1:{prometheus.port}"
    started = [card, hold, follower, prometheus]
    try:
        for process in (card, hold):
            process.start()
        follower.start("/metrics", 60)
        prometheus.start("/-/ready", 60)
        up = until(lambda: {r["metric"]["job"] for r in query(url, 'up{job=~"jobaware.*"} == 1')} == {
            "jobaware-card", "jobaware-services", "jobaware-hold-follow"}, 60, "every target up")
        assert up
        until(lambda: query(url, 'jobaware_adapter_passes_total{adapter="htcondor", outcome="ok"} > 0'), 30,
              "the follower's passes scraped")
        until(lambda: query(url, 'bentoml_service_request_total{service_name="jobaware-hold", endpoint="/livez"}'),
              30, "the hold service's requests scraped")
        assert alerts(url, "JobawareDown") == []

        card.stop()
        fired = until(lambda: [a for a in alerts(url, "JobawareDown") if a["state"] == "firing"], 60,
                      "JobawareDown firing for the stopped card gateway")
        assert [a["labels"]["job"] for a in fired] == ["jobaware-card"]
        assert fired[0]["annotations"]["summary"] == f"jobaware-card at 127.0.0.1:{card.port} does not answer its " \
                                                     "/metrics"

        card.start()
        until(lambda: alerts(url, "JobawareDown") == [], 60, "JobawareDown cleared once the card gateway is back")
    finally:
        for process in reversed(started):
            process.stop()
    assert all(process.process.poll() is not None for process in started)
