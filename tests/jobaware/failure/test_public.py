"""The public-trace model that serves a new site from day one, the site's own models beside the public traces, the
history a served model reads from the site's store, and the gate's minimum said before training."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from jobaware import fit, steps
from jobaware.errors import JobawareError
from jobaware.failure import public
from jobaware.failure.bundle import FailureBundle
from jobaware.failure.evaluate import auc_difference
from jobaware.failure.features import CATEGORICAL, PORTABLE, SITE_SCALE
from jobaware.failure.model import MIN_KIND_ROWS, rare_kinds_as_failed
from jobaware.failure.reader import read_jobs
from jobaware.failure.train import train, validation_period
from jobaware.jobtable.common import JobColumns, to_canonical_dtypes
from jobaware.store import JobKey, open_store
from tests.conftest import KTH, NREL_CSV, REAL

QUICK = {"max_iter": 20}


@pytest.fixture(scope="module")
def small_manifest(tmp_path_factory):
    """Two of the public traces (KTH-SP2 and the NREL sample): a manifest as the bundled one names them."""
    folder = tmp_path_factory.mktemp("public")
    manifest = folder / f"two{fit.PUBLIC_SUFFIX}"
    manifest.write_text(json.dumps({"traces": [{"name": "KTH-SP2", "path": str(KTH)},
                                               {"name": "NREL-Eagle", "path": str(NREL_CSV)}]}))
    return manifest


@pytest.fixture(scope="module")
def public_model(small_manifest, tmp_path_factory):
    dataset = tmp_path_factory.mktemp("dataset")
    steps.ingest("failure", str(small_manifest), dataset)
    return train(dataset, QUICK, tmp_path_factory.mktemp("work"))


def test_the_bundled_manifest_lists_every_trace_with_a_failure_and_says_why_the_others_are_left_out(tmp_path):
    listed = json.loads(public.manifest().read_text())
    kept = fit.public_traces(public.manifest())
    assert [t["name"] for t in kept] == ["KTH-SP2", "CTC-SP2", "LLNL-Thunder", "SDSC-Par-1996", "NREL-Eagle"]
    bundled = {p.relative_to(REAL).as_posix() for p in REAL.glob("*/*") if p.name.endswith((".swf", ".swf.gz"))}
    assert bundled == {t["path"] for t in listed["traces"] + listed["left_out"]} - {"nrel/eagle_sample_jobs.csv"}
    for trace in listed["left_out"]:  # what the manifest says of them is what the traces hold
        jobs, _ = read_jobs(REAL / trace["path"], require_state=True)
        assert len(jobs) > 30_000 and not jobs["state"].isin(["FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"]).any()


def test_the_public_traces_are_read_site_by_site_and_held_to_their_contract(small_manifest, tmp_path):
    report = steps.ingest("failure", str(small_manifest), tmp_path)
    table = pd.read_parquet(tmp_path / f"{public.TABLE}.parquet")
    assert table.groupby("site").size().to_dict() == {"KTH-SP2": 28_476, "NREL-Eagle": 700} and report.bad_rows == 0
    assert json.loads((tmp_path / public.SUMMARY).read_text())["sites"][1] == {"name": "NREL-Eagle", "jobs": 700,
                                                                              "failed": 11}
    assert steps.validate(tmp_path, budget=0.0)["success"]
    assert fit.source_kind([str(small_manifest)]) == "public"
    with pytest.raises(JobawareError, match="read alone, not with other sources"):
        steps.ingest("failure", [str(small_manifest), str(KTH)], tmp_path / "mixed")


def test_the_public_model_reads_no_site_name_or_size_and_carries_no_history(public_model):
    bundle, evaluation = public_model
    model = bundle.model
    assert model.portable and model.categorical_ == [] and not set(model.numeric_) & set(SITE_SCALE)
    assert set(model.numeric_) <= set(PORTABLE) and not set(model.numeric_) & set(CATEGORICAL)
    assert bundle.history.empty and bundle.trained_on == {"source": "public", "traces": ["KTH-SP2", "NREL-Eagle"],
                                                          "jobs": 29_176}
    # the NREL sample's 11 TIMEOUTs are too few for a kind of their own: one calibrated failure class
    assert model.classes_ == ["COMPLETED", "FAILED"] and model.calibrated
    m = evaluation.metrics["model"]
    assert m["roc_auc"] > 0.75 and m["test_rows"] == evaluation.test_labels.notna().sum()


def test_a_site_store_gives_the_public_model_the_site_history_it_judges_by(public_model, tmp_path, monkeypatch):
    """Served with JOBAWARE_STORE, the public model reads each job's history from the site's store: a user whose
    jobs failed there is judged riskier than one whose jobs completed, where the bundle alone knows neither."""
    bundle, _ = public_model
    now = pd.Timestamp.now().floor("s")
    ended = pd.DataFrame({
        "job_id": range(1, 41), "user": ["alice"] * 20 + ["bob"] * 20, "account": "a", "partition": "batch",
        "qos": "normal", "wallclock_req": 3600.0, "nodes_req": 1, "processors_req": 8, "gpus_req": 0, "mem_req": 0.0,
        "submit_time": [now - pd.Timedelta(hours=48 - i) for i in range(40)],
        "run_time": 600.0, "state": ["FAILED"] * 20 + ["COMPLETED"] * 20})
    ended["start_time"] = ended["submit_time"] + pd.Timedelta(minutes=1)
    ended["end_time"] = ended["start_time"] + pd.Timedelta(minutes=10)
    with open_store(str(tmp_path / "store")) as store:
        for row in to_canonical_dtypes(ended).to_dict("records"):
            row = {k: None if pd.isna(v) else int(v.timestamp()) if isinstance(v, pd.Timestamp)
                   else getattr(v, "item", lambda v=v: v)() for k, v in row.items()}
            key = JobKey("site", row["job_id"], row["submit_time"])
            store.put_job(key, row)
            store.put_final(key, row["state"], "sacct")
    asked = to_canonical_dtypes(ended.head(1)).assign(job_id=99, submit_time=now, start_time=pd.NaT, end_time=pd.NaT,
                                                      run_time=np.nan, state=None)
    both = pd.concat([asked, asked.assign(job_id=100, user="bob")], ignore_index=True)
    alone = bundle.predict(both)["p_fail"].to_numpy()
    assert alone[0] == alone[1]  # no history: the two are alike to it
    monkeypatch.setenv("JOBAWARE_STORE", str(tmp_path / "store"))
    served = FailureBundle(model=bundle.model, history=bundle.history, trained_on=bundle.trained_on)
    served.warm()
    assert served.online().features(JobColumns.from_frame(both))["user_n"].tolist() == [20.0, 20.0]
    risk = served.predict(both)["p_fail"].to_numpy()
    assert risk[0] > risk[1]
    assert "_follower" not in served.__getstate__()


def test_a_sites_model_trains_beside_the_public_traces_but_never_on_its_own_trace(small_manifest, tmp_path,
                                                                                monkeypatch):
    monkeypatch.setattr(public, "MANIFEST", small_manifest)
    dataset = tmp_path / "dataset"
    steps.ingest("failure", str(KTH), dataset)
    bundle, evaluation = train(dataset, QUICK, tmp_path / "work")  # public_data "auto": real data
    assert bundle.trained_on == {"source": "site and public", "jobs": 28_476, "traces": ["NREL-Eagle"],
                                 "public_jobs": 700}
    assert bundle.model.portable and len(bundle.history) > 10_000
    alone, alone_evaluation = train(dataset, {**QUICK, "public_data": "none"}, tmp_path / "alone")
    assert alone.trained_on == {"source": "site", "jobs": 28_476} and not alone.model.portable
    # the gate's data is the site's own later jobs in both
    assert len(evaluation.test_labels) == len(alone_evaluation.test_labels) > 8_000


def test_the_validation_period_is_the_sites_own_latest_jobs():
    sites = pd.Series(["a"] * 10 + ["b"] * 5 + [""] * 10)
    assert np.flatnonzero(validation_period(sites, 0.2)).tolist() == [23, 24]  # the site's own, when it has some
    public_only = validation_period(sites[:15], 0.2)
    assert np.flatnonzero(public_only).tolist() == [8, 9, 14]  # else every site's latest


def test_a_rare_failure_kind_is_learnt_as_failed():
    y = np.array(["COMPLETED"] * 50 + ["TIMEOUT"] * (MIN_KIND_ROWS - 1) + ["OUT_OF_MEMORY"] * MIN_KIND_ROWS)
    learnt = rare_kinds_as_failed(y)
    assert set(learnt) == {"COMPLETED", "FAILED", "OUT_OF_MEMORY"} and (learnt == "FAILED").sum() == MIN_KIND_ROWS - 1


def test_the_gate_minimum_is_said_before_training_with_how_many_jobs_are_missing(tmp_path):
    jobs, _ = read_jobs(KTH)
    small = tmp_path / "small.csv"
    from jobaware.failure.writers import NrelWriter

    writer = NrelWriter(small, "csv")
    writer.write(jobs.head(55))
    writer.close()
    dataset = tmp_path / "dataset"
    steps.ingest("failure", str(small), dataset)
    read = json.loads((dataset / steps.READ_REPORT).read_text())
    assert read["capability"] == "failure" and read["data"] == "this data"
    with pytest.raises(JobawareError) as refused:
        steps.validate_step(str(dataset), str(tmp_path / "report.json"))
    head = jobs.head(55)
    tested = int((head["submit_time"] >= head["submit_time"].sort_values().iloc[38]).sum())  # all labelled in KTH
    needed = math.ceil(200 / (head["state"].isin(["COMPLETED", "FAILED"]).mean() * 0.3)) - 55
    assert str(refused.value) == (
        f"the gate needs 200 test jobs (completed or failed): this data has 55 finished jobs, whose test split would "
        f"hold {tested}; about {needed:,} more finished jobs are needed (the test split is the last 30%, by submit time)")
    enough = tmp_path / "enough"
    steps.ingest("failure", str(KTH), enough)
    assert steps.validate_step(str(enough), str(tmp_path / "report2.json"))["success"]


def test_the_auc_difference_interval_is_delongs_and_agrees_with_a_bootstrap():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    failed = rng.random(400) < 0.25
    first = failed + rng.normal(0, 1.2, 400)
    second = 0.7 * first + 0.6 * rng.normal(0, 1, 400) + 0.3 * failed
    found = auc_difference(failed, first, second)
    assert found["first"] == pytest.approx(roc_auc_score(failed, first))
    assert found["difference"] == pytest.approx(roc_auc_score(failed, first) - roc_auc_score(failed, second))
    draws = [rng.integers(0, 400, 400) for _ in range(1500)]
    boot = [roc_auc_score(failed[d], first[d]) - roc_auc_score(failed[d], second[d]) for d in draws]
    assert found["low"] == pytest.approx(np.percentile(boot, 5), abs=0.006)
    assert found["high"] == pytest.approx(np.percentile(boot, 95), abs=0.006)
    same = auc_difference(failed, first, first)
    assert same["low"] == same["high"] == 0.0
    assert math.isnan(auc_difference(np.zeros(5, bool), first[:5], second[:5])["low"])


def test_an_answer_of_the_public_model_says_what_it_was_trained_on():
    trained = {"kind": "public", "traces": ["KTH-SP2", "CTC-SP2"], "tables": {"public_jobs": {"rows": 10, "columns": {
        "processors_req": [1.0, 8.0, 64.0]}}}}
    flags = fit.answer_flags(trained, "3", {"processors_req": np.array([1024.0])})
    assert flags == ["model version 3 was trained on public traces (KTH-SP2, CTC-SP2), not on this site's jobs; a "
                     "site's own finished jobs train its model (jobaware pipeline run ... --data STORE)"]


def test_without_the_public_traces_auto_trains_on_the_data_alone_and_extra_says_why(tmp_path, monkeypatch):
    """An image carries no jobaware/data/real: `auto` trains on the site's jobs alone, `extra` refuses in one line."""
    from jobaware.errors import InputError
    from jobaware.failure.train import _public_beside

    monkeypatch.setattr(public, "MANIFEST", tmp_path / "absent" / "failure.public.json")
    assert _public_beside(tmp_path, "auto", False, tmp_path / "work") is None
    with pytest.raises(InputError, match="the public traces are not here"):
        _public_beside(tmp_path, "extra", False, tmp_path / "work")
