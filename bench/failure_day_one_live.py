"""A new site's first days on a real Slurm: the public-trace failure model served from day one to a live one-node
Slurm with accounting (harness/slurm_cluster.py), judged on the jobs it really saw end, against what the site has
without it: no model (a constant answer, ROC-AUC 0.5), or a model trained on its own first jobs alone.

1. The public model is trained as a new site gets it, `jobaware pipeline run failure --input MANIFEST` on the
   bundled public traces (jobaware/data/real/failure.public.json), but with the trace that plays the site (`--site`) left
   out of the manifest: the model never saw the site's jobs. `--home` reuses a JOBAWARE_HOME trained before.
2. `jobaware serve failure` serves it on a free loopback port with `JOBAWARE_STORE` naming the site's store (so
   it reads the site's history as jobs end; its 10-minute re-read scaled as the trace's time is, at least 2 s),
   and the real `jobaware slurm collect` and `jobaware slurm adapt` (dry run: verdicts kept in the store, nothing
   written to Slurm; every card part but failure's switched off in the policy) run on one SQLite store.
3. The trace's first `--jobs` jobs from `--first` (the site's first days) are submitted at their trace offsets x
   `--scale`, each as its trace user (a Unix user `--user-prefix`+number, created when missing and removed at the
   end: `sbatch --uid` runs the job as that user, so the store sees the site's users), processors scaled to the
   node's `--cores`, and ends as it ended in the trace (`ending`): COMPLETED, exit 0 after its scaled run time;
   FAILED, exit 1 after it; failed at its limit (run >= requested time), it sleeps past `--time` and Slurm ends
   it TIMEOUT; CANCELLED (status 5), the bench runs `scancel` after its scaled run time. Time limits are whole
   minutes (Slurm's unit): the scaled requested time rounded up, at least 1 and at most `--max-limit`. Each job
   waits `--pend` seconds (`--begin`) before it may start, so that the adapter, which judges pending jobs, sees
   it pending (on an idle node a job starts at once).
4. Once every job has ended and the collector has its end from accounting: `jobaware failure accuracy --store
   URI --json` (the public model on every live job), then `jobaware failure export`, and the exported jobs split
   in halves by submit time. The pipeline on the first half with `--param public_data=none` is what the site
   would run: it stops before training (the gate's minimum; its line is printed). So the site-only model is
   trained in process by the pipeline's own train functions (`featurize`, `fit`: the last 30 % of the half held
   out as the pipeline does, the calibration and threshold on the training side's last 20 %) and scored on the
   second half with the history the store gives each job; the public model is scored on the same second half by
   the verdicts it really gave. ROC-AUC of P(fail), and accuracy and failed-class F1 at each model's own
   threshold; the ratio is public against site only, and against no model (0.5).

    PYTHONPATH=$PWD python bench/failure_day_one_live.py --site KTH-SP2 --jobs 300

Needs root (the test cluster's SlurmUser, `useradd`, `sbatch --uid`) and Slurm with slurmdbd and MariaDB.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.ports import free_port, stop, wait_for  # noqa: E402
from harness.slurm_cluster import SlurmCluster  # noqa: E402

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))
CLUSTER = "jobaware-test"  # harness/slurm_cluster.py's ClusterName
PARTITION_MAX_MINUTES = 60  # the test partition's MaxTime
COMPLETED_MARGIN_S = 5  # a completed job ends this long before its limit at the latest
PAST_LIMIT_S = 600  # a job Slurm must end sleeps this much past its limit


@dataclass(frozen=True)
class Ending:
    """How a replayed job ends: `kind` (completed, failed, timeout, cancelled), its `--time` in minutes, the
    seconds its script sleeps and then its exit code; a cancelled job is `scancel`ed `cancel_after_s` after it
    was submitted and may start."""
    kind: str
    limit_min: int
    sleep_s: int
    exit_code: int
    cancel_after_s: float | None = None

    def script(self) -> str:
        return f"#!/bin/sh\nsleep {self.sleep_s}\nexit {self.exit_code}\n"


def ending(status: int, run_s: float, requested_s: float, scale: float, max_limit_min: int) -> Ending | None:
    """The replay of a trace job (SWF status 1 completed, 0 failed, 5 cancelled; times in trace seconds, -1 or
    NaN unknown) at `scale`; None for a status that says nothing of how it ended. A failed job that ran for its
    requested time or longer was ended by the scheduler at its limit: it becomes TIMEOUT. A completed one ends
    before its limit, whatever the trace's rounding."""
    run = max(run_s, 0.0) if np.isfinite(run_s) else 0.0
    known = np.isfinite(requested_s) and requested_s > 0
    limit = max_limit_min
    if known:
        scaled = round(requested_s * scale, 6)  # 36000 / 600 is 60.00000000000001
        limit = int(min(max(math.ceil(scaled / 60), 1), max_limit_min))
    sleep = round(run * scale)
    past = limit * 60 + PAST_LIMIT_S
    if status == 5:
        return Ending("cancelled", limit, past, 0, cancel_after_s=min(sleep, limit * 60 - COMPLETED_MARGIN_S))
    if status == 0 and known and run >= requested_s:
        return Ending("timeout", limit, past, 0)
    if status == 0:
        return Ending("failed", limit, min(sleep, limit * 60 - COMPLETED_MARGIN_S), 1)
    if status == 1:
        return Ending("completed", limit, min(sleep, limit * 60 - COMPLETED_MARGIN_S), 0)
    return None


def site_trace(site: str) -> Path:
    """The path of an SWF trace of the public manifest."""
    from jobaware.failure import public
    from jobaware.fit import public_traces
    from jobaware.swf import is_swf

    traces = [t for t in public_traces(public.manifest()) if is_swf(t["path"])]
    for trace in traces:
        if trace["name"] == site:
            return Path(trace["path"])
    raise SystemExit(f"--site {site}: not an SWF trace of {public.manifest()} "
                     f"({', '.join(t['name'] for t in traces)})")


def replayed(path: Path, first: int, count: int, cores: int, scale: float, max_limit_min: int) -> pd.DataFrame:
    """The slice as it is replayed: submit offset (replay seconds), processors, user, and its `Ending`."""
    from jobaware.swf import read_swf

    trace = read_swf(path)
    jobs = trace.jobs.sort_values("submit", kind="stable").reset_index(drop=True)
    max_procs = trace.header.fields.get("MaxProcs", "").split(" ")[0]
    machine = float(max_procs) if max_procs.isdigit() else float(jobs["procs_req"].max())
    rows = []
    for job in jobs.iloc[first:].itertuples():
        end = ending(int(job.status), job.run, job.time_req if job.time_req >= 0 else np.nan, scale, max_limit_min)
        if end is None:
            continue
        procs = job.procs_req if job.procs_req > 0 else job.procs_alloc
        rows.append({"trace_job": int(job.job), "submit": job.submit, "user": int(job.user),
                     "cpus": int(min(max(math.ceil(procs * cores / machine), 1), cores)), "ending": end})
        if len(rows) == count:
            break
    out = pd.DataFrame(rows)
    out["offset_s"] = (out["submit"] - out["submit"].iloc[0]) * scale
    return out


def public_model(site: str, home: Path, work: Path) -> None:
    """`jobaware pipeline run failure` on the public manifest without `site`, into `home`."""
    from jobaware.failure import public
    from jobaware.fit import PUBLIC_SUFFIX, public_traces

    manifest = work / f"public-without-{site}{PUBLIC_SUFFIX}"
    manifest.write_text(json.dumps({"traces": [t for t in public_traces(public.manifest()) if t["name"] != site]}))
    started = time.monotonic()
    done = subprocess.run([JOBAWARE, "pipeline", "run", "failure", "--input", str(manifest)],
                          env={**os.environ, "JOBAWARE_HOME": str(home)}, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"training the public model failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    print(f"public model trained without {site}: {time.monotonic() - started:.0f} s", flush=True)


class Users:
    """Unix users for the trace's users, created when missing and removed at the end (only those created here)."""

    def __init__(self, prefix: str):
        self.prefix, self.created = prefix, []

    def name(self, user: int) -> str:
        name = f"{self.prefix}{user}"
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                           check=True, capture_output=True)
            self.created.append(name)
        return name

    def gid(self, user: int) -> int:
        return pwd.getpwnam(self.name(user)).pw_gid

    def remove(self) -> None:
        for name in self.created:
            subprocess.run(["userdel", name], capture_output=True)


def daemon(command: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True, stdout=open(log, "ab"),
                            stderr=subprocess.STDOUT)


def policy(path: Path) -> Path:
    """A policy that asks the failure part alone (the other services are not deployed here), with the rate limit
    at its largest: in a dry run nothing reaches Slurm, and the replay submits jobs `1 / --scale` times faster
    than the trace did (at the default 60 acts a minute, jobs over it would start before they were judged)."""
    from jobaware import card

    path.write_text(json.dumps({"capabilities": {key: False for key in card.declared() if key != "failure"},
                                "max_acts_per_minute": 10_000}))
    return path


def replay(jobs: pd.DataFrame, cluster: SlurmCluster, users: Users, pend: float, until: float,
           submitted: dict[int, int]) -> None:
    """Submit each job at its offset, into `submitted` (Slurm job id -> slice row); `scancel` the cancelled ones
    when due; wait until none is left in the queue (at most until `until`, monotonic)."""
    cancels = {}
    begin = time.monotonic()
    for row in jobs.itertuples():
        while time.monotonic() < begin + row.offset_s:
            _cancel_due(cluster, cancels)
            time.sleep(0.1)
        end = row.ending
        done = subprocess.run(
            ["sbatch", "--parsable", f"--uid={users.name(row.user)}", f"--gid={users.gid(row.user)}", "-n", str(row.cpus), "-t", str(end.limit_min),
             f"--begin=now+{int(pend)}", "-J", "replay", "--output=/dev/null", "--error=/dev/null", "--chdir=/tmp"],
            input=end.script(), env=cluster.env, capture_output=True, text=True, timeout=60, check=True)
        job_id = int(done.stdout.strip().split(";")[0])
        submitted[job_id] = row.Index
        if end.cancel_after_s is not None:
            cancels[job_id] = time.monotonic() + pend + end.cancel_after_s
        if len(submitted) % 50 == 0:
            print(f"  submitted {len(submitted)} of {len(jobs)} ({time.monotonic() - begin:.0f} s)", flush=True)
    while time.monotonic() < until:
        _cancel_due(cluster, cancels)
        queued = subprocess.run(["squeue", "-h", "-o", "%i"], env=cluster.env, capture_output=True, text=True,
                                timeout=60).stdout.split()
        if not set(map(int, queued)) & set(submitted):
            return
        time.sleep(2)
    raise SystemExit("the replay ran past --max-minutes with jobs still in the queue")


def _cancel_due(cluster: SlurmCluster, cancels: dict[int, float]) -> None:
    for job_id, due in list(cancels.items()):
        if time.monotonic() >= due:
            subprocess.run(["scancel", str(job_id)], env=cluster.env, capture_output=True, timeout=60)
            del cancels[job_id]


def stored_ends(uri: str, ids: set[int]) -> dict[int, dict]:
    """The final state the store holds for each of `ids` (absent while it has none)."""
    from jobaware.store import open_store

    with open_store(uri) as store:
        return {r["job_id"]: r["final"] for r in store.records(CLUSTER) if r["job_id"] in ids and r["final"]}


def said_fail(uri: str) -> pd.DataFrame:
    """Per finished, labelled job of the store: submit time, failed, and what the served model said (p_fail, flag)."""
    from jobaware.card import said
    from jobaware.failure.schema import FAILURES
    from jobaware.store import open_store

    rows = []
    with open_store(uri) as store:
        for outcome in store.outcomes(CLUSTER):
            state = outcome["final"]["state"]
            parts = said(outcome["predictions"], "failure")
            if parts and (state == "COMPLETED" or state in FAILURES):
                rows.append({"job_id": outcome["key"].job_id, "failed": state != "COMPLETED",
                             "p_fail": float(parts[-1]["p_fail"]), "flagged": parts[-1].get("likely_fail")})
    return pd.DataFrame(rows)


def scores(failed: np.ndarray, p_fail: np.ndarray, flagged: np.ndarray | None) -> dict:
    """ROC-AUC of P(fail); accuracy and failed-class F1 of the flag (none without a threshold)."""
    from sklearn.metrics import roc_auc_score

    from jobaware.failure.operating import at_flags

    found = {"jobs": len(failed), "failed": int(failed.sum()),
             "roc_auc": float(roc_auc_score(failed, p_fail)) if 0 < failed.sum() < len(failed) else float("nan")}
    if flagged is not None:
        flags = at_flags(failed, flagged)
        found |= {"accuracy": flags["accuracy"], "fail_f1": flags["fail_f1"]}
    return found


def site_only(jobs: pd.DataFrame, half: int) -> tuple[dict, str]:
    """The site-only model trained on the first `half` jobs (by submit time) and scored on the rest, with each
    job's history from the jobs that ended before it was submitted; and the model's threshold, in words."""
    from jobaware.failure.bundle import FailureBundle
    from jobaware.failure.features import FEATURES
    from jobaware.failure.train import FeatureTable, featurize, fit

    table = featurize(jobs.iloc[:half], 0.3)
    labels = table.loc[table["split"] == "train", "label"].astype(str)
    if labels.eq("COMPLETED").all() or not labels.eq("COMPLETED").any():
        return {}, "no model: its training side lacks a failed or a completed job"
    bundle = fit(FeatureTable(table), FailureBundle.history_tail(jobs.iloc[:half]), {})
    later = featurize(jobs, 0.3).iloc[half:]
    later = later[later["label"].notna()]
    p_fail = bundle.model.predict_proba(later[list(FEATURES)])["p_fail"].to_numpy()
    failed = later["label"].astype(str).to_numpy() != "COMPLETED"
    threshold = bundle.threshold
    flagged = None if threshold is None else p_fail >= threshold
    trained = int((table["split"] == "train").sum())
    return scores(failed, p_fail, flagged), (f"trained on {trained} jobs, threshold "
                                             + ("none" if threshold is None else f"{threshold:.3f}"))


def measure(uri: str, home: Path, work: Path) -> None:
    from jobaware.failure.reader import read_jobs
    from jobaware.failure.schema import OUTCOMES

    env = {**os.environ, "JOBAWARE_HOME": str(home)}
    live = json.loads(subprocess.run([JOBAWARE, "failure", "accuracy", "--store", uri, "--json"], env=env,
                                     capture_output=True, text=True, check=True).stdout)
    print("\n`jobaware failure accuracy --store URI --json`:")
    for row in live:
        print("  " + json.dumps(row))
    exported = work / "site.csv"
    subprocess.run([JOBAWARE, "failure", "export", "--store", uri, "--output", str(exported)], env=env,
                   capture_output=True, text=True, check=True)
    jobs = read_jobs(exported)[0].sort_values("submit_time", kind="stable").reset_index(drop=True)
    half = len(jobs) // 2
    first_half = work / "site-first-half.csv"
    table = pd.read_csv(exported)
    table.iloc[np.argsort(table["submit_time"].to_numpy(), kind="stable")[:half]].to_csv(first_half, index=False)
    refused = subprocess.run([JOBAWARE, "pipeline", "run", "failure", "--input", str(first_half), "--param",
                              "public_data=none"], env=env, capture_output=True, text=True)
    said = (refused.stdout + refused.stderr).strip().splitlines()
    print(f"\n`jobaware pipeline run failure --input <first {half} jobs> --param public_data=none`: exit "
          f"{refused.returncode}: {said[-1] if said else ''}")

    answers = said_fail(uri)
    labelled = int(jobs["state"].isin(OUTCOMES).sum())
    print(f"\nverdicts kept by the adapter for {len(answers)} of the {labelled} completed or failed jobs")
    second = answers[answers["job_id"].isin(jobs["job_id"].iloc[half:].astype(int))]
    flag = lambda frame: None if frame["flagged"].isna().any() else frame["flagged"].to_numpy(bool)  # noqa: E731
    rows = {"public, every live job": scores(answers["failed"].to_numpy(), answers["p_fail"].to_numpy(),
                                             flag(answers)),
            "public, second half": scores(second["failed"].to_numpy(), second["p_fail"].to_numpy(), flag(second))}
    rows["site only (first half), second half"], how = site_only(jobs, half)
    majority = 1 - second["failed"].mean() if second["failed"].mean() < 0.5 else second["failed"].mean()
    rows["no model (constant), second half"] = {"jobs": len(second), "failed": int(second["failed"].sum()),
                                                "roc_auc": 0.5, "accuracy": majority}
    print(f"\nsite only: {how}")
    print("\n| model | jobs (failed) | ROC-AUC | accuracy | failed F1 |\n|---|---|---|---|---|")
    for name, found in rows.items():
        if not found:
            print(f"| {name} | no model | | | |")
            continue
        print(f"| {name} | {found['jobs']} ({found['failed']}) | **{found['roc_auc']:.3f}** | "
              f"{_figure(found.get('accuracy'), '.1%')} | {_figure(found.get('fail_f1'), '.3f')} |")
    public = rows["public, second half"]["roc_auc"]
    own = rows["site only (first half), second half"]
    print(f"\npublic / site only (ROC-AUC, second half): "
          f"{public / own['roc_auc'] if own else float('nan'):.2f}; public / no model: {public / 0.5:.2f}")


def _figure(value: float | None, form: str) -> str:
    """A table cell: "-" where there is no figure (no threshold, no failed job flagged)."""
    return "-" if value is None or not np.isfinite(value) else format(value, form)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", default="KTH-SP2", help="the public trace that plays the site (left out of the "
                        "public model's training)")
    parser.add_argument("--jobs", type=int, default=300, help="jobs replayed")
    parser.add_argument("--first", type=int, default=0, help="where the slice begins in the trace (jobs)")
    parser.add_argument("--scale", type=float, default=1 / 600, help="trace seconds x this = replay seconds "
                        "(submit gaps, run and requested times)")
    parser.add_argument("--cores", type=int, default=32, help="the node's CPUs; processors scaled to them")
    parser.add_argument("--max-limit", type=int, default=5, help="largest --time, minutes")
    parser.add_argument("--pend", type=float, default=5, help="seconds each job waits (--begin) before it may start")
    parser.add_argument("--max-minutes", type=float, default=30, help="the replay stops past this")
    parser.add_argument("--home", type=Path, help="a JOBAWARE_HOME with the public model trained without --site "
                        "(skips the training)")
    parser.add_argument("--user-prefix", default="jobaware-r", help="the Unix users standing for the trace's")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped, it still stops what it started
    if os.geteuid() != 0:
        raise SystemExit("needs root: the test cluster runs as root and jobs run as the trace's users (sbatch --uid)")
    max_limit = min(args.max_limit, PARTITION_MAX_MINUTES)
    jobs = replayed(site_trace(args.site), args.first, args.jobs, args.cores, args.scale, max_limit)
    kinds = pd.Series([e.kind for e in jobs["ending"]]).value_counts().to_dict()
    print(f"{args.site}: {len(jobs)} jobs from job {args.first}, {jobs['user'].nunique()} users, {kinds}; "
          f"submitted over {jobs['offset_s'].iloc[-1]:.0f} s", flush=True)

    with tempfile.TemporaryDirectory(prefix="jobaware-day-one-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o711)  # the jobs' users reach their scripts in the cluster's spool below it
        home = args.home or work / "home"
        if args.home is None:
            public_model(args.site, home, work)
        uri = f"sqlite:{work / 'store'}"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "JOBAWARE_HOME": str(home), "JOBAWARE_STORE": uri, "PYTHONPATH": str(ROOT),
               "JOBAWARE_FAILURE_HISTORY_SECONDS": str(max(600 * args.scale, 2.0))}
        users, running, submitted = Users(args.user_prefix), [], {}
        cluster = SlurmCluster(work / "slurm", accounting=True, cpus=args.cores).start()
        try:
            env |= {"SLURM_CONF": cluster.env["SLURM_CONF"]}
            running.append(daemon([JOBAWARE, "serve", "failure", "--port", str(port)], env, work / "serve.log"))
            wait_for(f"{url}/readyz", 300, running[-1])
            running.append(daemon([JOBAWARE, "slurm", "collect", "--store", uri, "--interval", "2", "--forever",
                                   "--cluster", CLUSTER], env, work / "collect.log"))
            running.append(daemon([JOBAWARE, "slurm", "adapt", "--store", uri, "--policy",
                                   str(policy(work / "policy.yaml")), "--interval", "1", "--forever", "--cluster",
                                   CLUSTER, "--service", f"failure={url}"], env, work / "adapt.log"))
            started = time.monotonic()
            print(f"cluster, service ({url}), collector and adapter up; replaying", flush=True)
            replay(jobs, cluster, users, args.pend, started + args.max_minutes * 60, submitted)
            print(f"every job ended: {time.monotonic() - started:.0f} s", flush=True)
            while True:
                ends = stored_ends(uri, set(submitted))
                if len(ends) == len(submitted) and all(e["source"] == "sacct" for e in ends.values()):
                    break
                if time.monotonic() > started + args.max_minutes * 60:
                    raise SystemExit(f"the collector stored {len(ends)} of {len(submitted)} ends by --max-minutes")
                time.sleep(2)
            got = pd.Series([ends[j]["state"] for j in submitted]).value_counts().to_dict()
            expected = pd.Series([jobs.loc[submitted[j], "ending"].kind for j in submitted]).value_counts().to_dict()
            print(f"stored ends (sacct): {got}; replayed as {expected}; {time.monotonic() - started:.0f} s", flush=True)
        finally:
            for process in reversed(running):
                stop(process)
            if submitted:  # the cluster's stop cancels root's jobs; these run as the trace's users
                subprocess.run(["scancel", "--full", *map(str, submitted)], env=cluster.env, capture_output=True)
            cluster.stop()
            users.remove()
        measure(uri, home, work)


if __name__ == "__main__":
    main()
