"""How real holds ended: what happened next, per code, each workflow counting once, with intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobaware.hold import outcomes
from jobaware.hold.groups import log_holds
from jobaware.hold.reader import read_events
from tests.jobaware.hold.conftest import STANDALONE


def test_what_happened_next_is_read_from_the_jobs_own_next_action():
    events, _ = read_events([str(STANDALONE / "metl_12636334.log")])
    table = log_holds(events, "metl")
    assert table["action"].tolist() == ["released"] * 4 + ["removed"]  # five holds, four releases, an abort
    assert (table["hours"] > 0).all() and table["label"].eq("remove").all()
    assert table["workflow"].eq("iross/MLDAG").all()  # named by jobaware/data/real/condor/workflows.csv


def test_the_release_chance_follows_from_the_shares():
    assert outcomes.release_chance(0.5, 0.0, 0.0, 1.0) == pytest.approx(0.5)
    assert outcomes.release_chance(0.5, 0.5, 0.0, 1.0) == pytest.approx(1.0)  # every hold that ends was released
    # re-held half the time: q = r(1-h)e / (1 - rh) = 0.5 * 0.5 / 0.75
    assert outcomes.release_chance(0.5, 0.0, 0.5, 1.0) == pytest.approx(1 / 3)


def _holds(rows):
    return pd.DataFrame([{"hold_code": c, "hold_subcode": s, "hold_index": 0, "reheld": False, "label": label,
                          "workflow": w, "action": a, "hours": 1.0} for c, s, w, a, label in rows])


def test_a_workflow_that_repeats_a_cause_counts_once():
    repeated = _holds([(6, 13, "a", "removed", "remove")] * 40 + [(6, 13, "b", "released", "release")])
    fitted = outcomes.fit(repeated)
    code = fitted.lookup(6, 13)
    assert (code.holds, code.workflows, code.effective) == (41, 2, pytest.approx(2.0))
    assert 0.3 < code.released < 0.6  # counted by hold it would be 1/41
    low, high = code.intervals["released"]
    assert low < code.released < high and high - low > 0.5  # two workflows say little
    assert fitted.mix == {"6/13": pytest.approx(1.0)}


def test_a_code_seen_in_one_workflow_leans_on_its_code_and_on_all_holds():
    fitted = outcomes.fit(_holds([(13, 2, "a", "removed", "remove")] * 5 + [(13, 256, "b", "released", "release"),
                                                                              (26, 103, "c", "removed", "remove")]))
    assert fitted.lookup(13, 2).released > 0.05  # pulled towards 13's, which b's release lifts
    assert fitted.lookup(13, 99) is fitted.codes["13"] and fitted.lookup(1, 0) is fitted.codes["all"]
    assert np.allclose(fitted.p_release(np.array([13, 26]), np.array([2, 103])),
                       [fitted.codes["13/2"].p_release(), fitted.codes["26/103"].p_release()])
    again = outcomes.Outcomes.from_dict(fitted.as_dict())
    assert again.lookup(13, 2) == fitted.lookup(13, 2) and again.mix == fitted.mix
    table = outcomes.table(fitted)
    assert list(table["code"]) == ["13/2", "13/256", "26/103"] and table["p_release"].str.contains(r"\[").all()
