"""Keep a live Slurm cluster's jobs in the job store: each job once, its state changes, batch script and final state,
and, while it is pending, its place in the queue (`queue_place`: Slurm's reason, its priority, its eligible time),
with the eligible time accounting keeps once the job has left the queue (`accounted_eligible`).

Each interval: one `squeue --json --states=all` (pending, running and recently finished jobs), two `sacct` calls
(`--json`, and the parsable exit codes with each job's use and its steps' memory) over a bounded window that starts at the checkpoint kept in the store, and at most
`max_calls` `scontrol` calls (`write batch_script` once per job, `show job -o` for a job squeue no longer lists).
Every call has a timeout; a failed call is logged and tried again next interval, so the scheduler never waits on
the collector. Every store write is idempotent and the checkpoint moves only after what it covers is stored, so a
collector killed at any moment and started again loses nothing and duplicates nothing.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from jobaware import metrics
from jobaware.adapters.slurm.usage import USAGE_FIELDS, sacct_usage
from jobaware.failure.reader.slurm import (
    SACCT_ENDS,
    FieldError,
    SacctEnd,
    end_state,
    exit_status,
    from_squeue,
    memory_killed,
    sacct_as_squeue,
    sacct_ends,
)
from jobaware.jobtable.schema import normalize_state
from jobaware.store import JobKey, JobStore

log = logging.getLogger(__name__)

ACTIVE = frozenset({"PENDING", "RUNNING", "SUSPENDED", "REQUEUED", "RESIZING", "CONFIGURING", "COMPLETING",
                    "STAGE_OUT", "SIGNALING", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED"})
FIRST_WINDOW = 86_400     # seconds of accounting a store's first sacct call looks back over
MAX_WINDOW = 86_400       # seconds of accounting one sacct call covers at most (a long outage catches up a day a call)
OVERLAP = 300             # seconds each sacct window re-reads before the checkpoint (late accounting records)
SCRIPT_TRIES = 3          # `scontrol write batch_script` attempts per job before the collector stops asking
NOTICE_TRIES = 3          # squeue attempts for a batch of notices before it is acknowledged (a poll finds the jobs)
EPOCH_MAX = 4_102_444_800  # 2100-01-01: a later squeue time is garbled
ERROR_TAIL = 65_536       # bytes read from the end of a job killed by signal 9's error file, for Slurm's memory words
COMMANDS = ("squeue", "sacct", "scontrol")  # the Slurm commands counted by name (any other: `other`)


def is_final(state: str | None) -> bool:
    return bool(state) and state not in ACTIVE


class Slurm:
    """The scheduler's commands, each with a timeout; a failure is logged and answers None. With `series` (the
    collector's), each command and each failure is counted by command."""

    def __init__(self, env: dict | None = None, timeout: float = 30.0, series: metrics.Group | None = None):
        self.env, self.timeout, self.series = env, timeout, series
        self.calls = 0
        self.error: str | None = None  # why the last command failed, in one line (None: it did not)

    def run(self, *command: str) -> str | None:
        self.calls += 1
        self.error = None
        self._count(command[0], "collector_slurm_commands")
        try:
            result = subprocess.run(list(command), capture_output=True, text=True, env=self.env, timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("%s: could not run (%s)", " ".join(command[:3]), exc)
            self.error = f"{command[0]}: could not run ({exc})"
            self._count(command[0], "collector_slurm_command_failures")
            return None
        if result.returncode != 0:
            log.warning("%s failed: %s", " ".join(command[:3]), result.stderr.strip()[:300] or result.returncode)
            lines = result.stderr.strip().splitlines()
            self.error = lines[-1][:200] if lines else f"{command[0]} exited with {result.returncode}"
            self._count(command[0], "collector_slurm_command_failures")
            return None
        return result.stdout

    def _count(self, command: str, name: str) -> None:
        if self.series is not None:
            getattr(self.series, name).labels(command=metrics.one_of(command, COMMANDS)).inc()

    def jobs(self, *command: str) -> list[dict] | None:
        """The `jobs` list of a `--json` command's output, or None."""
        output = self.run(*command)
        if output is None:
            return None
        try:
            jobs = json.loads(output)["jobs"]
        except (json.JSONDecodeError, KeyError, TypeError):
            log.warning("%s: output is not Slurm --json output", " ".join(command[:2]))
            self.error = "output is not Slurm --json output"
            self._count(command[0], "collector_slurm_command_failures")
            return None
        return [job for job in jobs if isinstance(job, dict)] if isinstance(jobs, list) else None


    def default_partition(self) -> str | None:
        """The partition a job that names none goes to (slurm.conf's `Default=YES`), from `scontrol -o show
        partition`; None when no partition is marked default or scontrol failed."""
        output = self.run("scontrol", "-o", "show", "partition")
        for line in (output or "").splitlines():
            fields = dict(field.split("=", 1) for field in line.split() if "=" in field)
            if fields.get("Default") == "YES" and fields.get("PartitionName"):
                return fields["PartitionName"]
        return None


def state_of(record: dict) -> str | None:
    """The state of an squeue --json record (Slurm 22.05 gives a string, later releases a list)."""
    state = record.get("job_state")
    return state[0] if isinstance(state, list) and state else state


def queue_place(record: dict) -> dict:
    """What squeue says of a pending job's place in the queue, kept in its row beside the canonical columns:
    `reason` (Slurm's state reason: Priority, Resources, JobHeldUser, BeginTime, ...), `priority`, and
    `eligible_time` (as the row keeps times: the local wall clock). Only a pending record gives them ({} for any
    other), so a job's row keeps its last pending observation once it runs: with the submit and start times, the
    queue at any moment can be rebuilt from the store. A field squeue leaves unset (or garbled) is None."""
    if state_of(record) != "PENDING":
        return {}
    reason, priority = record.get("state_reason"), _plain_int(record.get("priority"))
    return {"reason": reason if isinstance(reason, str) and 0 < len(reason) <= 64 and reason != "None" else None,
            "priority": priority if priority is not None and 0 <= priority < 1 << 32 else None,
            "eligible_time": wall_clock(record.get("eligible_time"))}


def accounted_eligible(job: dict) -> dict:
    """When accounting says an `sacct --json` job became eligible to start (`time.eligible`: its submit, or the moment
    its begin time passed, its dependency was met or its hold was released), as `queue_place` keeps squeue's:
    {"eligible_time": the local wall clock}. {} where accounting does not know (0, sacct's `Unknown`: a job cancelled
    while a dependency or a hold kept it out) or the time is garbled.

    Accounting's time wins over squeue's once the job has left the queue: both are Slurm's one eligible time, but
    squeue shows it only while the collector sees the job pending (0 while a dependency or a hold keeps it out), so a
    job that became eligible and started between two polls, or that only accounting saw, has it from accounting
    alone. While the job pends, squeue's live value stands (accounting may lag behind a changed begin time)."""
    times = job.get("time")
    eligible = wall_clock(times.get("eligible")) if isinstance(times, dict) else None
    return {} if eligible is None else {"eligible_time": eligible}


def wall_clock(value) -> int | None:
    """A Slurm time (epoch seconds, plain or wrapped) as the row keeps times: the local wall clock; None for Slurm's
    unset 0 or a garbled time."""
    seconds = _plain_int(value)
    return seconds + time.localtime(seconds).tm_gmtoff if seconds is not None and 0 < seconds <= EPOCH_MAX else None


def _plain_int(value) -> int | None:
    """An integer of squeue --json: plain (22.05) or {"set", "infinite", "number"} (later releases); else None."""
    if isinstance(value, dict):
        value = value.get("number") if value.get("set", True) and not value.get("infinite") else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def said_memory(path, owner) -> bool:
    """Whether the job's error file ends with Slurm's words for a memory kill. The path is the job owner's to choose,
    and the collector may run as root: only a regular file that the job's owner (`owner`, a uid) owns is read, never
    through a final symbolic link, never blocking (a FIFO or a device is not read), at most its last ERROR_TAIL
    bytes."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path or not _is_uid(owner):
        return False
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(descriptor, "rb") as handle:
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode) or found.st_uid != owner:
            return False
        try:
            handle.seek(max(0, found.st_size - ERROR_TAIL))
            return memory_killed(handle.read(ERROR_TAIL).decode(errors="replace"))
        except OSError:
            return False


def _is_uid(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32


def scontrol_uid(user_id: str | None) -> int | None:
    """The uid of `scontrol show job`'s `UserId=name(uid)`."""
    found = re.fullmatch(r"[^()]{0,256}\(([0-9]{1,10})\)", user_id or "")
    return int(found.group(1)) if found else None


@dataclass
class PollResult:
    seen: int = 0          # jobs the scheduler listed
    new: int = 0           # jobs stored for the first time
    finished: int = 0      # final states stored (new or stronger)
    scripts: int = 0       # batch scripts stored
    calls: int = 0         # scheduler commands run
    failed: list[str] = field(default_factory=list)  # what could not be read this interval (tried again next)


class Collector:
    """Polls Slurm into the store; `series` (`metrics.COLLECTOR`, in a registry of its own unless given) counts what
    each poll did."""

    def __init__(self, store: JobStore, cluster: str, slurm: Slurm | None = None, max_calls: int = 20,
                 clock: Callable[[], float] = time.time, series: metrics.Group | None = None):
        if max_calls < 0:
            raise ValueError(f"max_calls: expected a number of calls >= 0, got {max_calls}")
        self.store, self.cluster, self.slurm = store, cluster, slurm or Slurm()
        self.series = series or metrics.Group(metrics.COLLECTOR, CollectorRegistry())
        self.max_calls, self.clock = max_calls, clock
        self.budget = max_calls
        self.accounting: bool | None = None  # unknown until the first sacct call
        self.script_tries: dict[JobKey, int] = {}
        self.gone: set[JobKey] = set()       # neither squeue nor scontrol knows them, and no accounting
        self.notice_failures = 0

    # ------------------------------------------------------------------ one interval
    def poll(self) -> PollResult:
        """One interval's calls: squeue, sacct, then scontrol within the budget (the store's changes as one batch)."""
        with self.store.batch():
            return self._poll()

    def _poll(self) -> PollResult:
        result, calls, self.budget = PollResult(), self.slurm.calls, self.max_calls
        now = self.clock()
        listed = self.slurm.jobs("squeue", "--json", "--states=all")
        seen: set[JobKey] = set()
        if listed is None:
            result.failed.append("squeue")
        else:
            result.seen = len(listed)
            for record in listed:
                key = self._observe(record, "observed", now, result)
                if key:
                    seen.add(key)
        self._accounting(now, result)
        for key in self.store.open_keys(self.cluster):
            if key not in seen and key not in self.gone and self.budget > 0:
                self._show(key, now, result)
        result.calls = self.slurm.calls - calls
        return result

    def fetch(self, job_ids: list[int]) -> PollResult:
        """The jobs that notices named, at once: one squeue call for all of them, then their scripts."""
        with self.store.batch():
            return self._fetch(job_ids)

    def _fetch(self, job_ids: list[int]) -> PollResult:
        result, calls, self.budget = PollResult(), self.slurm.calls, max(self.budget, len(job_ids))
        now = self.clock()
        listed = self.slurm.jobs("squeue", "--json", "--states=all", "--jobs=" + ",".join(map(str, job_ids)))
        if listed is None:
            result.failed.append("squeue")
        else:
            for record in listed:
                self._observe(record, "observed", now, result)
        result.calls = self.slurm.calls - calls
        return result

    # ------------------------------------------------------------------ what each call brings
    def _observe(self, record: dict, source: str, now: float, result: PollResult,
                 end: SacctEnd | None = None, accounted: dict | None = None) -> JobKey | None:
        """Store one squeue (or sacct-as-squeue) record: row (with what `accounted` adds from accounting), state
        change, final state (with the exit code and signal: `end` from accounting, else the record's own), script."""
        try:
            row = from_squeue(record) | queue_place(record) | (accounted or {})
            key = self._key(record)
        except (FieldError, AttributeError, TypeError) as exc:
            log.warning("job %s left out: %s", str(record.get("job_id"))[:40], exc)
            result.failed.append(f"job {str(record.get('job_id'))[:40]}")
            return None
        end = end or SacctEnd()
        if source == "observed" and type(record.get("exit_code")) is int:
            status = record["exit_code"]  # squeue (22.05) gives the wait status: the code, or the signal that killed
            end = SacctEnd(status >> 8, (status & 0x7F) or None)
        stored = self.store.get(key)
        if stored is None:
            result.new += 1
        said = row["state"]  # the state changes are Slurm's words; the row and the final state its end's class
        if is_final(said):  # killed for memory: an earlier observation saw Slurm say so, or it says so now
            memory = ((stored or {}).get("final") or {}).get("state") == "OUT_OF_MEMORY" or (
                end.signal == 9 and said_memory(record.get("standard_error"), _plain_int(record.get("user_id"))))
            row["state"] = end_state(said, end.signal, end.rss_share, memory)
        state = row["state"]
        if stored is None or not stored["final"] or stored["final"]["source"] != "sacct" or source == "sacct":
            merged = {**(stored or {}).get("row", {}), **{k: v for k, v in row.items() if v is not None}}
            if stored is None or merged != stored["row"]:
                self.store.put_job(key, merged)
        if said and (stored is None or not stored["states"] or stored["states"][-1]["state"] != said):
            self.store.add_state(key, said, now)
        if is_final(state) and self.store.put_final(key, state, source, end.exit_code, end.signal):
            result.finished += 1
        if (stored is None or stored["script"] is None) and self.budget > 0 and self.script_tries.get(key, 0) < SCRIPT_TRIES:
            self._script(key, result)
        return key

    def _key(self, record: dict) -> JobKey:
        """The store's key of an squeue (or sacct-as-squeue) record."""
        job_id, submit = record.get("job_id"), record.get("submit_time")
        submit = submit.get("number") if isinstance(submit, dict) else submit
        if not isinstance(job_id, int) or not isinstance(submit, int) or submit <= 0:
            raise FieldError("job_id/submit_time", "a job id and its submit time", [job_id, submit])
        return JobKey(self.cluster, job_id, submit)

    def _keep_eligible(self, record: dict, accounted: dict) -> None:
        """An open job that has left the queue: accounting's eligible time into its stored row (one that is not
        stored yet waits for squeue, or for its final accounting record, to bring it in)."""
        try:
            key = self._key(record)
        except FieldError:
            return
        stored = self.store.get(key)
        if stored is not None and stored["row"].get("eligible_time") != accounted["eligible_time"]:
            self.store.put_job(key, {**stored["row"], **accounted})

    def _script(self, key: JobKey, result: PollResult) -> None:
        self.budget -= 1
        script = self.slurm.run("scontrol", "write", "batch_script", str(key.job_id), "-")
        if script is None:
            self.script_tries[key] = self.script_tries.get(key, 0) + 1
            return
        self.store.put_script(key, script)
        result.scripts += 1

    def _accounting(self, now: float, result: PollResult) -> None:
        """Final states and eligible times (`accounted_eligible`: of every job that has left the queue) from accounting
        over [checkpoint - OVERLAP, checkpoint + MAX_WINDOW]; then the checkpoint."""
        if self.accounting is False:
            return
        checkpoint = self.store.checkpoint(self.cluster)
        since = int(checkpoint.get("sacct_until", now - FIRST_WINDOW)) - OVERLAP
        until = int(min(now, since + OVERLAP + MAX_WINDOW))
        stamp = lambda t: time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))  # noqa: E731
        output = self.slurm.run("sacct", "--json", "--allusers", "-X", f"--starttime={stamp(since)}",
                                f"--endtime={stamp(until)}")
        if output is None:
            if self.accounting is None:
                self.accounting = self._accounting_configured()
            result.failed.append("sacct")
            return
        self.accounting = True
        try:
            jobs = json.loads(output)["jobs"]
        except (json.JSONDecodeError, KeyError, TypeError):
            log.warning("sacct: output is not sacct --json output")
            result.failed.append("sacct")
            return
        # Slurm 22.05's --json gives every exit code as 0: the parsable output of the same window has them, with the
        # steps' largest resident sizes and memory limits (a job killed for memory)
        # (and, read by its header, each job's use: `jobaware.adapters.slurm.usage`)
        window = (f"--starttime={stamp(since)}", f"--endtime={stamp(until)}")
        fields = SACCT_ENDS + tuple(f for f in USAGE_FIELDS if f not in SACCT_ENDS)
        parsable = self.slurm.run("sacct", "--allusers", "-P", "-o", ",".join(fields), *window)
        if parsable is None:
            result.failed.append("sacct")
            return
        ends, usage = sacct_ends(parsable), sacct_usage(parsable)
        for job in jobs if isinstance(jobs, list) else []:
            if isinstance(job, dict) and (job.get("cluster") in (None, self.cluster)):
                record, eligible = sacct_as_squeue(job), accounted_eligible(job)
                state = normalize_state(str(record["job_state"] or ""))
                if is_final(state):
                    key = self._observe(record, "sacct", now, result, ends.get(job.get("job_id")), eligible)
                    if key and job.get("job_id") in usage:
                        self.store.put_usage(key, usage[job["job_id"]])
                elif eligible and state != "PENDING":
                    self._keep_eligible(record, eligible)
        self.store.put_checkpoint(self.cluster, {**checkpoint, "sacct_until": until})

    def _accounting_configured(self) -> bool | None:
        """False when this cluster has no accounting storage (then scontrol and squeue decide); None if unknown."""
        self.budget -= 1
        config = self.slurm.run("scontrol", "show", "config")
        if config is None:
            return None
        storage = next((line.split("=", 1)[1].strip() for line in config.splitlines()
                        if line.startswith("AccountingStorageType")), "")
        return storage != "accounting_storage/none" and storage != ""

    def _show(self, key: JobKey, now: float, result: PollResult) -> None:
        """A job squeue no longer lists: its state from `scontrol show job`; gone without accounting, it stays
        with its last observation."""
        self.budget -= 1
        shown = self.slurm.run("scontrol", "show", "job", "-o", str(key.job_id))
        fields = dict(part.split("=", 1) for part in (shown or "").split() if "=" in part)
        if fields.get("JobState") and is_final(normalize_state(fields["JobState"])):
            code, signal = exit_status(fields.get("ExitCode", ""))
            said = normalize_state(fields["JobState"])
            state = end_state(said, signal, message=signal == 9 and said_memory(fields.get("StdErr"),
                                                                                 scontrol_uid(fields.get("UserId"))))
            self.store.add_state(key, said, now)
            if self.store.put_final(key, state, "scontrol", code, signal):
                result.finished += 1
        elif shown is None and self.accounting is False:
            self.gone.add(key)
            log.warning("job %s: no longer known to Slurm and no accounting; kept with its last observation", key.job_id)

    # ------------------------------------------------------------------ the loop
    def run(self, polls: int | None, interval: float, notices=None, stop: threading.Event | None = None,
            on_poll: Callable[[int, PollResult, float], None] | None = None) -> int:
        """Poll `polls` times (None: until `stop`), `interval` seconds apart; between polls, fetch the jobs that
        notices name as they come. Returns the number of polls."""
        stop = stop or threading.Event()
        done = 0
        self.series.collector_interval_seconds.set(interval)
        while (polls is None or done < polls) and not stop.is_set():
            started = time.monotonic()
            try:
                result = self.poll()
                outcome = "partial" if result.failed else "ok"
            except Exception as exc:
                log.exception("poll failed")
                result, outcome = PollResult(failed=[f"poll ({type(exc).__name__}: {str(exc)[:200]})"]), "failed"
            done += 1
            self._record(result, outcome, time.monotonic() - started)
            if on_poll:
                on_poll(done, result, time.monotonic() - started)
            if polls is not None and done >= polls:
                break
            deadline = started + interval
            while not stop.is_set() and time.monotonic() < deadline:
                wait = min(1.0, max(0.0, deadline - time.monotonic()))
                if notices is None:
                    stop.wait(wait)
                    continue
                try:
                    self.take_notices(notices, wait)
                except Exception:
                    log.exception("notices failed")
                    stop.wait(wait)
        return done

    def _record(self, result: PollResult, outcome: str, seconds: float) -> None:
        """A poll's series: its outcome and time, what it stored, how far the store is behind squeue and accounting."""
        series = self.series
        series.collector_polls.labels(outcome=outcome).inc()
        series.collector_poll_duration_seconds.observe(seconds)
        for what, count in (("job", result.new), ("final", result.finished), ("script", result.scripts)):
            series.collector_stored.labels(what=what).inc(count)
        if outcome != "failed" and "squeue" not in result.failed:
            series.collector_jobs_listed.set(result.seen)
            series.collector_last_squeue_timestamp_seconds.set(self.clock())
        until = self.store.checkpoint(self.cluster).get("sacct_until") if outcome != "failed" else None
        if isinstance(until, int | float):
            series.collector_accounting_lag_seconds.set(max(0.0, self.clock() - until))

    def take_notices(self, notices, timeout: float) -> int:
        """Fetch the jobs that the next notices name, then acknowledge them. Returns how many notices."""
        batch = notices.read(timeout)
        if not batch:
            return 0
        ids = sorted({job_id for _, job_id in batch if job_id is not None})
        if ids and "squeue" in self.fetch(ids).failed:
            self.notice_failures += 1
            if self.notice_failures < NOTICE_TRIES:
                return 0  # not acknowledged: read again
            log.warning("notices for jobs %s: squeue failed %d times; acknowledged, the polls will find them",
                        ids[:10], self.notice_failures)
        self.notice_failures = 0
        notices.ack([token for token, _ in batch])
        return len(batch)


def cluster_name(slurm: Slurm) -> str | None:
    """The ClusterName of the cluster that `scontrol` talks to."""
    config = slurm.run("scontrol", "show", "config")
    for line in (config or "").splitlines():
        if line.startswith("ClusterName"):
            return line.split("=", 1)[1].strip()
    return None
