"""Failure service latency (p50/p99) and throughput on loopback, against two peers measured in the same run:
the in-process model on the same jobs (what parsing, features and model cost without HTTP) and the service's own
`/livez` round trip (what HTTP costs without the model). Bounded request counts.

    python bench/service.py [--jobs 100000] [--single 500] [--batches 40] [--batch-size 1000] [--in-flight 2]
                            [--against REF]

Cases: one live job (submitted after the bundled history), one job submitted inside the history (the README's
example), and batches of live jobs (an adapter sending its pending jobs), one request at a time and then with
`--in-flight` requests in flight. Targets (issue 7): single-job p99
<= 10 ms, batches >= 20,000 jobs/s.

What a change costs (issue 49: the bounded metrics and jobaware's series), with `--against REF`: the same service of
another tree (REF's files, from `git archive`, first on PYTHONPATH), started beside this one on the same registry and
champion, and the same requests (one live job, and batches) sent to each in turn; the medians and their ratio
(this tree over REF's).

What the service's identity costs (issue 50), in the same run: the service is started with a service token, and one
live job is asked in alternating requests with a nonce (the service hashes its answer and signs it, the client
checks the proof: `jobaware.card.Services.request`) and without one (answered as it is); the medians and their
ratio. The Content-Type check is one string comparison (`jobaware.serving.base.is_json`), timed in process beside the
request's median.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

TARGET_P99_MS = 10.0
TARGET_JOBS_PER_SECOND = 20_000


def ms(values, q) -> float:
    return round(float(np.percentile(np.asarray(values) * 1000, q)), 2)


def requests_for(jobs: pd.DataFrame, submit: pd.Timestamp, count: int, size: int, first_id: int) -> list[list[dict]]:
    """`count` requests of `size` pending jobs each, every job new (its own id), submitted at `submit`."""
    pending = jobs.drop(columns=["start_time", "end_time", "run_time", "state"])
    pending = pending.sample(count * size, replace=True, random_state=3).reset_index(drop=True)
    pending["job_id"] = np.arange(first_id, first_id + len(pending))
    pending["submit_time"] = submit.strftime("%Y-%m-%d %H:%M:%S")
    rows = json.loads(pending.to_json(orient="records"))
    return [rows[i * size:(i + 1) * size] for i in range(count)]


def timed(call, bodies) -> list[float]:
    times = []
    for body in bodies:
        start = time.perf_counter()
        call(body)
        times.append(time.perf_counter() - start)
    return times


def verdict(shortfall: float) -> str:
    """`met`, or by how much a target is missed (shortfall: how many times worse than the target)."""
    return "met" if shortfall <= 1 else f"missed by {shortfall:.1f}x"


def predict(client: httpx.Client, url: str, jobs: list[dict]) -> None:
    client.post(f"{url}/predict", json={"jobs": jobs}).raise_for_status()


def identity_cost(url: str, bodies: list[list[dict]]) -> dict:
    """Medians of one-job requests with the identity proof (nonce sent, answer signed and checked) and without,
    alternated; and the Content-Type check's own time in process."""
    import timeit

    from jobaware.card import Services
    from jobaware.serving.base import is_json

    proven, plain = [], []
    with Services({}, timeout=60) as checked, httpx.Client(timeout=60) as client:
        for body in bodies:
            for verify, times in ((True, proven), (False, plain)):
                start = time.perf_counter()
                if verify:
                    checked.request("POST", f"{url}/predict", json={"jobs": body}).raise_for_status()
                else:
                    predict(client, url, body)
                times.append(time.perf_counter() - start)
    rounds = 100_000
    check_us = timeit.timeit(lambda: is_json("application/json; charset=utf-8"), number=rounds) / rounds * 1e6
    with_p50, without_p50 = ms(proven, 50), ms(plain, 50)
    return {"requests_each": len(bodies), "with_proof_p50_ms": with_p50, "without_proof_p50_ms": without_p50,
            "proof_ratio_p50": round(with_p50 / without_p50, 3), "content_type_check_us": round(check_us, 3),
            "content_type_share_of_p50": round(check_us / 1000 / without_p50, 5)}


def reference_tree(ref: str, folder: Path) -> Path:
    """REF's files (the committed tree, as `git archive` gives it) in `folder`."""
    root = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", ref], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def serve(port: int, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([str(Path(sys.executable).with_name("jobaware")), "serve", "failure", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)


def ready(url: str) -> None:
    for _ in range(240):
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} not ready")


def against(url: str, reference: str, cases: dict[str, list[list[dict]]]) -> dict:
    """Each case's requests sent to this tree's service and to the reference's in turn: the medians and their ratio."""
    found = {}
    with httpx.Client(timeout=60) as client:
        for name, bodies in cases.items():
            times: dict[str, list[float]] = {"this": [], "reference": []}
            for body in bodies:
                for which, where in (("this", url), ("reference", reference)):
                    start = time.perf_counter()
                    predict(client, where, body)
                    times[which].append(time.perf_counter() - start)
            this, before = ms(times["this"], 50), ms(times["reference"], 50)
            found[name] = {"requests_each": len(bodies), "this_p50_ms": this, "reference_p50_ms": before,
                           "ratio_p50": round(this / before, 3)}
    return found


def in_flight(url: str, bodies: list[list[dict]], clients: int) -> int:
    """Jobs per second with `clients` requests in flight (an adapter with several pollers, or several
    adapters): each client sends its share of the bodies one after another; all jobs over the wall time."""
    from concurrent.futures import ThreadPoolExecutor

    def send(share):
        with httpx.Client(timeout=60) as client:
            for body in share:
                predict(client, url, body)

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(send, [bodies[i::clients] for i in range(clients)]))
    return round(sum(map(len, bodies)) / (time.perf_counter() - start))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--single", type=int, default=500)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--in-flight", type=int, default=2, help="batch requests in flight in the loaded run")
    parser.add_argument("--against", default="", help="a git ref: its service measured beside this tree's")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # harness/ and serving/ of this tree
    home = tempfile.mkdtemp(prefix="jobaware-bench-")
    os.environ["JOBAWARE_HOME"] = home
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    from harness.ports import free_port
    from jobaware import config, gate, tracking
    from jobaware.failure.reader import read_jobs
    from jobaware.failure.reader.slurm import parse_request
    from jobaware.failure.service import answer_rows
    from jobaware.failure.synth import write
    from jobaware.failure.train import log_trained, train_in_memory

    data = Path(home) / "jobs.parquet"
    write(data, args.jobs, "parquet", seed=2)
    jobs, _ = read_jobs(data)
    bundle, evaluation = train_in_memory(jobs, {"max_iter": 100})
    run_id = log_trained(bundle, evaluation, {}, Path(home))
    gate.promote("failure", tracking.register("failure", run_id))

    after = bundle.history["end_time"].max() + pd.Timedelta(minutes=5)
    inside = bundle.history["end_time"].quantile(0.6).floor("s")
    cases = {
        "1 live job": requests_for(jobs, after, args.single, 1, 10**9),
        "1 job inside the history": requests_for(jobs, inside, args.single, 1, 2 * 10**9),
        f"{args.batch_size} live jobs": requests_for(jobs, after, args.batches, args.batch_size, 3 * 10**9),
    }
    loaded = requests_for(jobs, after, args.batches, args.batch_size, 4 * 10**9)  # new jobs again, for the loaded run
    proof_bodies = requests_for(jobs, after, args.single, 1, 5 * 10**9)
    os.environ["JOBAWARE_SERVICE_TOKEN_FILE"] = str(config.make_service_token(Path(home) / "service.token"))
    port = free_port()
    process = serve(port)
    url = f"http://127.0.0.1:{port}"
    processes = [process]
    try:
        ready(url)
        results = {}
        with httpx.Client(timeout=60) as client:
            def post(body):
                predict(client, url, body)

            livez = timed(lambda _: client.get(f"{url}/livez").raise_for_status(), range(args.single))
            for name, bodies in cases.items():
                def local_answer(body):  # what the service does with a request, without HTTP and pydantic
                    return answer_rows(bundle.answer(parse_request(body)), "1")

                post(bodies[0]), local_answer(bodies[0])  # warm-up
                http = timed(post, bodies)
                local = timed(local_answer, bodies)
                size = len(bodies[0])
                results[name] = {
                    "requests": len(bodies), "jobs_per_request": size,
                    "http_p50_ms": ms(http, 50), "http_p99_ms": ms(http, 99),
                    "in_process_p50_ms": ms(local, 50), "in_process_p99_ms": ms(local, 99),
                    "livez_p50_ms": ms(livez, 50),
                    "jobs_per_second": round(size / statistics.median(http)),
                    "http_over_in_process_p50": round(statistics.median(http) / statistics.median(local), 2),
                }
            results[f"{args.batch_size} live jobs"]["jobs_per_second_in_flight"] = in_flight(url, loaded, args.in_flight)
        identity = identity_cost(url, proof_bodies)
        compared = {}
        if args.against:
            tree = reference_tree(args.against, Path(tempfile.mkdtemp(prefix="jobaware-reference-")))
            reference = f"http://127.0.0.1:{free_port()}"
            processes.append(serve(int(reference.rsplit(":", 1)[1]), {**os.environ, "PYTHONPATH": str(tree)}))
            ready(reference)
            same = {name: cases[name] for name in ("1 live job", f"{args.batch_size} live jobs")}
            compared = against(url, reference, same)
        print(json.dumps({"history_jobs": len(bundle.history), **results, "identity": identity,
                          **({f"against {args.against}": compared} if compared else {})}, indent=2))
        for name, r in results.items():
            if r["jobs_per_request"] == 1:
                target = f"p99 target {TARGET_P99_MS} ms {verdict(r['http_p99_ms'] / TARGET_P99_MS)}"
            else:
                busy = r["jobs_per_second_in_flight"]
                target = (f"throughput target {TARGET_JOBS_PER_SECOND:,} jobs/s "
                          f"{verdict(TARGET_JOBS_PER_SECOND / r['jobs_per_second'])} one request at a time; "
                          f"{args.in_flight} requests in flight: {busy:,} jobs/s, {verdict(TARGET_JOBS_PER_SECOND / busy)}")
            print(f"{name}: HTTP p50 {r['http_p50_ms']} ms, p99 {r['http_p99_ms']} ms; in-process p50 "
                  f"{r['in_process_p50_ms']} ms ({r['http_over_in_process_p50']}x); /livez p50 {r['livez_p50_ms']} ms; "
                  f"{r['jobs_per_second']:,} jobs/s; {target}")
        print(f"identity proof, 1 live job: p50 {identity['with_proof_p50_ms']} ms with, "
              f"{identity['without_proof_p50_ms']} ms without ({identity['proof_ratio_p50']}x); Content-Type check "
              f"{identity['content_type_check_us']} us a request ({identity['content_type_share_of_p50']:.3%} of p50)")
        for name, found in compared.items():
            print(f"{name}, this tree against {args.against}: p50 {found['this_p50_ms']} ms against "
                  f"{found['reference_p50_ms']} ms ({found['ratio_p50']}x; {found['requests_each']} requests each, "
                  "in turn)")
    finally:
        for started in processes:
            os.killpg(started.pid, signal.SIGTERM)
            started.wait(30)


if __name__ == "__main__":
    main()
