"""A synthetic schedd-wide job event log in HTCondor's exact text format, with the true P(release) per hold.

The pool. Users (each with a data origin, a habit of mistakes and a readiness to act on held jobs) submit
clusters in bursts (all procs of a cluster in the same second, Poisson cluster arrivals). Jobs wait, transfer
input, execute (slot properties, image-size updates, disconnects), may be evicted and run again, transfer
output and terminate. Storage origins have outages (Poisson starts, exponential lengths) and execute nodes
have black-hole episodes; users may be over their output quota for a while. Every job carries a 028
job-ad event after its submit event (Owner and requests), as a schedd with EVENT_LOG_JOB_AD_INFORMATION_ATTRS
writes.

Holds and their causes (the job's first hold starts its chain; its cause is the only one drawn again):
  cause       code/subcode        when                              recurs after a release with prob q
  outage      13/{256,62} 12/...  a transfer while the origin is out  0.8 while that outage lasts
  missing     13/{2,256}          the first input transfer             1 (0.1 after the user fixes the path)
  quota       12/122              output transfer while over quota     1 while over quota
  memory      26/103 or 34/102    need of the run > request_memory    P(need > request) (user: 2 x request)
  cpu         26/102              soon after start                     0.9 (user: 0.2)
  execute     47/0                the run passes the 20 h limit        P(run > limit)
  startd      21/0                a start on a black-hole node         0.3 while the episode lasts
  input_size  32/0                at submit                            - (user: 0.05)
  user        1/0                 the user holds the cluster           - (user: 0)
The pool's SYSTEM_PERIODIC_RELEASE releases codes 12, 13, 21, 26, 34 `RELEASE_WAIT` seconds after the hold
while the job has had fewer than `MAX_POLICY_RELEASES` holds before; a released job's next attempt comes
`RETRY_DELAY` seconds later (for outage, quota and startd causes, whose recurrence depends on time). Other
holds wait for the user: after a log-normal delay the user releases (probability rho, by user and cause)
or removes the job; after 3 days unattended, SYSTEM_PERIODIC_REMOVE removes it; a job the user released
and that is held again is removed. A job that starts and runs to its end terminates abnormally with
probability `APP_FAILURE`, else normally (exit code 1 for a few).

The true P(release) of a hold (written beside the log) is the probability, given the cause, the pool's
outage and episode schedule, the user's habits and the job's hold count, that the job terminates normally
afterwards (the `release` label of jobaware.hold.labels), computed exactly by the recursion in
`release_probability`. It knows the cause, which the log shows only through code, subcode, history and
the jobs around: the best score a model of the log can reach is at most that of this oracle.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import ndtr

from jobaware.errors import InputError
from jobaware.hold.outcomes import Outcomes, release_chance
from jobaware.packaged import bundled

MIN_JOBS, MAX_JOBS = 10, 20_000_000
JOBS_PER_DAY = 5_000
DEFAULT_SYNTH_JOBS = 4_000
REAL_LOGS_ENV = "JOBAWARE_HOLD_REAL"
FORMATS = {"iso": False, "old": True}  # --format of `jobaware data synth hold`: year-less dates?
START = pd.Timestamp("2025-03-03 00:00:00")
RELEASE_CODES = (12, 13, 21, 26, 34)
MAX_POLICY_RELEASES = 3
RELEASE_WAIT = 1800
RETRY_DELAY = 300
APP_FAILURE = 0.02
REMOVE_AFTER = 3 * 86400
USER_DELAY_MEDIAN, USER_DELAY_SIGMA = 6 * 3600.0, 1.2
EXECUTE_LIMIT = 20 * 3600  # the OSPool access point's limit in the real logs ("allowed execute duration of 20:00:00")
RUN_SIGMA, MEMORY_SIGMA = 0.25, 0.15
OUTAGE_RECUR, STARTD_RECUR, CPU_RECUR = 0.8, 0.3, 0.9
SUBMIT_HOST = ("<128.105.68.62:9618?addrs=128.105.68.62-9618+[2607-f388-2200-100-eaeb-d3ff-fea3-416e]-9618"
               "&alias=ap40.uw.osg-htc.org&noUDP&sock=schedd_1123918_d7cd>")
ORIGINS = ("osdf:///ospool/ap40/data", "osdf:///ospool/ap21/data", "osdf:///chtc/staging", "file:///home")
PERIODIC_RELEASE = ("The system macro SYSTEM_PERIODIC_RELEASE expression '(HoldReasonCode =?= 12 || HoldReasonCode "
                    "=?= 13 || HoldReasonCode =?= 21 || HoldReasonCode =?= 26 || HoldReasonCode =?= 34) && NumHolds "
                    f"<= {MAX_POLICY_RELEASES} && (time() - EnteredCurrentStatus) > {RELEASE_WAIT}' evaluated to TRUE")
PERIODIC_REMOVE = ("The system macro SYSTEM_PERIODIC_REMOVE expression '(JobStatus == 5) && (time() - "
                   f"EnteredCurrentStatus) > {REMOVE_AFTER}' evaluated to TRUE")
FIRST_NAMES = ("alex", "sam", "kim", "lee", "pat", "jo", "ana", "li", "max", "eva", "ian", "mia", "raj", "zoe", "tom")
LAST_NAMES = ("ross", "chen", "patel", "kim", "garcia", "smith", "nguyen", "muller", "rossi", "silva", "khan", "wu")


def outcomes_path(log: str | Path) -> Path:
    """Where the outcomes a generated log was fitted to lie: `<log>.outcomes.json`."""
    log = Path(log)
    return log.with_name(log.name + ".outcomes.json")


def truth_path(log: str | Path) -> Path:
    """Where the truth of a generated log lies: `<log>.truth.parquet`."""
    log = Path(log)
    return log.with_name(log.name + ".truth.parquet")


# ---------------------------------------------------------------- the pool's latent state
@dataclass
class Windows:
    """Disjoint time windows [start, end) in seconds since START, sorted."""

    start: np.ndarray
    end: np.ndarray

    @classmethod
    def draw(cls, rng: np.random.Generator, horizon: float, every: float, mean_length: float, cap: float) -> Windows:
        starts, ends, t = [], [], 0.0
        while True:
            t += rng.exponential(every)
            if t >= horizon:
                break
            length = min(rng.exponential(mean_length), cap)
            starts.append(t)
            ends.append(t + length)
            t += length
        return cls(np.array(starts), np.array(ends))

    def end_of(self, t: float) -> float | None:
        """The end of the window that contains t, or None."""
        i = int(np.searchsorted(self.start, t, side="right")) - 1
        return float(self.end[i]) if i >= 0 and t < self.end[i] else None


@dataclass
class Pool:
    origin_outages: list[Windows]
    episodes: Windows
    quota: dict[int, Windows]


@dataclass
class User:
    name: str
    origin: int
    mistakes: float
    rho: float


@dataclass
class Cluster:
    id: int
    user: int
    size: int
    submit: float
    request_memory: int
    need_ratio: float
    runtime: float
    missing: bool
    too_big: bool
    cpu_hog: bool
    memory_code: tuple[int, int]
    held_by_user: float | None
    fitted: tuple[int, int] | None = None  # the hold code/subcode of a FittedSimulator's held cluster


# cause: (release-probability factor of the user, user-release recurrence)
RHO_FACTOR = {"outage": 1.0, "quota": 0.8, "startd": 1.0, "missing": 0.5, "memory": 0.7, "cpu": 0.3,
              "execute": 0.4, "input_size": 0.3, "user": 1.0}


@dataclass
class Hold:
    cluster: int
    proc: int
    time: float
    index: int
    code: int
    subcode: int
    cause: str
    p_release: float


# ---------------------------------------------------------------- exact P(release)
def _lognormal_cdf(x: float, median: float, sigma: float) -> float:
    return float(ndtr((math.log(x) - math.log(median)) / sigma)) if x > 0 else 0.0


@dataclass
class Job:
    cluster: Cluster
    proc: int
    user: User
    window_end: float | None = None  # end of the outage/quota/episode that caused the chain
    user_released: bool = False
    holds: int = 0


WINDOWED = {"outage": OUTAGE_RECUR, "quota": 1.0, "startd": STARTD_RECUR}  # causes that last a time window


def recurrence(cause: str, job: Job, t: float, by_user: bool) -> float:
    """P(the cause holds the job again at its next attempt), released at time t."""
    c = job.cluster
    if cause in WINDOWED:
        return WINDOWED[cause] * (job.window_end is not None and t < job.window_end)
    if cause == "memory":
        request = c.request_memory * (2 if by_user else 1)
        return 1.0 - float(ndtr(math.log(request / (c.need_ratio * c.request_memory)) / MEMORY_SIGMA))
    if cause == "execute":
        return 1.0 - float(ndtr(math.log(EXECUTE_LIMIT / c.runtime) / RUN_SIGMA))
    return {"missing": 0.1 if by_user else 1.0, "cpu": 0.2 if by_user else CPU_RECUR, "input_size": 0.05,
            "user": 0.0}[cause]


def policy_releases(code: int, earlier_holds: int) -> bool:
    """The pool's SYSTEM_PERIODIC_RELEASE: transfer and policy codes while NumHolds <= MAX_POLICY_RELEASES."""
    return code in RELEASE_CODES and earlier_holds < MAX_POLICY_RELEASES


def release_probability(cause: str, code: int, job: Job, t_hold: float, earlier_holds: int) -> float:
    """P(the job terminates normally after this hold), exactly, by the module's rules."""
    if policy_releases(code, earlier_holds):
        t_release = t_hold + RELEASE_WAIT
        q = recurrence(cause, job, t_release, by_user=False)
        after = release_probability(cause, code, job, t_release + RETRY_DELAY, earlier_holds + 1) if q > 0 else 0.0
        return (1 - q) * (1 - APP_FAILURE) + q * after
    if job.user_released:
        return 0.0
    rho = job.user.rho * RHO_FACTOR[cause]
    acts = _lognormal_cdf(REMOVE_AFTER, USER_DELAY_MEDIAN, USER_DELAY_SIGMA)
    if cause in WINDOWED:
        until = min(REMOVE_AFTER, job.window_end - t_hold) if job.window_end is not None else 0.0
        recur_and_acts = WINDOWED[cause] * _lognormal_cdf(until, USER_DELAY_MEDIAN, USER_DELAY_SIGMA)
        return rho * (1 - APP_FAILURE) * (acts - recur_and_acts)
    return rho * acts * (1 - recurrence(cause, job, t_hold, by_user=True)) * (1 - APP_FAILURE)


# ---------------------------------------------------------------- text of the events
class Writer:
    """Formats events in HTCondor's text format and buffers them until they can be written in time order."""

    def __init__(self, year_less: bool):
        self.year_less = year_less
        self.pending: list[tuple[int, int, int, str]] = []
        self.counter = 0
        self.day_cache: dict[int, str] = {}

    def stamp(self, t: float) -> str:
        seconds = int(t)
        day, rest = divmod(seconds, 86400)
        prefix = self.day_cache.get(day)
        if prefix is None:
            date = START + pd.Timedelta(days=day)
            prefix = date.strftime("%m/%d " if self.year_less else "%Y-%m-%d ")
            self.day_cache[day] = prefix
        hh, rest = divmod(rest, 3600)
        mm, ss = divmod(rest, 60)
        return f"{prefix}{hh:02d}:{mm:02d}:{ss:02d}"

    def iso(self, t: float) -> str:
        return (START + pd.Timedelta(seconds=int(t))).strftime("%Y-%m-%dT%H:%M:%S")

    def add(self, t: float, code: int, job: Job, text: str, body: str = "") -> None:
        header = f"{code:03d} ({job.cluster.id}.{job.proc:03d}.000) {self.stamp(t)} {text}\n"
        self.counter += 1
        heapq.heappush(self.pending, (int(t), self.counter, 0, header + body + "...\n"))

    def flush(self, handle, before: float | None) -> int:
        """Write every buffered event earlier than `before` (all when None); return how many."""
        written = 0
        limit = math.inf if before is None else int(before)
        while self.pending and self.pending[0][0] < limit:
            handle.write(heapq.heappop(self.pending)[3])
            written += 1
        return written


def _duration(seconds: int) -> str:
    """A duration as HTCondor writes it in hold reasons: `HH:MM:SS`, with `D+` in front from a day on."""
    days, rest = divmod(int(seconds), 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}+{text}" if days else text


def _usage(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    days, rest = divmod(seconds, 86400)
    hh, rest = divmod(rest, 3600)
    mm, ss = divmod(rest, 60)
    return f"{days} {hh:02d}:{mm:02d}:{ss:02d}"


ENDED, HELD, INTERRUPTED = "ended", "held", "interrupted"


class Simulator:
    """One job's life at a time; scalar draws from a seeded `random.Random` (fast), vectors from NumPy."""

    def __init__(self, seed: int, pool: Pool, users: list[User], writer: Writer, horizon: float):
        self.r = random.Random(seed)
        self.pool, self.users, self.w, self.horizon = pool, users, writer, horizon
        self.holds: list[Hold] = []

    def host(self) -> tuple[str, str]:
        node = self.r.randrange(1, 4000)
        ip = f"10.{node // 250}.{node % 250}.{self.r.randrange(2, 250)}"
        port = self.r.randrange(30000, 60000)
        name = f"node{node:04d}.pool.example.edu"
        return name, f"<{ip}:{port}?addrs={ip}-{port}&alias={name}&noUDP&sock=startd_{port * 7 % 99991}_{node:04x}>"

    def job(self, cluster: Cluster, proc: int) -> None:
        r, w = self.r, self.w
        job = Job(cluster, proc, self.users[cluster.user])
        t = cluster.submit
        w.add(t, 0, job, f"Job submitted from host: {SUBMIT_HOST}")
        w.add(t, 28, job, "Job ad information event triggered.",
              f'Proc = {proc}\nEventTime = "{w.iso(t)}"\nTriggerEventTypeName = "ULOG_SUBMIT"\n'
              f'Owner = "{job.user.name}"\nRequestMemory = {cluster.request_memory}\nRequestCpus = 1\n'
              f'Cluster = {cluster.id}\nSubproc = 0\nEventTypeNumber = 28\nTriggerEventTypeNumber = 0\n')
        if cluster.too_big:
            self.chain(job, t + 1, "input_size", 32, 0,
                       f"TransferInputSizeMB ({r.randrange(5001, 9000)}) is greater than MAX_TRANSFER_INPUT_MB "
                       f"(5000) at submit time")
            return
        until = t + cluster.held_by_user if cluster.held_by_user is not None else None
        if self.run(job, t, until=until, in_chain=False) == INTERRUPTED:
            self.chain(job, until, "user", 1, 0, f"via condor_hold (by user {job.user.name})")

    def run(self, job: Job, t: float, until: float | None, in_chain: bool) -> str:
        """Attempts until the job terminates (ENDED), a hold starts a chain (HELD) or `until` comes (INTERRUPTED).

        In a chain (`in_chain`) the release already decided that the cause does not come back."""
        r, w, c = self.r, self.w, job.cluster
        first_attempt = True
        while True:
            t += r.expovariate(1 / (600 * math.sqrt(c.request_memory / 2048))) + 5
            if until is not None and t >= until:
                return INTERRUPTED
            name, address = self.host()
            w.add(t, 40, job, "Started transferring input files", f"\tTransferring to host: {address}\n")
            if not in_chain and self.transfer_hold(job, t, first_attempt, "input"):
                return HELD
            first_attempt = False
            t += r.lognormvariate(math.log(40), 0.8) + 1
            w.add(t, 40, job, "Finished transferring input files")
            w.add(t, 1, job, f"Job executing on host: {address}",
                  f"\tSlotName: slot1_{r.randrange(1, 64)}@{name}\n"
                  f'\tCondorScratchDir = "/var/lib/condor/execute/dir_{r.randrange(1000, 99999)}"\n'
                  f"\tCpus = 1\n\tDisk = 1048576\n\tMemory = {c.request_memory}\n")
            start = t
            duration = c.runtime * r.lognormvariate(0, RUN_SIGMA)
            need = c.need_ratio * c.request_memory * r.lognormvariate(0, MEMORY_SIGMA)
            trigger = None if in_chain else self.run_hold(job, start, duration, need)
            end = start + duration
            stop = min(end, trigger[0]) if trigger else end
            if until is not None:
                stop = min(stop, until)
            evict_at = start + r.expovariate(1 / (30 * 3600))
            running_until = min(stop, evict_at)
            self.image_sizes(job, start, running_until, need, growing=trigger is not None and trigger[1] == "memory")
            if r.random() < 0.05 and start + 400 < running_until:
                lost = start + r.uniform(30, running_until - start - 330)
                w.add(lost, 22, job, "Job disconnected, attempting to reconnect",
                      f"    Socket between submit and execute hosts closed unexpectedly\n"
                      f"    Trying to reconnect to slot1_1@{name} {address}\n")
                w.add(lost + r.uniform(5, 300), 23, job, f"Job reconnected to slot1_1@{name}",
                      f"    startd address: {address}\n    starter address: {address}\n")
            if evict_at < stop:
                code, words = (1005, "Unspecified job interruption") if r.random() < 0.6 else (1013, "Job was preempted")
                w.add(evict_at, 4, job, f"Job was evicted. Code {code} Subcode 0",
                      f"\t(0) CPU times\n\t\tUsr {_usage((evict_at - start) * 0.9)}, Sys 0 00:00:{r.randrange(60):02d}"
                      f"  -  Run Remote Usage\n\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
                      f"\t0  -  Run Bytes Sent By Job\n\t{r.randrange(10**6, 10**9)}  -  Run Bytes Received By Job\n"
                      f"\tReason: {words}\n")
                t = evict_at
                continue
            if until is not None and until <= stop:
                return INTERRUPTED
            if trigger:
                self.chain(job, *trigger)
                return HELD
            w.add(end, 40, job, "Started transferring output files")
            if not in_chain and self.transfer_hold(job, end, False, "output"):
                return HELD
            t = end + r.lognormvariate(math.log(5), 0.7)
            w.add(t, 40, job, "Finished transferring output files")
            self.terminate(job, start, t, need)
            return ENDED

    def transfer_hold(self, job: Job, t: float, first: bool, direction: str) -> bool:
        """A transfer hold at time t (missing input, outage, quota): start its chain and say so."""
        r, c, origin = self.r, job.cluster, job.user.origin
        outages = self.pool.origin_outages
        outage_end = outages[origin].end_of(t) if origin < len(outages) else None
        url = f"{ORIGINS[origin]}/{job.user.name}/{'input.tar.gz' if direction == 'input' else 'results'}"
        if direction == "input" and first and c.missing:
            subcode = 2 if r.random() < 0.6 else 256
            reason = (f"Transfer input files failure at access point ap40 while sending files to execution point "
                      f"slot1_1@node. Details: reading from file /home/{job.user.name}/inputs/{c.id}.dat: (errno 2) "
                      f"No such file or directory") if subcode == 2 else \
                (f"Transfer input files failure at execution point slot1_1@node using protocol osdf. Details: "
                 f"failed to get namespace information for remote URL {url}: 404: No sources found ( URL file = {url} )|")
            self.chain(job, t + r.uniform(1, 30), "missing", 13, subcode, reason)
            return True
        if outage_end is not None and r.random() < OUTAGE_RECUR:
            job.window_end = outage_end
            kind = "input" if direction == "input" else "output"
            subcode, detail = (256, "Pelican Client Error: transfer error: Unable to read; timer expired") \
                if r.random() < 0.65 else (62, "file transfer plugin timed out")
            self.chain(job, t + r.uniform(30, 180), "outage", 13 if direction == "input" else 12, subcode,
                       f"Transfer {kind} files failure at execution point slot1_1@node using protocol osdf. "
                       f"Details: {detail} ( URL file = {url} )|")
            return True
        quota = self.pool.quota.get(c.user)
        quota_end = quota.end_of(t) if quota is not None and direction == "output" else None
        if quota_end is not None:
            job.window_end = quota_end
            self.chain(job, t + r.uniform(1, 20), "quota", 12, 122,
                       f"Transfer output files failure at access point ap40 while receiving files from execution "
                       f"point slot1_1@node. Details: writing to file /home/{job.user.name}/out/{c.id}.{job.proc}: "
                       f"(errno 122) Disk quota exceeded")
            return True
        return False

    def run_hold(self, job: Job, start: float, duration: float, need: float):
        """The first policy or node hold of a run, if any: (time, cause, code, subcode, reason)."""
        r, c = self.r, job.cluster
        found = []
        episode_end = self.pool.episodes.end_of(start)
        if episode_end is not None and r.random() < STARTD_RECUR:
            found.append((start + r.uniform(5, 60), "startd", 21, 0,
                          "Error from slot1_1@node: the execute node refused the job (WANT_HOLD): container runtime "
                          "test failed"))
        if c.cpu_hog:
            found.append((start + r.uniform(300, 1800), "cpu", 26, 102,
                          "Excessive CPU usage. Please verify that the code is configured to use a limited number of "
                          "cpus/threads, and matches request_cpus."))
        if need > c.request_memory:
            code, subcode = c.memory_code
            reason = "Memory usage exceeded request_memory" if code == 26 else \
                (f"Job has gone over cgroup memory limit of {c.request_memory} megabytes. Peak usage: {int(need)} "
                 f"megabytes. Consider resubmitting with a higher request_memory.")
            found.append((start + duration * r.uniform(0.2, 0.9), "memory", code, subcode, reason))
        if duration > EXECUTE_LIMIT:
            found.append((start + EXECUTE_LIMIT, "execute", 47, 0,
                          f"The job exceeded allowed execute duration of {_duration(EXECUTE_LIMIT)}"))
        if not found:
            return None
        first = min(found)
        if first[1] == "startd":
            job.window_end = episode_end
        return first

    def image_sizes(self, job: Job, start: float, stop: float, need: float, growing: bool) -> None:
        r, w = self.r, self.w
        t = start + r.uniform(5, 60)
        steps = 6 if growing else r.randrange(1, 3)
        for k in range(steps):
            if t >= stop:
                return
            memory = max(int(need * (k + 1) / steps), 1)
            w.add(t, 6, job, f"Image size of job updated: {memory * 1100}",
                  f"\t{memory}  -  MemoryUsage of job (MB)\n\t{memory * 1024}  -  ResidentSetSize of job (KB)\n")
            t += (stop - start) / (steps + 1) * r.uniform(0.5, 1.5)

    def terminate(self, job: Job, start: float, t: float, need: float) -> None:
        r, c = self.r, job.cluster
        used = _usage((t - start) * r.uniform(0.5, 0.95))
        if r.random() < APP_FAILURE:
            status = f"\t(0) Abnormal termination (signal {r.choice((9, 11, 6))})\n\t(0) No core file\n"
        else:
            status = f"\t(1) Normal termination (return value {1 if r.random() < 0.03 else 0})\n"
        sent, received = r.randrange(10**3, 10**8), r.randrange(10**5, 10**9)
        self.w.add(t, 5, job, "Job terminated.",
                   f"{status}\t\tUsr {used}, Sys 0 00:00:{r.randrange(60):02d}  -  Run Remote Usage\n"
                   f"\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
                   f"\t\tUsr {used}, Sys 0 00:00:{r.randrange(60):02d}  -  Total Remote Usage\n"
                   f"\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage\n"
                   f"\t{sent}  -  Run Bytes Sent By Job\n\t{received}  -  Run Bytes Received By Job\n"
                   f"\t{sent}  -  Total Bytes Sent By Job\n\t{received}  -  Total Bytes Received By Job\n"
                   f"\tPartitionable Resources :    Usage  Request Allocated\n"
                   f"\t   Cpus                 :     {r.uniform(0.2, 1.0):.2f}         1         1 \n"
                   f"\t   Disk (KB)            : {r.randrange(10**3, 10**6):8d}   1048576   1048576 \n"
                   f"\t   Memory (MB)          : {int(need):8d} {c.request_memory:9d} {c.request_memory:9d} \n")

    def chain(self, job: Job, t: float, cause: str, code: int, subcode: int, reason: str) -> None:
        """A hold and what follows: releases and re-holds until the job ends, is removed, or the log ends."""
        r, w = self.r, self.w
        while t < self.horizon:
            earlier = job.holds
            p = release_probability(cause, code, job, t, earlier)
            self.holds.append(Hold(job.cluster.id, job.proc, t, earlier, code, subcode, cause, p))
            job.holds += 1
            w.add(t, 12, job, "Job was held.", f"\t{reason}\n\tCode {code} Subcode {subcode}\n")
            if policy_releases(code, earlier):
                t_release = t + RELEASE_WAIT
                w.add(t_release, 13, job, "Job was released.", f"\t{PERIODIC_RELEASE}\n")
                recur = r.random() < recurrence(cause, job, t_release, by_user=False)
            else:
                delay = r.lognormvariate(math.log(USER_DELAY_MEDIAN), USER_DELAY_SIGMA)
                if delay >= REMOVE_AFTER:
                    self.remove(job, t + REMOVE_AFTER, by_user=False)
                    return
                t_release = t + delay
                if job.user_released or r.random() >= job.user.rho * RHO_FACTOR[cause]:
                    self.remove(job, t_release, by_user=True)
                    return
                w.add(t_release, 13, job, "Job was released.", f"\tvia condor_release (by user {job.user.name})\n")
                job.user_released = True
                if cause in WINDOWED:
                    recur = job.window_end is not None and t_release < job.window_end and r.random() < WINDOWED[cause]
                else:
                    recur = r.random() < recurrence(cause, job, t, by_user=True)
            if not recur:
                self.run(job, t_release, until=None, in_chain=True)
                return
            t = self.again(job, cause, code, t_release + RETRY_DELAY)

    def again(self, job: Job, cause: str, code: int, t: float) -> float:
        """The events of an attempt that the chain's cause holds again, starting at t; the time of that hold."""
        w, c = self.w, job.cluster
        name, address = self.host()
        if cause == "input_size":
            return t
        if code == 12:
            w.add(t - 1, 40, job, "Started transferring output files")
            return t
        w.add(t - 2, 40, job, "Started transferring input files", f"\tTransferring to host: {address}\n")
        if code == 13:
            return t
        w.add(t - 1, 40, job, "Finished transferring input files")
        w.add(t - 1, 1, job, f"Job executing on host: {address}",
              f"\tSlotName: slot1_1@{name}\n\tCpus = 1\n\tDisk = 1048576\n\tMemory = {c.request_memory}\n")
        if cause == "startd":
            return t
        delay = {"cpu": self.r.uniform(300, 1800), "memory": c.runtime * self.r.uniform(0.2, 0.9),
                 "execute": EXECUTE_LIMIT}[cause]
        if cause == "memory":
            self.image_sizes(job, t, t + delay, c.need_ratio * c.request_memory * 1.1, growing=True)
        return t + delay

    def remove(self, job: Job, t: float, by_user: bool) -> None:
        reason = f"via condor_rm (by user {job.user.name})" if by_user else PERIODIC_REMOVE
        self.w.add(t, 9, job, "Job was aborted.", f"\t{reason}\n")


# ---------------------------------------------------------------- holds fitted to real logs
CLUSTER_HOLD, PROC_HOLD = 0.3, 0.6  # not fitted: the generated pool holds often, so a small log has many holds
REASONS = {  # the hold reason a fitted hold writes (text is not a feature; it keeps the log readable)
    1: "via condor_hold (by user {user})",
    3: "The job attribute PeriodicHold expression 'NumJobStarts >= 1 && JobStatus == 1' evaluated to TRUE",
    6: "Error from slot1_1@{node}: Failed to execute '/var/lib/condor/execute/dir_1/condor_exec.exe': (errno=13: "
       "'Permission denied')",
    12: "Transfer output files failure at execution point slot1_1@{node}: (errno 2) No such file or directory",
    13: "Transfer input files failure at execution point slot1_1@{node}: (errno 2) No such file or directory",
    21: "Error from slot1_1@{node}: Policy violation. Memory limit exceeded",
    26: "Memory usage exceeded request_memory",
    32: "TransferInputSizeMB (5072) is greater than MAX_TRANSFER_INPUT_MB (5000) at submit time",
    34: "Error from slot1_1@{node}: Job has gone over cgroup memory limit",
    47: f"The job exceeded allowed execute duration of {_duration(EXECUTE_LIMIT)}",
}


class FittedSimulator(Simulator):
    """The same pool and jobs, with holds drawn from outcomes fitted to real logs (jobaware.hold.outcomes).

    A cluster is held with probability CLUSTER_HOLD, with one code/subcode drawn from the fitted mix of first
    holds (a workflow repeats its cause), and each of its procs with probability PROC_HOLD; the hold comes where
    its code says (32 at submit, 13 at input transfer, 6 at the start, 12 at output transfer, others while
    running). After each hold the job is released, removed or left held by the code's fitted shares; a release
    comes after the fitted log-normal hours; a released job is held again (same code) with the fitted chance,
    else ends normally with the fitted chance (then it runs to its end), else is removed. The truth is the
    code's P(release | the hold ends) (jobaware.hold.outcomes.release_chance, with APP_FAILURE)."""

    def __init__(self, seed: int, pool: Pool, users: list[User], writer: Writer, horizon: float, outcomes):
        super().__init__(seed, pool, users, writer, horizon)
        self.outcomes = outcomes

    def job(self, cluster: Cluster, proc: int) -> None:
        job = Job(cluster, proc, self.users[cluster.user])
        t = cluster.submit
        self.w.add(t, 0, job, f"Job submitted from host: {SUBMIT_HOST}")
        self.w.add(t, 28, job, "Job ad information event triggered.",
                   f'Proc = {proc}\nEventTime = "{self.w.iso(t)}"\nTriggerEventTypeName = "ULOG_SUBMIT"\n'
                   f'Owner = "{job.user.name}"\nRequestMemory = {cluster.request_memory}\nRequestCpus = 1\n'
                   f'Cluster = {cluster.id}\nSubproc = 0\nEventTypeNumber = 28\nTriggerEventTypeNumber = 0\n')
        if cluster.fitted is None or self.r.random() >= PROC_HOLD:
            self.run(job, t, until=None, in_chain=True)
            return
        code, subcode = cluster.fitted
        self.fitted_chain(job, self.attempt(job, t, code), code, subcode)

    def attempt(self, job: Job, t: float, code: int) -> float:
        """The events of one attempt up to the hold its code says, from t; the time of the hold."""
        r, w, c = self.r, self.w, job.cluster
        t += r.expovariate(1 / 600) + 5
        if code in (1, 32):
            return t
        name, address = self.host()
        w.add(t, 40, job, "Started transferring input files", f"\tTransferring to host: {address}\n")
        if code == 13:
            return t + r.uniform(1, 60)
        t += r.lognormvariate(math.log(40), 0.8) + 1
        w.add(t, 40, job, "Finished transferring input files")
        w.add(t, 1, job, f"Job executing on host: {address}",
              f"\tSlotName: slot1_1@{name}\n\tCpus = 1\n\tDisk = 1048576\n\tMemory = {c.request_memory}\n")
        if code == 6:
            return t + r.uniform(1, 10)
        duration = min(c.runtime * r.lognormvariate(0, RUN_SIGMA), EXECUTE_LIMIT)
        at = t + (duration if code in (12, 47) else duration * r.uniform(0.1, 0.9))
        self.image_sizes(job, t, at, c.need_ratio * c.request_memory, growing=code in (21, 26, 34))
        if code == 12:
            w.add(at, 40, job, "Started transferring output files")
        return at + 1

    def fitted_chain(self, job: Job, t: float, code: int, subcode: int) -> None:
        r, w = self.r, self.w
        fitted = self.outcomes.lookup(code, subcode)
        p = float(release_chance(fitted.released, fitted.held, fitted.reheld, fitted.ends_normally * (1 - APP_FAILURE)))
        reason = REASONS.get(code, "Error from slot1_1@{node}: the job was held").format(
            user=job.user.name, node=self.host()[0])
        while t < self.horizon:
            self.holds.append(Hold(job.cluster.id, job.proc, t, job.holds, code, subcode, "fitted", p))
            job.holds += 1
            w.add(t, 12, job, "Job was held.", f"\t{reason}\n\tCode {code} Subcode {subcode}\n")
            draw = r.random()
            if draw >= fitted.released + fitted.removed:
                return  # still held when the log ends
            if draw >= fitted.released:
                self.remove(job, t + 3600 * r.lognormvariate(fitted.removal_log_hours, fitted.removal_log_sigma),
                            by_user=True)
                return
            t = t + 3600 * r.lognormvariate(fitted.release_log_hours, fitted.release_log_sigma)
            text = PERIODIC_RELEASE if code in RELEASE_CODES else f"via condor_release (by user {job.user.name})"
            w.add(t, 13, job, "Job was released.", f"\t{text}\n")
            if r.random() < fitted.reheld:
                t = self.attempt(job, t, code)
                continue
            if r.random() < fitted.ends_normally:
                self.run(job, t, until=None, in_chain=True)
            else:
                self.remove(job, t + 3600 * r.lognormvariate(fitted.removal_log_hours, fitted.removal_log_sigma),
                            by_user=True)
            return


# ---------------------------------------------------------------- the whole log
def _population(rng: np.random.Generator, n_jobs: int, horizon: float) -> tuple[list[User], list[Cluster], Pool]:
    n_users = int(np.clip(round(math.sqrt(n_jobs) / 2), 3, 600))
    users = []
    taken = set()
    for i in range(n_users):
        name = f"{rng.choice(FIRST_NAMES)}.{rng.choice(LAST_NAMES)}"
        while name in taken:
            name = f"{name.split('.')[0]}.{rng.choice(LAST_NAMES)}{i}"
        taken.add(name)
        users.append(User(name, int(rng.choice(len(ORIGINS), p=[0.4, 0.25, 0.2, 0.15])),
                          float(rng.beta(1.0, 25.0)), float(rng.beta(4.0, 2.0))))
    weights = rng.pareto(1.2, n_users) + 0.2
    weights /= weights.sum()
    clusters = []
    cluster_id = 12_000_000
    submitted = 0
    t = 0.0
    mean_size = 8.0
    gap = horizon / max(n_jobs / mean_size, 1)
    while submitted < n_jobs:
        t += rng.exponential(gap)
        owner = int(rng.choice(n_users, p=weights))
        user = users[owner]
        size = int(min(max(1, round(rng.lognormal(math.log(4), 1.2))), 2000, n_jobs - submitted))
        memory = int(rng.choice([1024, 2048, 4096, 8192, 16384], p=[0.25, 0.3, 0.25, 0.15, 0.05]))
        clusters.append(Cluster(
            id=cluster_id, user=owner, size=size, submit=min(t, horizon * 0.98), request_memory=memory,
            need_ratio=float(rng.lognormal(math.log(0.55) + 2.0 * user.mistakes, 0.3)),
            runtime=float(rng.lognormal(math.log(2 * 3600), 1.0)),
            missing=bool(rng.random() < user.mistakes * 0.5),
            too_big=bool(rng.random() < 0.004 + user.mistakes * 0.1),
            cpu_hog=bool(rng.random() < 0.01 + user.mistakes * 0.2),
            memory_code=(26, 103) if rng.random() < 0.5 else (34, 102),
            held_by_user=float(rng.uniform(60, 3 * 3600)) if rng.random() < 0.01 else None,
        ))
        cluster_id += 1
        submitted += size
    outages = [Windows.draw(rng, horizon, 3 * 86400, 2 * 3600, 24 * 3600) for _ in ORIGINS[:-1]]
    episodes = Windows.draw(rng, horizon, 86400, 2 * 3600, 12 * 3600)
    quota = {i: Windows.draw(rng, horizon, 20 * 86400, 12 * 3600, 2 * 86400)
             for i in range(n_users) if rng.random() < 0.1}
    return users, clusters, Pool(outages, episodes, quota)


def write(out: str | Path, n_jobs: int, seed: int = 0, *, year_less: bool = False,
          progress: Callable[[int], None] | None = None, outcomes: Outcomes | None = None) -> Path:
    """Write a global event log of `n_jobs` jobs to `out` and its truth beside it; return the truth file.

    The truth (one row per hold): cluster, proc, hold_time, hold_index (earlier holds of the job), code,
    subcode, cause, p_release. `year_less` writes the old `MM/DD HH:MM:SS` dates. With `outcomes` the holds are
    drawn from them (FittedSimulator), and the outcomes are written beside the log too (`outcomes_path`)."""
    if not isinstance(n_jobs, int) or not MIN_JOBS <= n_jobs <= MAX_JOBS:
        raise InputError(f"jobs: expected a whole number in [{MIN_JOBS}, {MAX_JOBS}], got {n_jobs!r}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    horizon = max(n_jobs / JOBS_PER_DAY, 1.0) * 86400
    users, clusters, pool = _population(rng, n_jobs, horizon)
    writer = Writer(year_less)
    if outcomes is None:
        simulator = Simulator(int(rng.integers(2**63)), pool, users, writer, horizon)
    else:
        _draw_fitted_holds(rng, clusters, outcomes)
        simulator = FittedSimulator(int(rng.integers(2**63)), pool, users, writer, horizon, outcomes)
        outcomes_path(out).write_text(json.dumps(outcomes.as_dict(), indent=1))
    done = 0
    with open(out, "w", encoding="utf-8", newline="\n") as handle:
        for cluster in clusters:
            writer.flush(handle, before=cluster.submit)
            for proc in range(cluster.size):
                simulator.job(cluster, proc)
            done += cluster.size
            if progress:
                progress(cluster.size)
        _drop_after(writer, horizon)
        writer.flush(handle, before=None)
    truth = pd.DataFrame([h.__dict__ for h in simulator.holds],
                         columns=["cluster", "proc", "time", "index", "code", "subcode", "cause", "p_release"])
    truth = truth[truth["time"] < horizon].rename(columns={"time": "hold_time", "index": "hold_index"})
    truth["hold_time"] = (START + pd.to_timedelta(truth["hold_time"].astype(int), unit="s")).astype("datetime64[ms]")
    truth = truth.sort_values(["hold_time", "cluster", "proc"], kind="stable").reset_index(drop=True)
    path = truth_path(out)
    truth.to_parquet(path, index=False)
    return path


def _draw_fitted_holds(rng: np.random.Generator, clusters: list[Cluster], outcomes: Outcomes) -> None:
    """Which clusters a FittedSimulator holds, and with which code/subcode (from the fitted mix)."""
    keys = list(outcomes.mix) or ["0/0"]
    shares = np.array([outcomes.mix.get(k, 1.0) for k in keys], float)
    picks = rng.choice(len(keys), size=len(clusters), p=shares / shares.sum())
    held = rng.random(len(clusters)) < CLUSTER_HOLD
    for cluster, pick, hold in zip(clusters, picks, held):
        if hold:
            code, subcode = keys[pick].split("/")
            cluster.fitted = (int(code), max(int(subcode), 0))


def _drop_after(writer: Writer, horizon: float) -> None:
    """The log ends at the horizon: events after it were never written."""
    writer.pending = [item for item in writer.pending if item[0] < horizon]
    heapq.heapify(writer.pending)


def write_synthetic(out: Path, n: int, seed: int = 0, fmt: str | None = None, progress=None) -> Path:
    """`jobaware data synth hold`: a global event log (`fmt` iso, the default, or old year-less dates);
    returns the truth file beside it."""
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return write(out, n, seed, year_less=FORMATS[fmt or "iso"], progress=progress)


def real_logs() -> list[str]:
    """The real logs `make run` trains and evaluates on: $JOBAWARE_HOLD_REAL (paths, globs or folders, separated
    by the path separator), else the repository's jobaware/data/real/condor (the OSPool logs; HTCondor's own test logs are
    not real jobs) and jobaware/data/real/condor-more (none where neither is there, e.g. an image without them)."""
    if os.environ.get(REAL_LOGS_ENV):
        return [s for s in os.environ[REAL_LOGS_ENV].split(os.pathsep) if s]
    real = bundled("data", "real")
    found = [*sorted((real / "condor").glob("mldag_*.log")), real / "condor" / "mldag_standalone", real / "condor-more"]
    return [str(p) for p in found if p.exists()]


def default_data(data_dir: Path, progress=None) -> str:
    """The embedded default of `make run`: the real logs (`real_logs`) and a generated global log of
    DEFAULT_SYNTH_JOBS jobs whose holds follow outcomes fitted on those real logs (written once under `data_dir`,
    again when the fit changes); its truth and outcomes lie beside it."""
    from jobaware import sources
    from jobaware.hold.groups import real_outcomes

    real = real_logs()
    outcomes = real_outcomes(real) if real else None
    path = Path(data_dir) / f"{'fitted' if outcomes else 'synthetic'}_hold_{DEFAULT_SYNTH_JOBS}.log"
    fitted = json.dumps(outcomes.as_dict(), indent=1) if outcomes else None
    if not (path.exists() and truth_path(path).exists()) or (
            fitted and (not outcomes_path(path).exists() or outcomes_path(path).read_text() != fitted)):
        write(path, DEFAULT_SYNTH_JOBS, 0, progress=progress, outcomes=outcomes)
    return sources.encode([*real, str(path)])
