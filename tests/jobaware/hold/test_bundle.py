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
