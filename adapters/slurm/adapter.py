"""Bring the models' answers back into Slurm: for each pending job, a verdict in its comment, by a stated policy.

Each pass: one `squeue --json --states=PENDING` call (the pending jobs read from its records); the job card of each pending job (`jobaware.card`: `failure`
on its squeue record, `resource` on its batch script from the store or `scontrol write batch_script`); then, by
the policy, the acts: write the card's short form into the job's comment (or admin comment), and optionally hold
the jobs whose P(fail) is at or above the model's own registered threshold. Every verdict is kept in the job
store (one per job and set of model versions) and every act in the audit log (who, what, why, model versions).

Rules the cluster can rely on:
- Dry-run unless `act`: nothing reaches `scontrol update`/`hold`; the audit says what would have been done.
- Idempotent: a job gets one verdict per set of model versions; a pass repeated after a crash acts on none twice.
- Rate-limited: at most `max_acts_per_minute` scontrol acts; the rest wait for the next pass.
- Fails open: a service that is down or slow is backed off (doubling up to `backoff_max_s`) and its part left out;
  without a `failure` answer a job gets no verdict yet and is judged when the service is back. The scheduler never
  waits on the adapter, and a job never waits for a verdict.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from adapters.slurm.collector import Slurm
from jobaware import card as cards
from jobaware.failure.reader.slurm import FieldError, from_squeue
from jobaware.failure.schema import FAILURES
from jobaware.store import JobKey, JobStore

log = logging.getLogger(__name__)
COMMENT_MAX = 250     # characters Slurm keeps in a comment that jobaware writes (the user's own text kept first)
MARK = "jobaware:"


class Policy(BaseModel):
    """What the adapter may do. Read from a YAML file (`--policy`); every field has a safe default."""

    model_config = ConfigDict(extra="forbid")
    comment: bool = Field(True, description="write the verdict into the job's comment field")
    comment_field: Literal["comment", "admin_comment"] = "comment"
    hold: bool = Field(False, description="hold pending jobs whose P(fail) is at or above the threshold")
    hold_threshold: float | None = Field(None, ge=0, le=1, description="default: the model's registered threshold")
    pairing: bool = Field(False, description="add a co-scheduling hint from resource's /pairing")
    max_acts_per_minute: int = Field(60, ge=1, le=10_000)
    max_jobs_per_pass: int = Field(500, ge=1, le=100_000)
    max_scripts_per_pass: int = Field(50, ge=0, le=10_000)
    service_timeout_s: float = Field(5.0, gt=0, le=120)
    cache_days: float = Field(30.0, gt=0, le=3650, description="jobs submitted this recently make the verdict cache")
    cache_max_verdicts: int = Field(50_000, ge=1, le=1_000_000)
    cache_stale_after_s: int = Field(3600, ge=60, le=30 * 86_400, description="the plugins ignore an older cache")
    backoff_s: float = Field(5.0, gt=0, le=3600)
    backoff_max_s: float = Field(300.0, gt=0, le=86_400)


def read_policy(path: str | Path | None) -> Policy:
    """The policy of a YAML file (defaults without one); a bad field is one line naming it."""
    if path is None:
        return Policy()
    import yaml

    from jobaware.capabilities import validate_params
    from jobaware.errors import JobawareError

    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise JobawareError(f"{path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise JobawareError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    return Policy(**validate_params(Policy, raw, f"the adapter policy {path}"))


class Backoff:
    """Per service: after a failure, skip it for `delay` seconds, doubling up to `most`; a success resets it."""

    def __init__(self, first: float, most: float, clock: Callable[[], float] = time.monotonic):
        self.first, self.most, self.clock = first, most, clock
        self.until: dict[str, float] = {}
        self.delay: dict[str, float] = {}

    def open(self, name: str) -> bool:
        return self.clock() >= self.until.get(name, 0.0)

    def failed(self, name: str) -> None:
        self.delay[name] = min(self.delay.get(name, self.first / 2) * 2, self.most)
        self.until[name] = self.clock() + self.delay[name]

    def ok(self, name: str) -> None:
        self.delay.pop(name, None)
        self.until.pop(name, None)


class RateLimit:
    """At most `per_minute` acts in any 60 seconds."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute, self.clock = per_minute, clock
        self.times: list[float] = []

    def take(self, count: int) -> bool:
        """Take `count` acts at once, or none (False) when they would go over the limit."""
        now = self.clock()
        self.times = [t for t in self.times if now - t < 60]
        if len(self.times) + count > self.per_minute:
            return False
        self.times += [now] * count
        return True


@dataclass
class PassResult:
    pending: int = 0        # pending jobs listed
    judged: int = 0         # new verdicts (jobs x model versions not judged before)
    acted: int = 0          # scontrol acts done (or, dry-run, that would have been done)
    deferred: int = 0       # verdicts or acts left for the next pass (rate limit, services backed off)
    missing: list[str] = field(default_factory=list)  # services backed off or down this pass


RESOURCE_NAMES = {"cpu": "cpu", "mem": "memory", "network": "network", "io": "io"}


def shape_of(row: dict):
    """A job's request shape as `job_submit.lua` reads it from a job descriptor (`verdicts.Shape`), from its
    canonical row: minutes, nodes, total CPUs, memory in MiB (squeue's per node, or per CPU times CPUs), GPUs."""
    from adapters.slurm.verdicts import Shape

    def number(name: str, scale: float = 1.0, default: float | None = None) -> float | None:
        value = row.get(name)
        return default if value is None or value != value or value < 0 else value * scale

    return Shape(time_minutes=number("wallclock_req", 1 / 60), nodes=number("nodes_req", default=1.0),
                 cpus=number("processors_req", default=1.0), mem_mib=number("mem_req", default=0.0),
                 gpus=number("gpus_req", default=0.0))


def cached_verdicts(store: JobStore, cluster: str, policy: Policy, now: float | None = None) -> list:
    """The verdict cache's lines from the store: per user, account, partition and request shape, the latest
    verdict's risk, likely failure and binding resource, and how the finished jobs of that shape ended."""
    from adapters.slurm.verdicts import NAME, Verdict

    since = (time.time() if now is None else now) - policy.cache_days * 86_400
    groups: dict[tuple, dict] = {}
    # newest first: the first verdict met for a shape is its latest; only the window is read, a page at a time
    for record in store.records(cluster, since=since, newest_first=True, predictions="adapter:"):
        if len(groups) >= policy.cache_max_verdicts:
            break
        row = record["row"]
        user, account, partition = (str(row.get(k) or "") for k in ("user", "account", "partition"))
        if not user or not partition or not all(NAME.fullmatch(v) for v in (user, account, partition)):
            continue
        shape = shape_of(row)
        group = groups.setdefault((user, account, partition, shape.buckets()), {
            "user": user, "account": account, "partition": partition, "shape": shape, "card": None,
            "n_similar": 0, "n_failed": 0, "n_timeout": 0})
        if record["final"] and record["final"]["state"] in ("COMPLETED", *FAILURES):
            group["n_similar"] += 1
            group["n_failed"] += record["final"]["state"] != "COMPLETED"
            group["n_timeout"] += record["final"]["state"] == "TIMEOUT"
        if group["card"] is None:
            verdicts = list(record["predictions"].values())
            if verdicts and verdicts[-1]["card"]["parts"]["failure"]["status"] == "ok":
                group["card"] = verdicts[-1]["card"]
    lines = []
    for group in groups.values():
        card = group.pop("card")
        if card is None:
            continue
        failure, resource = card["parts"]["failure"], card["parts"]["resource"]
        risky = failure.get("likely_fail")
        risky = failure["p_fail"] >= 0.5 if risky is None else risky
        lines.append(Verdict(**group, p_fail=failure["p_fail"], kind=failure["likely"] if risky else "",
                             resource=RESOURCE_NAMES.get(resource.get("binding"), "")
                             if resource["status"] == "ok" else "",
                             model_version=str(failure["model_version"])))
    return lines


def _pending(record: dict) -> bool:
    state = record.get("job_state")
    return (state[0] if isinstance(state, list) and state else state) == "PENDING"


def verdict_name(versions: dict[str, str]) -> str:
    """The store's name of a verdict by these model versions: `adapter:failure=3,resource=2`."""
    return "adapter:" + ",".join(f"{key}={value}" for key, value in sorted(versions.items()))


def comment_with(existing: str | None, verdict: str) -> str:
    """The job's comment with the verdict: the user's own text kept first, an earlier verdict replaced."""
    own = (existing or "").split(MARK, 1)[0].rstrip(" |")
    text = f"{own} | {verdict}" if own else verdict
    return text[:COMMENT_MAX]


class Adapter:
    def __init__(self, store: JobStore, cluster: str, urls: dict[str, str], policy: Policy, *, act: bool = False,
                 audit: str | Path, cache: str | Path | None = None, slurm: Slurm | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.store, self.cluster, self.urls, self.policy, self.act = store, cluster, urls, policy, act
        self.cache = Path(cache) if cache else None
        self.audit_path, self.slurm = Path(audit), slurm or Slurm()
        self.backoff = Backoff(policy.backoff_s, policy.backoff_max_s, clock)
        self.rate = RateLimit(policy.max_acts_per_minute, clock)
        self.versions: dict[str, str] = {}  # the model versions the services answered with last

    def run_pass(self) -> PassResult:
        result = PassResult()
        listed = self.slurm.jobs("squeue", "--json", "--states=PENDING")
        if listed is None:
            result.missing.append("squeue")
            return result
        # Slurm 22.05's --json lists every job whatever --states says: the state is read from each record
        pending = [job for job in listed if isinstance(job.get("job_id"), int) and _pending(job)]
        pending = pending[: self.policy.max_jobs_per_pass]
        result.pending = len(pending)
        scripts_left = self.policy.max_scripts_per_pass
        judged_classes: list[dict] = []
        for record in pending:
            if not self.backoff.open("failure"):
                result.deferred += 1
                result.missing.append("failure")
                continue
            found = self._stored(record)
            if found is None or self._judged(found[0], self.versions):
                continue
            key, stored = found
            script = stored.get("script")
            if script is None and scripts_left > 0:
                scripts_left -= 1
                script = self.slurm.run("scontrol", "write", "batch_script", str(key.job_id), "-")
                if script is not None:
                    self.store.put_script(key, script)
            card = self._card(key, record, script, judged_classes if self.policy.pairing else [])
            result.missing += card["missing"]
            if card["parts"]["failure"]["status"] != "ok":
                result.deferred += 1
                continue
            if card["parts"]["resource"]["status"] == "ok":
                judged_classes.append({"id": key.job_id, "class": card["parts"]["resource"]["binding"]})
            if self._judged(key, cards.versions(card)):
                continue
            acts = self._acts(key, record, card)
            if acts is None:
                result.deferred += 1
                continue  # over the rate limit: judged again next pass
            self.store.put_prediction(key, self._name(cards.versions(card)),
                                      {"card": card, "acts": acts, "dry_run": not self.act})
            result.judged += 1
            result.acted += len(acts)
        result.missing = sorted(set(result.missing))
        if self.cache is not None:
            self.write_cache()
        return result

    def write_cache(self) -> int:
        """Rewrite the verdict cache the Slurm plugins read (atomically); returns how many verdicts it holds."""
        from adapters.slurm.verdicts import write_cache

        verdicts = cached_verdicts(self.store, self.cluster, self.policy)
        write_cache(self.cache, verdicts, stale_after=self.policy.cache_stale_after_s)
        return len(verdicts)

    def _name(self, versions: dict[str, str]) -> str:
        """The store's name of a verdict by these versions in this mode (a dry run never stands for an act)."""
        return verdict_name(versions) + ("" if self.act else ":dry-run")

    def _judged(self, key: JobKey, versions: dict[str, str]) -> bool:
        """Whether the job has a verdict of these model versions already (then it is not asked or acted on)."""
        return "failure" in versions and self._name(versions) in self.store.predictions(key)

    def _stored(self, record: dict) -> tuple[JobKey, dict] | None:
        """The job's key and its record in the store (put there first if the collector has not seen it yet)."""
        submit = record.get("submit_time")
        submit = submit.get("number") if isinstance(submit, dict) else submit
        if not isinstance(submit, int) or submit <= 0:
            log.warning("job %s: no submit time; left out", record.get("job_id"))
            return None
        key = JobKey(self.cluster, record["job_id"], submit)
        stored = self.store.get(key)
        if stored is None:
            try:
                self.store.put_job(key, {k: v for k, v in from_squeue(record).items() if v is not None})
            except (FieldError, AttributeError, TypeError) as exc:
                log.warning("job %s left out: %s", record.get("job_id"), exc)
                return None
        return key, stored or {}

    def _card(self, key: JobKey, record: dict, script: str | None, neighbours: list[dict]) -> dict:
        """The job's card, asking only the services not backed off; a service that failed is backed off."""
        skip = {name for name in cards.PARTS if not self.backoff.open(name)}
        card = cards.make_card(key.job_id, record, script, self.urls, neighbours=neighbours, skip=skip,
                               timeout=self.policy.service_timeout_s)
        self.versions.update(cards.versions(card))
        for name, part in card["parts"].items():
            if part["status"] == "unavailable" and name not in skip:
                self.backoff.failed(name)
                log.warning("%s service unavailable (%s); backing off %.0f s", name, part["reason"],
                            self.backoff.delay[name])
            elif part["status"] in ("ok", "refused"):
                self.backoff.ok(name)
        return card

    def _acts(self, key: JobKey, record: dict, card: dict) -> list[dict] | None:
        """The policy's acts for one verdict, done (or, dry-run, only audited); None when over the rate limit."""
        wanted = []
        failure = card["parts"]["failure"]
        if self.policy.comment:
            field_name = "Comment" if self.policy.comment_field == "comment" else "AdminComment"
            text = comment_with(record.get(self.policy.comment_field), card["short"])
            wanted.append((["scontrol", "update", f"JobId={key.job_id}", f"{field_name}={text}"],
                           f"verdict written into {self.policy.comment_field}"))
        threshold = self.policy.hold_threshold if self.policy.hold_threshold is not None else failure.get("threshold")
        if self.policy.hold and threshold is not None and failure["p_fail"] >= threshold:
            wanted.append((["scontrol", "hold", str(key.job_id)],
                           f"p(fail)={failure['p_fail']:.3f} >= threshold {threshold:.3f}"))
        if not self.rate.take(len(wanted)):
            return None
        acts = []
        for command, why in wanted:
            done = self.slurm.run(*command) is not None if self.act else None
            acts.append({"command": command, "why": why, "done": done})
            cards.audit({"actor": "jobaware slurm adapt", "cluster": key.cluster, "job_id": key.job_id,
                         "submit_time": key.submit_time, "action": command[1], "command": command, "why": why,
                         "dry_run": not self.act, "done": done, "short": card["short"],
                         "versions": cards.versions(card), "missing": card["missing"]}, self.audit_path)
        return acts
