"""Soak: each service (a real `jobaware serve`, i.e. `bentoml serve`, on loopback) under a fixed rate of mixed
valid, invalid and worst-case requests; latency p50/p99, answers by status, and the resident memory of the
service's whole process tree (from /proc) at the start, middle and end. Memory must level off: the end at most
5 % over the larger of the start and the middle (memory that fell and came back is not growth).

    python bench/soak.py [--keys KEY ...] [--requests 10000] [--rate 20]
                         [--worst-every 100] [--invalid-every 5] [--home DIR]

Without --home, a fresh JOBAWARE_HOME gets a champion of each key trained in process on the capability's smoke
data with its smoke parameters (what its pipeline does, without kfp.local). The keys are the registered
capabilities' (default: all). The worst cases are those of harness/worst_cases.py, derived from the services' own
limits; each kind of request is sent once before the start figure is taken (the first use of an allocator's arenas
is not growth).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MAX_GROWTH = 0.05
INVALID = [b"{nope", json.dumps({"no_such_field": 1}).encode(), b"[]", json.dumps({"jobs": "x", "log": 3}).encode()]


@dataclass
class Request:
    kind: str  # valid, invalid or worst
    name: str
    route: str
    body: bytes


@dataclass
class Result:
    kind: str
    name: str
    status: int
    seconds: float
    answer_bytes: int


@dataclass
class Soak:
    key: str
    results: list[Result] = field(default_factory=list)
    memory: list[tuple[int, int]] = field(default_factory=list)  # (requests answered, bytes resident)


def prepare(home: Path, keys: list[str], work: Path) -> None:
    """A champion of each key in `home` that has none: the capability's smoke data and parameters, ingested,
    trained, logged, registered and promoted in process (what its pipeline does, without kfp.local)."""
    os.environ["JOBAWARE_HOME"] = str(home)
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    from jobaware import capabilities, gate, steps, tracking
    from jobaware.errors import JobawareError

    for key in keys:
        try:
            if tracking.champion_version(key) is not None:
                continue
        except JobawareError:  # no store yet
            pass
        capability = capabilities.get(key)
        records, params = capability.smoke
        data, dataset = work / f"{key}-smoke", work / f"{key}-dataset"
        truth = capability.synth(data, records, seed=5, fmt=None, progress=None)
        steps.ingest(key, str(data), dataset)
        run_id, _ = steps.train_step(key, str(dataset), json.dumps(params), "", str(data),
                                     str(truth) if key == "hold" else "", str(work / f"{key}-work"),
                                     str(work / f"{key}.joblib"))
        gate.promote(key, tracking.register(key, run_id))


def requests_for(key: str, home: Path) -> list[Request]:
    """The valid example, the invalid bodies and the worst cases of `key`'s service (from its champion)."""
    os.environ["JOBAWARE_HOME"] = str(home)
    from harness import worst_cases
    from jobaware import capabilities, tracking

    route, example = capabilities.get(key).example
    out = [Request("valid", "example", route, json.dumps(example).encode())]
    out += [Request("invalid", body[:20].decode(), route, body) for body in INVALID]
    if key == "similarity" or key == "resource":
        bundle, _ = tracking.load_bundle(key)
        cases = worst_cases.similarity_cases(bundle.index) if key == "similarity" else worst_cases.resource_cases(bundle)
        del bundle
    else:
        cases = getattr(worst_cases, f"{key}_cases")()
    out += [Request("worst", name, path, json.dumps(body).encode()) for name, (path, body) in cases.items()]
    return out


def resident_bytes(pid: int) -> int:
    """Resident memory of `pid` and every process below it, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            with open(f"/proc/{current}/status") as handle:
                total += next((int(line.split()[1]) * 1024 for line in handle if line.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total


def serve(key: str, home: Path, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "JOBAWARE_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.Popen([str(Path(sys.executable).with_name("jobaware")), "serve", key, "--port", str(port)],
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def schedule(kinds: list[Request], count: int, worst_every: int, invalid_every: int) -> list[Request]:
    """`count` requests: every `worst_every`-th a worst case (in turn), every `invalid_every`-th an invalid one
    (in turn), the rest valid."""
    worst = [r for r in kinds if r.kind == "worst"]
    invalid = [r for r in kinds if r.kind == "invalid"]
    valid = [r for r in kinds if r.kind == "valid"]
    out = []
    for i in range(count):
        if worst and i % worst_every == worst_every // 2:
            out.append(worst[i // worst_every % len(worst)])
        elif invalid and i % invalid_every == 1:
            out.append(invalid[i // invalid_every % len(invalid)])
        else:
            out.append(valid[i % len(valid)])
    return out


def post(client: httpx.Client, url: str, request: Request) -> Result:
    started = time.perf_counter()
    try:
        answer = client.post(f"{url}{request.route}", content=request.body, headers={"content-type": "application/json"})
        status, size = answer.status_code, len(answer.content)
    except httpx.HTTPError:
        status, size = 0, 0  # no answer: counted as status 0
    return Result(request.kind, request.name, status, time.perf_counter() - started, size)


def soak(key: str, url: str, process: subprocess.Popen, kinds: list[Request], count: int, rate: float,
         worst_every: int = 100, invalid_every: int = 5, clients: int = 4) -> Soak:
    """Send `count` requests at `rate` per second (each at its time, by up to `clients` at once); sample the
    service's resident memory about once a second."""
    plan = schedule(kinds, count, worst_every, invalid_every)
    out = Soak(key)
    with httpx.Client(timeout=120) as client:
        for request in kinds:  # warm-up: every kind once
            post(client, url, request)
    out.memory.append((0, resident_bytes(process.pid)))
    lock, position = threading.Lock(), [0]
    done = threading.Event()
    start = time.monotonic()

    def send() -> None:
        with httpx.Client(timeout=120) as client:
            while True:
                with lock:
                    i = position[0]
                    position[0] += 1
                if i >= count:
                    return
                time.sleep(max(0.0, start + i / rate - time.monotonic()))
                result = post(client, url, plan[i])
                with lock:
                    out.results.append(result)

    def sample() -> None:
        while not done.wait(1.0):
            out.memory.append((len(out.results), resident_bytes(process.pid)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=send) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    sampler.join()
    out.memory.append((len(out.results), resident_bytes(process.pid)))
    return out


def ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values) * 1000, q)), 1) if values else float("nan")


def summary(result: Soak) -> dict:
    """Latency p50/p99 (all and per kind), answers by status, memory at start, middle and end (medians of the
    samples in the first 5 %, around the middle 10 % and in the last 5 % of requests) and the growth of the end over the larger of the start and the middle."""
    count = max(1, len(result.results))
    statuses: dict[str, int] = {}
    for r in result.results:
        statuses[f"{r.kind} {r.status}"] = statuses.get(f"{r.kind} {r.status}", 0) + 1

    def resident(low: float, high: float) -> int:
        samples = [m for done, m in result.memory if low * count <= done <= high * count]
        return int(statistics.median(samples)) if samples else 0

    start, middle, end = resident(0, 0.05), resident(0.45, 0.55), resident(0.95, 1.0)
    worst: dict[str, float] = {}
    for r in result.results:
        if r.kind == "worst":
            worst[r.name] = max(worst.get(r.name, 0.0), r.seconds)
    return {
        "key": result.key, "requests": len(result.results),
        "p50_ms": ms([r.seconds for r in result.results], 50), "p99_ms": ms([r.seconds for r in result.results], 99),
        **{f"{kind}_p99_ms": ms([r.seconds for r in result.results if r.kind == kind], 99)
           for kind in ("valid", "invalid", "worst")},
        "statuses": dict(sorted(statuses.items())),
        "largest_answer_bytes": max((r.answer_bytes for r in result.results), default=0),
        "worst_case_max_seconds": {name: round(s, 2) for name, s in sorted(worst.items())},
        "rss_start_mib": round(start / 2**20, 1), "rss_middle_mib": round(middle / 2**20, 1),
        "rss_end_mib": round(end / 2**20, 1),
        "growth_second_half": round(end / max(start, middle) - 1, 4) if middle else None,
    }


def run(keys: list[str], home: Path, count: int, rate: float, worst_every: int, invalid_every: int,
        logs: Path) -> list[dict]:
    """Serve every key at once (their start-ups overlap), then soak each in turn while the others idle, and stop
    them; one summary per key."""
    from harness.ports import free_port, stop, wait_for

    served: dict[str, tuple[str, subprocess.Popen]] = {}
    try:
        for key in keys:
            port = free_port()
            while any(url.endswith(f":{port}") for url, _ in served.values()):  # each its own port
                port = free_port()
            served[key] = (f"http://127.0.0.1:{port}", serve(key, home, port, logs / f"soak-{key}.log"))
        out = []
        for key, (url, process) in served.items():
            wait_for(f"{url}/readyz", 300, process)
            out.append(summary(soak(key, url, process, requests_for(key, home), count, rate, worst_every,
                                    invalid_every)))
        return out
    finally:
        for _, process in served.values():
            stop(process)


def line(s: dict) -> str:
    return (f"{s['key']}: {s['requests']:,} requests, p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms (worst cases p99 "
            f"{s['worst_p99_ms']} ms); {s['statuses']}; largest answer {s['largest_answer_bytes']:,} bytes; resident "
            f"{s['rss_start_mib']} -> {s['rss_middle_mib']} -> {s['rss_end_mib']} MiB, second half "
            f"{s['growth_second_half']:+.1%} ({'met' if s['growth_second_half'] <= MAX_GROWTH else 'MISSED'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    from jobaware import capabilities

    keys = capabilities.keys()
    parser.add_argument("--keys", nargs="+", default=list(keys), choices=keys)
    parser.add_argument("--requests", type=int, default=10_000, help="requests per service")
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second, fixed")
    parser.add_argument("--worst-every", type=int, default=100, help="one worst-case request in this many")
    parser.add_argument("--invalid-every", type=int, default=5, help="one invalid request in this many")
    parser.add_argument("--home", type=Path, help="a JOBAWARE_HOME with champions (default: a fresh one)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jobaware-soak-"))
    home = args.home or work / "home"
    prepare(home, args.keys, work)
    results = run(args.keys, home, args.requests, args.rate, args.worst_every, args.invalid_every, work)
    print(json.dumps(results, indent=2))
    for s in results:
        print(line(s))


if __name__ == "__main__":
    main()
