"""The generator: HTCondor's exact format, determinism, and a true P(release) that the labels bear out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobaware.errors import InputError
from jobaware.hold import synth
from jobaware.hold.labels import decisions
from jobaware.hold.reader import read_events


def test_same_seed_same_log_other_seed_other_log(tmp_path):
    a = synth.write(tmp_path / "a.log", 400, seed=5)
    b = synth.write(tmp_path / "b.log", 400, seed=5)
    synth.write(tmp_path / "c.log", 400, seed=6)
    assert (tmp_path / "a.log").read_bytes() == (tmp_path / "b.log").read_bytes()
    assert (tmp_path / "a.log").read_bytes() != (tmp_path / "c.log").read_bytes()
    pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))


def test_the_log_is_time_ordered_interleaved_and_realistic(synthetic):
    events, report = read_events([str(synthetic[0])])
    assert report.bad_rows == 0
    assert events["time"].is_monotonic_increasing
    codes = set(events["event_code"])
    assert {0, 1, 4, 5, 6, 9, 12, 13, 22, 23, 28, 40} <= codes
    holds = events[events["event_code"] == 12]
    assert {1, 12, 13, 21, 26, 32, 34, 47} <= set(holds["code"].astype(int))
    assert {(26, 102), (26, 103)} <= set(zip(holds["code"].astype(int), holds["subcode"].astype(int)))
    released = events[events["event_code"] == 13]
    assert released["reason"].str.startswith("The system macro SYSTEM_PERIODIC_RELEASE").any()
    assert (released["via"] == "condor_release").any()
    # clusters interleave: consecutive events change job often, and clusters arrive in bursts
    job = events["cluster"] * 10_000 + events["proc"]
    assert (job.to_numpy()[1:] != job.to_numpy()[:-1]).mean() > 0.5
    submits = events[events["event_code"] == 0].groupby("cluster")["time"].nunique()
    assert (submits == 1).all() and len(submits) > 100


def test_the_truth_is_one_row_per_hold_and_the_labels_bear_it_out(synthetic):
    truth = pd.read_parquet(synthetic[1])
    events, _ = read_events([str(synthetic[0])])
    table = decisions(events)
    assert len(truth) == len(table)
    merged = table.merge(truth, on=["cluster", "proc", "hold_index"], validate="one_to_one")
    assert (merged["hold_time_x"] == merged["hold_time_y"]).all()
    assert (merged["code"] == merged["hold_code"]).all()
    assert merged["p_release"].between(0, 1).all()
    resolved = merged[merged["label"].notna()]
    y = (resolved["label"] == "release").to_numpy()
    # calibrated: in every well-filled band of P(release) the share of released holds is close to it
    bands = pd.cut(resolved["p_release"], [0, 0.2, 0.4, 0.6, 0.8, 1.0], include_lowest=True)
    summary = pd.DataFrame({"y": y, "p": resolved["p_release"], "band": bands}).groupby("band", observed=True)
    checked = 0
    for _, group in summary:
        if len(group) >= 150:
            assert abs(group["y"].mean() - group["p"].mean()) < 0.08
            checked += 1
    assert checked >= 3
    # the pool matters: transfer holds of an outage recover far more often than a missing input file
    by_cause = resolved.groupby("cause")["p_release"].mean()
    assert by_cause["outage"] > by_cause["missing"] + 0.3


def test_a_wrong_job_count_is_refused(tmp_path):
    with pytest.raises(InputError, match="jobs: expected a whole number"):
        synth.write(tmp_path / "x.log", 3, seed=0)
    with pytest.raises(InputError, match="jobs: expected a whole number"):
        synth.write(tmp_path / "x.log", 1000.5, seed=0)


def test_release_probability_follows_the_policy_recursion():
    user = synth.User("u.v", 0, 0.0, 0.5)
    cluster = synth.Cluster(1, 0, 1, 0.0, 2048, 2.0, 3600.0, False, False, True, (26, 103), None)
    job = synth.Job(cluster, 0, user)
    # cpu: released by the policy MAX_POLICY_RELEASES times (recurring with 0.9 each), then the user's turn
    q, a = synth.CPU_RECUR, synth.APP_FAILURE
    acts = synth._lognormal_cdf(synth.REMOVE_AFTER, synth.USER_DELAY_MEDIAN, synth.USER_DELAY_SIGMA)
    user_turn = 0.5 * synth.RHO_FACTOR["cpu"] * acts * (1 - 0.2) * (1 - a)
    expected = user_turn
    for _ in range(synth.MAX_POLICY_RELEASES):
        expected = (1 - q) * (1 - a) + q * expected
    assert synth.release_probability("cpu", 26, job, 0.0, 0) == pytest.approx(expected)
    assert synth.release_probability("cpu", 26, job, 0.0, synth.MAX_POLICY_RELEASES) == pytest.approx(user_turn)
    job.user_released = True
    assert synth.release_probability("user", 1, job, 0.0, 0) == 0.0
    assert np.isclose(synth.release_probability("cpu", 26, job, 0.0, 0), expected - q ** 3 * user_turn)


def test_a_generator_fitted_to_real_outcomes_ends_its_holds_as_they_say(tmp_path):
    from jobaware.hold.groups import by_log, log_holds
    from jobaware.hold.outcomes import CodeOutcomes, Outcomes, release_chance

    code = CodeOutcomes(released=0.5, removed=0.3, held=0.2, reheld=0.25, ends_normally=0.8, release_log_hours=0.0,
                        release_log_sigma=0.5, removal_log_hours=0.0, removal_log_sigma=0.5)
    fitted = Outcomes({"all": CodeOutcomes(), "13/2": code, "6/13": CodeOutcomes(released=0.0, removed=1.0, held=0.0)},
                      {"13/2": 0.7, "6/13": 0.3}, {"holds": 2})
    truth = synth.write(tmp_path / "EventLog", 6000, seed=4, outcomes=fitted)
    events, report = read_events([str(tmp_path / "EventLog")])
    assert report.bad_rows == 0 and synth.outcomes_path(tmp_path / "EventLog").is_file()
    table = next(log_holds(part, name) for name, part in by_log(events).items())
    first = table[table["hold_index"] == 0]
    keys = first["hold_code"].astype(str) + "/" + first["hold_subcode"].astype(str)
    assert set(keys) == {"13/2", "6/13"} and abs((keys == "13/2").mean() - 0.7) < 0.1  # clusters draw the mix
    early = table["hold_time"] < table["hold_time"].max() - pd.Timedelta(hours=10)  # not cut by the log's end
    shares = table[(table["hold_code"] == 13) & early]["action"].value_counts(normalize=True)
    assert abs(shares["released"] - 0.5) < 0.05 and abs(shares["removed"] - 0.3) < 0.05
    released = table[(table["hold_code"] == 13) & (table["action"] == "released") & early]
    assert abs(np.median(released["hours"]) - 1.0) < 0.15  # exp(release_log_hours)
    assert abs(released["reheld"].mean() - 0.25) < 0.06
    assert (table.loc[table["hold_code"] == 6, "label"] == "remove").all()
    ended = table[(table["hold_code"] == 13) & table["label"].notna()]
    expected = float(release_chance(0.5, 0.2, 0.25, 0.8 * (1 - synth.APP_FAILURE)))
    assert abs((ended["label"] == "release").mean() - expected) < 0.06
    assert np.allclose(pd.read_parquet(truth).query("code == 13")["p_release"], expected)
