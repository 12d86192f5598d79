"""`jobaware pipeline submit` against a recorded fake of the KFP REST API on loopback (no Kubeflow runs here):
a run, a recurring run on a cron schedule (created once: a second submit keeps it), and one-line errors."""

from __future__ import annotations

import json

import pytest

from jobaware.pipelines.runner import kfp_cron
from tests.pipelines.kfp_api import API, KfpApi
from tests.test_cli import run

DATA = "s3://jobaware/failure/jobs.parquet"


def compiled_name(created: dict) -> str:
    """The pipeline name inside a created run's spec (IR YAML plus the Kubernetes platform spec)."""
    return created["pipeline_spec"]["pipeline_spec"]["pipelineInfo"]["name"]


def submit(api: KfpApi, *args):
    return run("pipeline", "submit", "failure", "--kfp-host", api.url, "--input", DATA, *args, "--json", timeout=300)


def test_submit_creates_a_run_of_the_compiled_pipeline():
    with KfpApi() as api:
        result = submit(api, "--param", "max_iter=40")
        assert result.returncode == 0, result.stderr
        answer = json.loads(result.stdout)
        [created] = api.runs
        assert answer["run_id"] == created["run_id"] and answer["host"] == api.url
        assert compiled_name(created) == "jobaware-failure"
        assert "jobaware-mlflow" in json.dumps(created["pipeline_spec"]["platform_spec"])  # the tracking URI Secret
        parameters = created["runtime_config"]["parameters"]
        assert parameters["data"] == DATA and json.loads(parameters["params"])["max_iter"] == 40
        assert parameters["tracking_uri"] == ""  # on the host the steps read it from the Secret jobaware-mlflow
        [experiment] = api.experiments
        assert experiment["display_name"] == "jobaware-failure" and created["experiment_id"] == experiment["experiment_id"]


def test_recurring_submit_schedules_once():
    with KfpApi() as api:
        first = submit(api, "--recurring", "0 3 * * *")
        assert first.returncode == 0, first.stderr
        [recurring] = api.recurring_runs
        assert recurring["trigger"] == {"cron_schedule": {"cron": "0 0 3 * * *"}} and recurring["mode"] == "ENABLE"
        assert recurring["no_catchup"] is True and compiled_name(recurring) == "jobaware-failure"
        assert json.loads(first.stdout)["created"] is True
        again = submit(api, "--recurring", "0 3 * * *")
        assert again.returncode == 0 and json.loads(again.stdout)["created"] is False
        assert len(api.recurring_runs) == 1 and not api.runs
        other = submit(api, "--recurring", "0 4 * * *")
        # with --json the error comes as JSON on stdout (the command contract)
        assert other.returncode == 1 and "already runs on '0 0 3 * * *'" in json.loads(other.stdout)["error"]
        assert "Traceback" not in other.stderr and len(api.recurring_runs) == 1


def test_bad_cron_and_unreachable_host_are_one_line_errors():
    with KfpApi() as api:
        bad = submit(api, "--recurring", "every night")
        assert bad.returncode == 1 and "'every night' is not a cron expression" in json.loads(bad.stdout)["error"]
        assert not [r for r in api.requests if r[0] == "POST"]
        url = api.url
    gone = run("pipeline", "submit", "failure", "--kfp-host", url, "--input", DATA, timeout=300)
    assert gone.returncode == 1 and f"the KFP host {url} unreachable" in gone.stderr and "Traceback" not in gone.stderr


@pytest.mark.parametrize(("given", "sent"), [("0 3 * * *", "0 0 3 * * *"), ("30 0 3 * * 1-5", "30 0 3 * * 1-5"),
                                             ("@daily", "@daily"), ("@every 6h", "@every 6h"), ("*/15  * * * *", "0 */15 * * * *")])
def test_cron_in_kfp_form(given, sent):
    assert kfp_cron(given) == sent


@pytest.mark.parametrize("bad", ["", "* * * *", "0 3 * * * * *", "0 3 * * $", "@sometimes"])
def test_cron_rejects(bad):
    with pytest.raises(ValueError, match="not a cron expression"):
        kfp_cron(bad)


def test_fake_answers_unknown_routes_with_404():
    with KfpApi() as api:
        assert api.answer("GET", f"{API}/pipelines", {}, {})[0] == 404
