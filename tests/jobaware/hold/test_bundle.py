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
