"""The registered artefact: picklable, predicts from event rows, carries its signature and example."""

from __future__ import annotations

import joblib
import numpy as np
import pandas as pd
import pytest

from jobaware.errors import InputError
from jobaware.hold.bundle import OUTPUT_COLUMNS, input_example, signature
from jobaware.hold.reader import read_events
from tests.jobaware.hold.conftest import STANDALONE


def test_a_bundle_survives_joblib_and_decides_its_input_example(trained, tmp_path):
    bundle = trained[0]
    joblib.dump(bundle, tmp_path / "bundle.joblib")
    loaded = joblib.load(tmp_path / "bundle.joblib")
    example = input_example(loaded)
    assert 1 <= len(example) <= 12 and example["decide"].sum() == 1
    decided = loaded.predict(example)
    assert list(decided.columns) == list(OUTPUT_COLUMNS) == [c.name for c in signature().outputs.inputs]
    assert len(decided) == 1 and decided["decision"].iloc[0] in ("release", "remove")
    assert np.array_equal(decided["p_release"], bundle.predict(example)["p_release"])
    assert {c.name for c in signature().inputs.inputs if c.required} == {"cluster", "proc", "event_code", "time"}


def test_without_decide_it_decides_the_holds_still_standing(trained):
    bundle = trained[0]
    events, _ = read_events([str(STANDALONE / "metl_12636334.log")])
    assert bundle.predict(events).empty  # the job was aborted at the end: no hold stands
    standing = events[events["seq"] <= events.loc[events["event_code"] == 12, "seq"].iloc[2]]
    decided = bundle.predict(standing)
    assert len(decided) == 1 and decided["hold_seq"].iloc[0] == standing["seq"].iloc[-1]
    assert decided["hold_reason"].iloc[0].startswith("26 SystemPolicy") and "memory" in decided["hold_reason"].iloc[0]


def test_a_bundle_of_other_feature_code_is_refused(trained):
    import copy

    old = copy.copy(trained[0])
    old.feature_version = "0"
    with pytest.raises(InputError, match="feature version 0"):
        old.predict(input_example(trained[0]))


def test_rows_without_the_required_columns_are_refused(trained):
    with pytest.raises(InputError, match="missing column.*time"):
        trained[0].predict(pd.DataFrame({"cluster": [1], "proc": [0], "event_code": [12]}))


@pytest.mark.parametrize("served, expected", [("release_all", [1.0]), ("remove_all", [0.0]), ("site_rule", [1.0])])
def test_a_plain_policy_serves_without_a_model_and_says_so(trained, served, expected):
    import copy

    bundle = copy.copy(trained[0])
    bundle.decided_by, bundle.network_state, bundle.tree, bundle.calibrator = served, None, None, None
    events, _ = read_events([str(STANDALONE / "metl_12636334.log")])
    standing = events[events["seq"] <= events.loc[events["code"] == 26, "seq"].iloc[0]]  # a first 26/103 hold
    decided = bundle.predict(standing)
    assert decided["p_release"].tolist() == expected and decided["decided_by"].tolist() == [served]


def test_every_decision_names_what_drove_it(real_trained):
    bundle = real_trained[0]
    events, _ = read_events([str(STANDALONE / "metl_12634462.log")])
    second = events.loc[events["event_code"] == 12, "seq"].iloc[1]
    assert "held 0.0 h" in bundle.predict(events[events["seq"] <= second])["reasons"].iloc[0]  # asked at the hold
    later = events[events["seq"] <= second + 1]  # its release, hours later: held that long by then
    decided = bundle.predict(later.assign(decide=later["seq"] == second))
    line = decided["reasons"].iloc[0]
    assert decided["decided_by"].iloc[0] == bundle.decided_by
    assert line.startswith("hold 47/0 (47 JobExecuteExceeded") and "this job held 1 time(s) before, released 1" in line
    hours = (later["time"].iloc[-1] - later.loc[later["seq"] == second, "time"].iloc[0]).total_seconds() / 3600
    assert "its cluster's other jobs: 0 held" in line and f"held {hours:.1f} h" in line and hours > 0.5
    assert "real holds of 47/0: 5 in 1 workflow(s), P(release) 0." in line


def pool_log(earlier: list[str]) -> str:
    """A log where one job per entry of `earlier` is held for an input transfer and then released and run to its
    end (`release`) or removed (`remove`), and then job 900.0 is held for the same cause."""
    lines, minute = [], 0

    def event(code: str, job: str, text: str, *body: str) -> None:
        nonlocal minute
        minute += 1
        stamp = f"2025-05-01 {9 + minute // 60:02d}:{minute % 60:02d}:00"
        lines.extend([f"{code} ({job}) {stamp} {text}", *(f"\t{b}" for b in body), "..."])

    for i, outcome in enumerate(earlier):
        job = f"{100 + i}.000.000"
        event("000", job, "Job submitted from host: <1.2.3.4:9618>")
        event("012", job, "Job was held.", "Transfer input files failure", "Code 13 Subcode 2")
        if outcome == "release":
            event("013", job, "Job was released.", "via condor_release (by user condor)")
            event("005", job, "Job terminated.", "(1) Normal termination (return value 0)")
        else:
            event("009", job, "Job was aborted.", "via condor_rm (by user x)")
    event("000", "900.000.000", "Job submitted from host: <1.2.3.4:9618>")
    event("012", "900.000.000", "Job was held.", "Transfer input files failure", "Code 13 Subcode 2")
    return "\n".join(lines) + "\n"


def test_an_adaptive_bundle_follows_how_the_logs_earlier_holds_ended(real_trained, tmp_path):
    import copy

    bundle = copy.copy(real_trained[0])
    bundle.decided_by, bundle.network_state, bundle.tree, bundle.calibrator = "pool", None, None, None
    decided = {}
    for name, earlier in (("none", []), ("released", ["release"] * 3), ("removed", ["remove"] * 3)):
        path = tmp_path / f"{name}.log"
        path.write_text(pool_log(earlier))
        events, report = read_events([str(path)])
        assert report.bad_rows == 0
        decided[name] = bundle.predict(events).iloc[0]
    prior = bundle.outcomes_fitted().lookup(13, 2).p_release()
    assert decided["none"]["p_release"] == pytest.approx(prior) and decided["none"]["decision"] == "remove"
    assert decided["released"]["decision"] == "release" and decided["removed"]["decision"] == "remove"
    assert decided["released"]["p_release"] > bundle.threshold > decided["removed"]["p_release"]
    assert decided["released"]["decided_by"] == "pool"
    assert "this log's earlier holds of other jobs: 3 ended released, 0 removed, 0 released not yet ended (of this " \
        "code 3, 0, 0" in decided["released"]["reasons"]
