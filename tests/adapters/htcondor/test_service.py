"""The follower against a real `bentoml serve` of the hold service (the conformance smoke's champion, trained on
generated logs): every new hold decided and audited with the model's version and training; it never acts."""

from __future__ import annotations

import subprocess

import pytest
from typer.testing import CliRunner

from jobaware.adapters.htcondor.adapter import HoldAdapter
from jobaware.adapters.htcondor.client import DecisionClient
from jobaware.adapters.htcondor.policy import Policy
from jobaware.adapters.htcondor.report import summarize
from jobaware.audit import read_records
from tests.adapters.htcondor.conftest import (
    ADAPTER,
    CONDOR,
    REAL_LOGS,
    ROOT,
    real_events,
)
from tests.adapters.htcondor.test_adapter import RecordedSchedd, _live
from tests.conftest import wait_for

LOG = CONDOR / "mldag_standalone" / "metl_12636334.log"  # a job held five times, then removed


@pytest.mark.slow
@pytest.mark.timeout(1800)  # alone, the conformance smoke's pipeline run comes first (in the suite it is shared)
def test_a_real_hold_service_decides_each_new_hold_and_a_synthetic_model_never_acts(conformance_home,
                                                                                   tmp_path_factory, tmp_path):
    from harness.ports import stop
    from jobaware import tracking
    from jobaware.adapters.htcondor.policy import Actor
    from jobaware.cli import app
    from tests.test_conformance import _serve, smoke_version

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JOBAWARE_HOME", str(conformance_home))
        version = smoke_version("hold", conformance_home, tmp_path_factory.mktemp("hold"))
        assert tracking.champion_version("hold") == version
    url, process = _serve("hold", conformance_home, tmp_path / "serve.log")
    try:
        wait_for(f"{url}/readyz", 180, process)
        log, audit = tmp_path / "EventLog", tmp_path / "audit.jsonl"
        schedd = RecordedSchedd()
        policy = Policy(mode="act", release_above=0.51, remove_below=0.49, release_codes=[26])  # every call acts...
        watch = HoldAdapter([log], audit, client=DecisionClient(url, timeout=60), policy=policy, actor=Actor(schedd))
        _live(watch, log, real_events(LOG))
        watch.close()
        holds = [r for r in read_records(audit) if r["kind"] == "hold"]
        assert len(holds) == 5 and schedd.calls == []  # ... but for a model trained on generated logs
        decided = holds[1:]  # the first is code 1, a user's own hold: manual, still asked and recorded
        assert all(0 <= h["p_release"] <= 1 and h["model_version"] == version for h in holds)
        assert all(h["trained_on"]["source"] == "synthetic" and h["trained_on"]["labelled_holds"] > 0 for h in holds)
        called = [h for h in decided if h["recommended"] != "none"]  # (none only at P(release) within 0.49-0.51)
        assert called and all(h["not_acted_because"] == "the model was not trained on real logs" for h in called)
        assert holds[0]["fired"] == "manual_codes"

        refused = subprocess.run([*ADAPTER, "follow", "--input", str(log), "--audit", str(tmp_path / "again.jsonl"),
                                  "--service", url, "--act", "--once"], capture_output=True, text=True, cwd=ROOT,
                                 timeout=120)
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
        assert f"the hold model (version {version}) was trained on synthetic logs" in refused.stderr

        one = CliRunner().invoke(app, ["hold", "decide", "--input", str(LOG), "--job", "12636334", "--service", url, "--json"])
        assert one.exit_code == 0, one.output
        assert '"hold_time": "2025-05-22 10:56:18"' in one.output and f'"model_version": "{version}"' in one.output
        assert '"decided_by": ' in one.output and '"reasons": "hold 26/103' in one.output  # who decided, and on what

        # every real hold, each asked with the log cut just after it: the model's real-log accuracy
        real = HoldAdapter(REAL_LOGS, tmp_path / "real.jsonl", client=DecisionClient(url, timeout=60))
        real.step()
        real.close()
        total = summarize(tmp_path / "real.jsonl")[-1]
        # (this server takes bodies of 100,000 bytes at most: the larger windows are sent again, smaller)
        assert (total["holds"], total["no decision"], total["ended"]) == (22, 0, 21)
        print(f"\nreal holds: {total['ended']} ended; model version {version} decided {total['decision right']} "
              f"right, the site rule {total['rule right']}, release-all {total['release-all right']}")
    finally:
        stop(process)
