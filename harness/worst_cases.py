"""The most expensive valid request of every endpoint, derived from the limits the services check (their
constants and limit objects, never numbers written here), for the worst-case tests and `bench/soak.py`.

Each function takes what the request depends on beyond the limits (a bundle's pool, a job the pool holds) and
returns {case name: (route, body)}. The bodies are plain JSON-ready dicts.
"""

from __future__ import annotations

import base64
import json

from jobaware.serving.base import MAX_BODY_BYTES

BODY_ROOM = 4096  # what a body holds beyond its largest field: keys, ids, JSON punctuation


# ---------------------------------------------------------------- failure: POST /predict
def failure_cases() -> dict[str, tuple[str, dict]]:
    """MAX_JOBS canonical jobs, every text field at its longest that keeps the body within the body limit."""
    from jobaware.failure.service import LIMITS
    from jobaware.jobtable.schema import max_text

    MAX_JOBS = LIMITS.max_jobs

    texts = ("user", "account", "partition", "qos")
    width = min(max_text(t) for t in texts)
    width = max(1, min(width, (MAX_BODY_BYTES - BODY_ROOM) // MAX_JOBS // len(texts) - 64))
    jobs = [{"job_id": 2**53 - 1 - i, **{t: f"{t}{i}".ljust(width, "x")[:width] for t in texts},
             "wallclock_req": 3600.0, "nodes_req": 2, "processors_req": 72, "gpus_req": 1, "mem_req": 1000.0,
             "submit_time": "2019-03-01 10:00:00"} for i in range(MAX_JOBS)]
    return {"predict: MAX_JOBS jobs, longest texts": ("/predict", {"jobs": jobs})}


# ---------------------------------------------------------------- hold: POST /hold-decision
def _hold_event(code: int, job: tuple[int, int], second: int, body: str) -> str:
    minute, sec = divmod(second % 3600, 60)
    return f"{code:03d} ({job[0]}.{job[1]:03d}.000) 2026-01-05 {10 + second // 3600 % 12:02d}:{minute:02d}:{sec:02d} {body}\n...\n"


def _json_length(text: str) -> int:
    """The characters `text` takes inside a JSON string."""
    return len(json.dumps(text)) - 2


def hold_cases() -> dict[str, tuple[str, dict]]:
    """A log as long as the limits let a body carry: (1) the most events per byte (many short-lived jobs, the
    held job's events spread through it); (2) one hold whose reason is the whole log (the echoed text)."""
    from jobaware.hold.service import LIMITS

    size = min(LIMITS.max_log_bytes, MAX_BODY_BYTES - BODY_ROOM)
    held = (4242, 0)
    hold = _hold_event(12, held, 3000, "Job was held.\n\tTransfer input files failure.\n\tCode 13 Subcode 256")
    events, second, cluster = [_hold_event(0, held, 0, "Job submitted from host: <10.0.0.1:9618>")], 1, 10_000
    used = _json_length(events[0]) + _json_length(hold)
    while True:
        event = _hold_event(0, (cluster, 0), second, "Job submitted from host: <10.0.0.1:9618>")
        if used + _json_length(event) > size:
            break
        events.append(event)
        used += _json_length(event)
        cluster, second = cluster + 1, (second + 1) % 2999 + 1
    many = "".join(events) + hold
    head = _hold_event(0, held, 0, "Job submitted from host: <10.0.0.1:9618>")
    frame = _json_length(head) + _json_length(_hold_event(12, held, 3000, "Job was held.\n\t\n\tCode 13 Subcode 256"))
    reason = "R" * (size - frame)
    long_reason = head + _hold_event(12, held, 3000, f"Job was held.\n\t{reason}\n\tCode 13 Subcode 256")
    return {"hold-decision: log at the limit, most events": ("/hold-decision", {"cluster": held[0], "proc": 0, "log": many}),
            "hold-decision: log at the limit, one long reason": ("/hold-decision", {"cluster": held[0], "proc": 0,
                                                                                   "log": long_reason})}


# ---------------------------------------------------------------- sizing: POST /size
def sizing_cases() -> dict[str, tuple[str, dict]]:
    """max_jobs jobs, each of its own user (no shared history), every text at its longest that keeps the body
    within the body limit, every request stated."""
    from jobaware.sizing.service import LIMITS, MAX_TEXT, SAFE_INTEGER, YEAR

    texts = ("user", "group", "name", "queue")
    width = max(1, min(MAX_TEXT, (MAX_BODY_BYTES - BODY_ROOM) // LIMITS.max_jobs // len(texts) - 64))
    jobs = [{"job_id": SAFE_INTEGER - i, **{t: f"{t}{i}".ljust(width, "x")[:width] for t in texts}, "procs": 1 + i,
             "time_asked_s": float(YEAR), "mem_asked_per_cpu_mb": 1000.0 + i, "submit_time": 1_700_000_000.0 + i}
            for i in range(LIMITS.max_jobs)]
    return {"size: max_jobs jobs, longest texts": ("/size", {"jobs": jobs})}


# ---------------------------------------------------------------- wait: POST /wait
def wait_cases() -> dict[str, tuple[str, dict]]:
    """(1) max_jobs jobs asked about in a queue of max_queue jobs (half running, half pending), as many as the body
    limit lets it carry, each of its own user; (2) max_jobs jobs asked about with every name at its longest."""
    from jobaware.wait.service import LIMITS, SAFE_INTEGER

    now = 1_700_000_000

    def job(k: int, name_width: int = 0, **times) -> dict:
        names = {t: f"{t}{k}".ljust(name_width, "x") for t in ("user", "group", "queue")}
        return {"job_id": SAFE_INTEGER - k, **names, "processors_req": 1 + k % 64, "wallclock_req": 3600.0, **times}

    asked = [job(k) for k in range(LIMITS.max_jobs)]
    room = MAX_BODY_BYTES - BODY_ROOM - len(json.dumps(asked))
    running = json.dumps(job(LIMITS.max_jobs, submit_time=now - 7200, start_time=now - 3600))
    queued = min(LIMITS.max_queue, room // (len(running) + 2))
    # running jobs of distinct start times: their ends are sorted for every job asked about
    queue = [job(LIMITS.max_jobs + k, submit_time=now - 7200, start_time=now - 3600 + k % 3600)
             for k in range(queued // 2)]
    queue += [job(LIMITS.max_jobs + k, submit_time=now - 3600) for k in range(queued // 2, queued)]
    width = max(1, min(256, (MAX_BODY_BYTES - BODY_ROOM) // LIMITS.max_jobs // 3 - 64))
    return {"wait: max_jobs jobs in the largest queue": ("/wait", {
                "time": now, "jobs": asked, "running": queue[:queued // 2], "pending": queue[queued // 2:]}),
            "wait: max_jobs jobs, longest names": ("/wait", {
                "time": now, "jobs": [job(k, width) for k in range(LIMITS.max_jobs)]})}


# ---------------------------------------------------------------- resource: POST /classify, POST /pairing
PYTHON = ("import numpy as np\nimport os, sys\n\ndef step(grid, n):\n    for i in range(n):\n"
          "        grid = np.roll(grid, 1) * 0.5 + grid[::-1]\n        with open(f'out_{i}.npy', 'wb') as f:\n"
          "            np.save(f, grid)\n    return grid\n\nresult = step(np.zeros((1000, 1000)), 100)\n")
SHELL = ("#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --mem=200G\n#SBATCH --time=01:00:00\n"
         "srun python -c 'import numpy as np; print(np.zeros(10))'\n"
         "for f in data/*.h5; do cp \"$f\" /scratch/$USER/; rsync -a $f remote:/data/; done\n")


def _script(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def resource_cases(bundle=None) -> dict[str, tuple[str, dict]]:
    """As many scripts of the largest size as the total allows (Python and batch, text and base64), as many of
    the largest size the parser builds a tree of (`bundle`'s parse limits), the most deciding features; pairing:
    the most jobs, their scripts filling the total, and the most jobs by class."""
    from jobaware.resource.parsing import ParseLimits
    from jobaware.resource.schema import CLASSES
    from jobaware.resource.service import LIMITS as limits

    count = min(limits.max_scripts, limits.max_total_bytes // limits.max_script_bytes)
    size = min(limits.max_script_bytes, (MAX_BODY_BYTES - BODY_ROOM) // max(count, 1) * 3 // 4)
    name = "n" * limits.max_name_chars
    cases = {}
    for kind, unit in (("python", PYTHON), ("batch", SHELL)):
        text = _script(unit, size)
        cases[f"classify: {count} {kind} scripts of {size:,} bytes"] = ("/classify", {
            "scripts": [{"name": f"{i}{name}"[:limits.max_name_chars], "text": text} for i in range(count)],
            "top": limits.max_top})
    whole = min(limits.max_script_bytes, (bundle.limits if bundle is not None else ParseLimits()).max_parse_bytes)
    many = min(limits.max_scripts, limits.max_total_bytes // whole)
    valid = PYTHON * (whole // len(PYTHON))  # whole statements: the parser builds a tree of every one
    cases[f"classify: {many} valid python scripts of {len(valid):,} bytes"] = ("/classify", {
        "scripts": [{"name": str(i), "text": valid} for i in range(many)], "top": limits.max_top})
    encoded = base64.b64encode(_script(PYTHON, size).encode()).decode()
    cases[f"classify: {count} base64 scripts of {size:,} bytes"] = ("/classify", {
        "scripts": [{"name": str(i), "base64": encoded} for i in range(count)], "top": limits.max_top})
    per_job = min(limits.max_script_bytes, limits.max_total_bytes // limits.max_jobs,
                  (MAX_BODY_BYTES - BODY_ROOM) // limits.max_jobs)
    cases[f"pairing: {limits.max_jobs} jobs with scripts"] = ("/pairing", {
        "jobs": [{"id": f"{i}{name}"[:limits.max_name_chars], "text": _script(PYTHON if i % 2 else SHELL, per_job)}
                 for i in range(limits.max_jobs)], "threshold": 0})
    cases[f"pairing: {limits.max_jobs} jobs by class"] = ("/pairing", {
        "jobs": [{"id": f"{i}{name}"[:limits.max_name_chars], "class": CLASSES[i % len(CLASSES)]}
                 for i in range(limits.max_jobs)], "threshold": 0})
    return cases


# ---------------------------------------------------------------- similarity: POST /similar, POST /job
def similarity_cases(index) -> dict[str, tuple[str, dict]]:
    """An inline reference at every length limit (coding and levels of MAX_REFERENCE_SEGMENTS segments whose levels
    alternate between zero and the highest level, so that every other segment starts a phase; MAX_VALUES
    node values per metric spread over the score range), with the most results, for each algorithm and for
    the consensus of all; /job of the pool's longest job."""
    import numpy as np

    from jobaware.similarity.algorithms import ALGORITHMS
    from jobaware.similarity.schema import LEVEL_MAX, METRICS, SCORE_MAX, SYMBOL_MAX
    from jobaware.similarity.service import LIMITS

    MAX_SEGMENTS, MAX_TOP_K, MAX_VALUES = LIMITS.max_reference_segments, LIMITS.max_top_k, LIMITS.max_values

    coding = ":".join(str(SYMBOL_MAX if i % 2 else 0) for i in range(MAX_SEGMENTS))
    levels = {m: ":".join(str(LEVEL_MAX if i % 2 else 0) for i in range(MAX_SEGMENTS)) for m in METRICS}
    values = {m: np.round(np.linspace(0, SCORE_MAX, MAX_VALUES), 3).tolist() for m in METRICS}
    reference = {"coding": coding, "levels": levels, "values": values}
    if len(json.dumps(reference)) > MAX_BODY_BYTES - BODY_ROOM:  # the body limit binds first: fewer node values
        share = (MAX_BODY_BYTES - BODY_ROOM - len(json.dumps({**reference, "values": {}}))) // len(METRICS) // 7
        reference["values"] = {m: np.round(np.linspace(0, SCORE_MAX, share), 3).tolist() for m in METRICS}
    cases = {f"similar: {a}, inline reference at the limits": ("/similar", {**reference, "algorithm": a,
                                                                            "top_k": MAX_TOP_K})
             for a in ALGORITHMS if index.has(_table_of(a))}
    usable = [a for a in ALGORITHMS if index.has(_table_of(a))]
    if index.has(_table_of("q-phases")):  # the most phases whose contents all differ (three levels each)
        distinct = [f"{1 + k // 256 % 16}:{1 + k // 16 % 16}:{1 + k % 16}:0" for k in range(MAX_SEGMENTS // 4)]
        cases["similar: q-phases, reference phases all different"] = ("/similar", {
            "levels": {m: ":".join(distinct) for m in METRICS}, "algorithm": "q-phases", "top_k": MAX_TOP_K})
    cases["similar: consensus of every algorithm"] = ("/similar", {**reference, "consensus": usable, "top_k": MAX_TOP_K})
    cases["job: the pool's longest job"] = ("/job", {"jobid": longest_job(index)})
    cases["similar: q-phases, the pool's longest job"] = ("/similar", {"jobid": longest_job(index),
                                                                        "algorithm": "q-phases", "top_k": MAX_TOP_K})
    return cases


def _table_of(algorithm: str) -> str:
    from jobaware.similarity.algorithms import NEEDS

    return NEEDS[algorithm]


def longest_job(index) -> int:
    """The jobid of the pool's job with the most segments."""
    import numpy as np

    best = (-1, 0)
    for shard in index.shards:
        lengths = np.diff(np.asarray(shard["coding_offsets"]))[np.asarray(shard["coding_ids"])]
        row = int(np.argmax(lengths))
        best = max(best, (int(lengths[row]), int(np.asarray(shard["jobid"])[row])))
    return best[1]


# ---------------------------------------------------------------- the bound every test checks
MAX_SECONDS = 2.0
MAX_ANSWER_BYTES = 1 << 20


def measure(answer, body: dict, tries: int = 3) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, answer bytes) of `answer(body)` in process, the answer JSON-encoded as served.

    The machine is shared: other processes stretch the wall time, threads of the request stretch the CPU time
    (summed over threads). The time of an undisturbed run is at most either, so the smaller one is checked; a
    run over the bound is repeated (at most `tries` runs) and the best one counts. As `timeit` does, the garbage
    collector is kept out of the timed run: it would collect what the process made before (a test session's
    leftovers), not the request's cost."""
    import gc
    import time

    wall, cpu, size = float("inf"), float("inf"), 0
    for _ in range(tries):
        gc.collect()
        gc.disable()
        try:
            started, used = time.perf_counter(), time.process_time()
            out = answer(body)
            wall, cpu = min(wall, time.perf_counter() - started), min(cpu, time.process_time() - used)
        finally:
            gc.enable()
        size = len(out) if isinstance(out, bytes) else len(json.dumps(out, allow_nan=False).encode())
        if min(wall, cpu) <= MAX_SECONDS:
            break
    return wall, cpu, size


def check_bounded(answer, cases: dict[str, tuple[str, dict]], routes: dict | None = None) -> list[str]:
    """Run every case through `answer` (or `routes[route]`); print each one's figures; the cases over a bound."""
    over = []
    for name, (route, body) in cases.items():
        wall, cpu, size = measure(routes[route] if routes else answer, body)
        line = f"{name}: {wall:.2f} s ({cpu:.2f} s CPU), {size:,} bytes answered, {len(json.dumps(body)):,} bytes asked"
        print(line)
        if min(wall, cpu) > MAX_SECONDS or size > MAX_ANSWER_BYTES:
            over.append(line)
    return over
