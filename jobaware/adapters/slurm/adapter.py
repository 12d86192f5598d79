"""Bring the models' answers back into Slurm: for each pending job, a verdict in its comment, by a stated policy.

Each pass: one `squeue --json` call (the pending jobs are judged; they and the running ones are the queue around
each); the job card of each pending job (`jobaware.card`: the part of every capability whose registration declares
one and that the policy leaves on, each given the job's squeue record, its batch script from the store or
`scontrol write batch_script`, and the queue); then, by the policy, the acts: write the card's short form into the
job's comment (or admin comment), and optionally hold the jobs a part gives a reason to hold (`failure`: its
model's own flag, or the site's threshold). Every verdict is kept in the job store (one per job and set of model
versions; where a part asked ages, `CardPart.refresh_s`, a new one each time the newest is that old) and every act
in the audit (who, what, why, model versions; an act's id is never acted on twice). The
comment and the verdict cache say what the plugins say: the parts' words with what the store knows of jobs of the
same user, account, partition and request shape (how they ended).

Rules the cluster can rely on:
- Dry-run unless `act`: nothing reaches `scontrol update`/`hold`; the audit says what would have been done.
- Idempotent: a job gets one verdict per set of model versions, or, where a part asked has a `refresh_s` (the
  smallest of them), one per refresh: named with the refresh's time bucket (`now // refresh_s`), so that a pass
  repeated after a crash acts on none twice. A refresh repeats an act only where its command changed (the comment,
  when the card's words did).
- Rate-limited: at most `max_acts_per_minute` scontrol acts; the rest wait for the next pass.
- Fails open, out loud: a service that is down or slow is backed off (`jobaware.adapters.common.services.FailOpen`, which
  warns once per outage) and its part left out; without a part its registration marks required, a job gets no
  verdict yet and is judged when the service answers again, and the verdict cache is not rewritten (its header
  keeps its age, so the plugins see it go stale instead of fresh). A capability the policy switches off is never
  asked, and so is one the deployment names no URL for. The scheduler never waits on the adapter, and a job never
  waits for a verdict.
- Asks only the deployment's services: with the site's service token, an answer that does not prove it comes from
  the deployment's service is an outage (`jobaware.identity`), never a verdict.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field, field_validator

from jobaware import card as cards
from jobaware import metrics, settings
from jobaware.adapters.common.pacing import RateLimit
from jobaware.adapters.common.services import FailOpen
from jobaware.adapters.slurm.collector import Slurm, state_of
from jobaware.adapters.slurm.verdicts import ADVICE_MAX, COMMENT_MAX, NAME, Shape, Verdict, write_cache
from jobaware.audit import Audit, StoreAudit, stamp
from jobaware.errors import JobawareError
from jobaware.failure.reader.slurm import FieldError, from_squeue
from jobaware.store import JobKey, JobStore

log = logging.getLogger(__name__)
STREAM = "slurm.adapt"  # the store's event stream of the adapter's audit (when it has no audit file)
ADAPTER = "slurm"  # its `adapter` label in the metrics
ACTIONS = {"update": "comment", "hold": "hold"}  # an act's label by its scontrol verb
COMMENT_MAX_CHARS = 250  # characters Slurm keeps in a comment that jobaware writes (the user's own text first)
MARK = cards.MARK.rstrip()
ONE_LINE = re.compile(r"[\t\n\r]+")


class Policy(BaseModel):
    """What the adapter may do. Read from a YAML or TOML file (`--policy`); every field has a safe default."""

    model_config = ConfigDict(extra="forbid")
    comment: bool = Field(True, description="write the verdict into the job's comment field")
    comment_field: Literal["comment", "admin_comment"] = "comment"
    hold: bool = Field(False, description="hold pending jobs a card part gives a reason to hold")
    hold_threshold: float | None = Field(None, ge=0, le=1, description="the failure risk from which to hold; "
                                         "default: the failure model's own flag (its registered threshold)")
    pairing: bool = Field(False, description="let the parts see the jobs judged before in the same pass "
                          "(resource's co-scheduling hint)")
    capabilities: dict[str, bool] = Field(default_factory=dict, description="per capability with a card part: "
                                          "off (false) where its service is not deployed: never asked, never warned")
    max_acts_per_minute: int = Field(60, ge=1, le=10_000)
    max_jobs_per_pass: int = Field(500, ge=1, le=100_000)
    max_scripts_per_pass: int = Field(50, ge=0, le=10_000)
    service_timeout_s: float = Field(5.0, gt=0, le=120)
    cache_days: float = Field(30.0, gt=0, le=3650, description="jobs submitted this recently make the verdict "
                              "cache; older verdicts are dropped by the plugins")
    cache_max_verdicts: int = Field(50_000, ge=1, le=1_000_000)
    cache_stale_after_s: int = Field(3600, ge=60, le=30 * 86_400, description="the plugins ignore an older cache")
    backoff_s: float = Field(5.0, gt=0, le=3600)
    backoff_max_s: float = Field(300.0, gt=0, le=86_400)

    @field_validator("capabilities")
    @classmethod
    def _known(cls, value: dict[str, bool]) -> dict[str, bool]:
        unknown = sorted(set(value) - set(cards.declared()))
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not a capability with a card part "
                             f"({', '.join(cards.declared())})")
        return value

    def keys(self) -> list[str]:
        """The capabilities asked for cards: every one with a card part that this policy leaves on."""
        return [key for key in cards.declared() if self.capabilities.get(key, True)]


def read_policy(path: str | Path | None) -> Policy:
    """The policy of a YAML or TOML file (defaults without one); a bad field is one line naming it."""
    return Policy() if path is None else settings.load(Policy, Path(path), "adapter policy")


@dataclass
class PassResult:
    pending: int = 0        # pending jobs listed
    judged: int = 0         # new verdicts (jobs x model versions not judged before, or refreshed)
    acted: int = 0          # scontrol acts done (or, dry-run, that would have been done)
    deferred: int = 0       # verdicts or acts left for the next pass (rate limit, services backed off)
    missing: list[str] = field(default_factory=list)  # services backed off or down this pass
    cached: int | None = None  # verdicts in the rewritten cache; None when it was not rewritten


def shape_of(row: dict) -> Shape:
    """A job's request shape as `job_submit.lua` reads it from a job descriptor (`verdicts.Shape`), from its
    canonical row: minutes, nodes, total CPUs, memory in MiB (squeue's per node, or per CPU times CPUs), GPUs."""
    def number(name: str, scale: float = 1.0, default: float | None = None) -> float | None:
        value = row.get(name)
        return default if value is None or value != value or value < 0 else value * scale

    return Shape(time_minutes=number("wallclock_req", 1 / 60), nodes=number("nodes_req", default=1.0),
                 cpus=number("processors_req", default=1.0), mem_mib=number("mem_req", default=0.0),
                 gpus=number("gpus_req", default=0.0))


def _answered(card: dict) -> bool:
    """Whether every part of `card` that a registration marks required has answered."""
    required = [key for key, part in cards.declared().items() if part.required and key in card["parts"]]
    return all(card["parts"][key]["status"] in cards.ANSWERED for key in required)


@dataclass
class Group:
    """Jobs of one user, account, partition and request shape: the finished ones, and the latest verdict."""

    user: str
    account: str
    partition: str
    shape: Shape
    finished: list[dict] = field(default_factory=list)  # records (row, states, final), newest first
    card: dict | None = None


class Groups:
    """The jobs of one cluster in the store, submitted in the last `cache_days`, by user, account, partition and
    request shape (at most `cache_max_verdicts` groups), with how many finished jobs ended in each state."""

    def __init__(self, store: JobStore, cluster: str, policy: Policy, now: float | None = None):
        self.now = time.time() if now is None else now
        self.max_age = policy.cache_days * 86_400
        self.groups: dict[tuple, Group] = {}
        self.site: Counter = Counter()
        # newest first, only the window, a page at a time; a shape's card is the newest of its jobs' (refreshed ones too)
        for record in store.records(cluster, since=self.now - self.max_age, newest_first=True,
                                    predictions="adapter:"):
            if len(self.groups) >= policy.cache_max_verdicts:
                break
            group = self._group(record["row"])
            if group is None:
                continue
            if record["final"]:
                self.site[record["final"]["state"]] += 1
                group.finished.append({name: record.get(name) for name in ("row", "states", "final")})
            kept = cards.kept_cards(record["predictions"], prefix="adapter:")
            if kept and _answered(kept[-1]) and (group.card is None or kept[-1]["created"] > group.card["created"]):
                group.card = kept[-1]

    def _group(self, row: dict) -> Group | None:
        """The job's group (made when new), or None for names the cache cannot hold."""
        user, account, partition = (str(row.get(k) or "") for k in ("user", "account", "partition"))
        if not user or not partition or not all(NAME.fullmatch(v) for v in (user, account, partition)):
            return None
        shape = shape_of(row)
        return self.groups.setdefault((user, account, partition, shape.buckets()),
                                      Group(user, account, partition, shape))

    def history(self, row: dict) -> dict:
        """What the store knows of jobs like this one (`jobaware.card`'s history)."""
        group = self._group(row)
        return {"similar": group.finished if group else [], "site": dict(self.site)}

    def add(self, row: dict, card: dict) -> None:
        """A verdict made now: its group's latest."""
        group = self._group(row)
        if group is not None:
            group.card = card

    def verdicts(self) -> list[Verdict]:
        """The verdict cache's lines: per group with a verdict younger than `cache_days`, what its parts say."""
        lines = []
        for group in self.groups.values():
            if group.card is None or self.now - group.card["created"] > self.max_age:
                continue
            history = {"similar": group.finished, "site": dict(self.site)}
            comment = ONE_LINE.sub(" ", "; ".join(cards.words(group.card, history)))[:COMMENT_MAX]
            advice = ONE_LINE.sub(" ", cards.advice(group.card, history))[:ADVICE_MAX]
            if comment:
                lines.append(Verdict(user=group.user, account=group.account, partition=group.partition,
                                     shape=group.shape, n_similar=len(group.finished),
                                     created=int(group.card["created"]), comment=comment, advice=advice))
        return lines


def cached_verdicts(store: JobStore, cluster: str, policy: Policy, now: float | None = None) -> list[Verdict]:
    """The verdict cache's lines from the store: per user, account, partition and request shape, what the parts
    of the latest verdict say, with how the finished jobs of that shape ended."""
    return Groups(store, cluster, policy, now).verdicts()


def verdict_name(versions: dict[str, str]) -> str:
    """The store's name of a verdict by these model versions: `adapter:failure=3,resource=2`."""
    return "adapter:" + ",".join(f"{key}={value}" for key, value in sorted(versions.items()))


def comment_with(existing: str | None, verdict: str) -> str:
    """The job's comment with the verdict: the user's own text kept first, an earlier verdict replaced."""
    own = (existing or "").split(MARK, 1)[0].rstrip(" |")
    text = f"{own} | {verdict}" if own else verdict
    return text[:COMMENT_MAX_CHARS]


class PendingJobAdapter:
    """Judges a cluster's pending jobs pass by pass and writes the verdicts back by the policy; every act audited in
    the file `audit`, or without one in the store's event stream `slurm.adapt`. `series` (`metrics.ADAPTER`, in a
    registry of its own unless given) counts what each pass did."""

    def __init__(self, store: JobStore, cluster: str, urls: dict[str, str], policy: Policy, *, act: bool = False,
                 audit: str | Path | None = None, cache: str | Path | None = None, slurm: Slurm | None = None,
                 clock: Callable[[], float] = time.monotonic, now: Callable[[], float] = time.time,
                 series: metrics.Group | None = None):
        self.store, self.cluster, self.policy, self.act = store, cluster, policy, act
        self.series = series or metrics.Group(metrics.ADAPTER, CollectorRegistry())
        self.cache = Path(cache) if cache else None
        self.slurm = slurm or Slurm()
        self.keys = [key for key in policy.keys() if key in urls]  # without a URL: not deployed, never asked
        undeployed = [key for key in policy.keys() if key not in urls and cards.declared()[key].required]
        if undeployed:
            key = undeployed[0]
            raise JobawareError(f"{key}: every verdict needs its part, but no JOBAWARE_{key.upper()}_URL names its "
                                f"service; set it (or --service {key}=URL), or switch {key} off in the policy")
        self.required = [key for key in self.keys if cards.declared()[key].required]
        self.services = FailOpen({key: url for key, url in urls.items() if key in self.keys},
                                 policy.service_timeout_s, backoff_s=policy.backoff_s,
                                 backoff_max_s=policy.backoff_max_s, log=log, clock=clock, series=self.series,
                                 adapter=ADAPTER)
        if not self.services.verified:
            log.warning("no service token (JOBAWARE_SERVICE_TOKEN_FILE): the services' answers are not verified")
        self.rate = RateLimit(policy.max_acts_per_minute, clock)
        # the audit: a JSON Lines file when given, else the store's stream (acts known once across the site's adapters)
        self.audit = Audit(audit) if audit is not None else StoreAudit(store, STREAM)
        self.versions: dict[str, str] = {}  # the model versions the services answered with last
        self.now = now  # the time of a pass (verdicts' age and refresh bucket); `clock` paces and backs off
        self.default_partition = ""  # the cluster's, as last asked: cli_filter's partition for a job naming none
        # how often a pending job is asked again: the smallest refresh_s of the parts asked (None: never)
        self.refresh_s = min((p.refresh_s for k in self.services.urls if (p := cards.declared()[k]).refresh_s),
                             default=None)

    def close(self) -> None:
        self.audit.close()
        self.services.close()

    def __enter__(self) -> PendingJobAdapter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run_pass(self) -> PassResult:
        """One pass over the pending jobs (its series counted: `metrics.ADAPTER`)."""
        started = time.monotonic()
        outcome = "failed"
        try:
            result = self._pass()
            outcome = "failed" if "squeue" in result.missing else "waiting" if result.missing else "ok"
            return result
        finally:
            self.series.adapter_passes.labels(adapter=ADAPTER, outcome=outcome).inc()
            self.series.adapter_pass_duration_seconds.labels(adapter=ADAPTER).observe(time.monotonic() - started)

    def _pass(self) -> PassResult:
        result = PassResult()
        # Slurm 22.05's --json lists every job whatever --states says: the state is read from each record
        listed = self.slurm.jobs("squeue", "--json", "--states=PENDING,RUNNING")
        if listed is None:
            result.missing.append("squeue")
            return result
        queue = [job for job in listed if isinstance(job.get("job_id"), int) and state_of(job) in ("PENDING", "RUNNING")]
        pending = [job for job in queue if state_of(job) == "PENDING"][: self.policy.max_jobs_per_pass]
        result.pending = len(pending)
        self.series.adapter_pending_jobs.labels(adapter=ADAPTER).set(result.pending)
        now = self.now()
        groups: Groups | None = None
        scripts_left = self.policy.max_scripts_per_pass
        neighbours: list[dict] = []
        waiting: set[str] = set()  # required capabilities a job waited for (the cache is then left as it was)
        for record in pending:
            down = [key for key in self.required if not self.services.available(key)]
            if down:
                self._deferred(result)
                waiting.update(down)
                continue
            found = self._stored(record)
            if found is None or self._judged(found[0], self.versions, now):
                continue
            key, stored, row = found
            script = stored.get("script")
            if script is None and scripts_left > 0:
                scripts_left -= 1
                script = self.slurm.run("scontrol", "write", "batch_script", str(key.job_id), "-")
                if script is not None:
                    self.store.put_script(key, script)
            groups = groups or Groups(self.store, self.cluster, self.policy, now)
            context = {"job_id": key.job_id, "job": record, "script": script, "queue": queue,
                       "neighbours": neighbours if self.policy.pairing else []}
            card = cards.make_card(context, self.services, keys=self.keys, history=groups.history(row), now=now)
            self.versions.update(cards.versions(card))
            result.missing += card["missing"]
            lacking = [k for k in self.required if card["parts"][k]["status"] not in cards.ANSWERED]
            if lacking:
                self._deferred(result)
                waiting.update(k for k in lacking if card["parts"][k]["status"] == "unavailable")
                continue
            neighbours.append({"id": key.job_id, "parts": card["parts"]})
            versions = cards.versions(card)
            if self._judged(key, versions, now):
                continue
            name = self._name(versions, now)
            acts = self._acts(key, record, card, name)
            if acts is None:
                self._deferred(result)
                continue  # over the rate limit: judged again next pass
            self.store.put_prediction(key, self._kept_as(key, versions, name, acts),
                                      cards.kept(card, acts=acts, dry_run=not self.act))
            groups.add(row, card)
            result.judged += 1
            result.acted += len(acts)
            self._written(card, groups.history(row))
        result.missing = sorted(set(result.missing) | waiting)
        if self.cache is not None and not waiting:
            result.cached = self.write_cache(groups)
        elif self.cache is not None:
            log.warning("verdict cache %s not rewritten: no answer from %s", self.cache, ", ".join(sorted(waiting)))
        return result

    def _deferred(self, result: PassResult) -> None:
        result.deferred += 1
        self.series.adapter_deferred.labels(adapter=ADAPTER).inc()

    def _written(self, card: dict, history: dict) -> None:
        """A verdict kept: counted, with its parts by status and the capabilities that flag the job."""
        series, declared = self.series, cards.declared()
        series.adapter_verdicts.labels(adapter=ADAPTER).inc()
        for key, part in card["parts"].items():
            series.adapter_parts.labels(adapter=ADAPTER, capability=metrics.one_of(key, declared),
                                        status=metrics.one_of(part.get("status"), cards.STATUSES)).inc()
        for key in cards.flagged(card, history, self.policy.hold_threshold):
            series.adapter_flagged.labels(adapter=ADAPTER, capability=metrics.one_of(key, declared)).inc()

    def write_cache(self, groups: Groups | None = None) -> int:
        """Rewrite the verdict cache the Slurm plugins read (atomically), with the cluster's default partition (so that
        cli_filter advises a job that names no partition); returns how many verdicts it holds."""
        verdicts = (groups or Groups(self.store, self.cluster, self.policy)).verdicts()
        partition = self.slurm.default_partition()  # when scontrol fails, the last one it named
        if partition is not None and NAME.fullmatch(partition):
            self.default_partition = partition
        write_cache(self.cache, verdicts, stale_after=self.policy.cache_stale_after_s,
                    max_age=int(self.policy.cache_days * 86_400), default_partition=self.default_partition)
        series = self.series
        series.adapter_cache_written_timestamp_seconds.labels(adapter=ADAPTER).set(self.now())
        series.adapter_cache_entries.labels(adapter=ADAPTER).set(len(verdicts))
        series.adapter_cache_bytes.labels(adapter=ADAPTER).set(self.cache.stat().st_size)
        series.adapter_cache_stale_after_seconds.labels(adapter=ADAPTER).set(self.policy.cache_stale_after_s)
        return len(verdicts)

    def _name(self, versions: dict[str, str], now: float | None = None) -> str:
        """The store's name of a verdict by these versions in this mode (a dry run never stands for an act), with
        the refresh's time bucket at `now` where the parts asked are refreshed: `adapter:wait=2@5712345`."""
        name = verdict_name(versions) + ("" if self.act else ":dry-run")
        return name if now is None or self.refresh_s is None else f"{name}@{int(now // self.refresh_s)}"

    def _verdicts(self, key: JobKey, versions: dict[str, str]) -> list[tuple[str, dict]]:
        """The job's verdicts by these model versions in this mode (every refresh), as (name, answer), oldest
        first."""
        name = self._name(versions)
        return sorted(((kept, answer) for kept, answer in self.store.predictions(key).items()
                       if kept.partition("@")[0] == name and isinstance(answer, dict)
                       and isinstance(answer.get("card"), dict)),
                      key=lambda pair: pair[1]["card"].get("created") or 0)

    def _kept_as(self, key: JobKey, versions: dict[str, str], name: str, acts: list[dict]) -> str:
        """The name a verdict is kept under: a refresh that acted on nothing replaces the newest verdict when that
        one acted on nothing either and is not the job's first (so a job pending for days keeps its first verdict,
        the one at submission that live accuracy judges, and one per change of words, not one per refresh); any
        other verdict is kept under its own name."""
        if self.refresh_s is None or acts:
            return name
        verdicts = self._verdicts(key, versions)
        newest_name, newest = verdicts[-1] if len(verdicts) > 1 else (None, {})
        return newest_name if newest_name and "@" in newest_name and not newest.get("acts") else name

    def _judged(self, key: JobKey, versions: dict[str, str], now: float) -> bool:
        """Whether the job has a verdict of these model versions already, younger than `refresh_s` where the
        parts asked are refreshed (then it is not asked or acted on)."""
        if not all(k in versions for k in self.required):
            return False
        verdicts = self._verdicts(key, versions)
        return bool(verdicts) and (self.refresh_s is None
                                   or now - (verdicts[-1][1]["card"].get("created") or 0) < self.refresh_s)

    def _stored(self, record: dict) -> tuple[JobKey, dict, dict] | None:
        """The job's key, its record in the store and its canonical row (put there first if the collector has not
        seen the job yet)."""
        submit = record.get("submit_time")
        submit = submit.get("number") if isinstance(submit, dict) else submit
        if not isinstance(submit, int) or submit <= 0:
            log.warning("job %s: no submit time; left out", record.get("job_id"))
            return None
        key = JobKey(self.cluster, record["job_id"], submit)
        stored = self.store.get(key)
        if stored is not None:
            return key, stored, stored["row"]
        try:
            row = {k: v for k, v in from_squeue(record).items() if v is not None}
        except (FieldError, AttributeError, TypeError) as exc:
            log.warning("job %s left out: %s", record.get("job_id"), exc)
            return None
        self.store.put_job(key, row)
        return key, {}, row

    def _acts(self, key: JobKey, record: dict, card: dict, name: str) -> list[dict] | None:
        """The policy's acts for verdict `name`, done (or, dry-run, only audited); None when over the rate limit.
        An act whose command an earlier verdict of the same versions did last (a refresh with the same words) is
        not done again."""
        wanted = []
        if self.policy.comment:
            field_name = "Comment" if self.policy.comment_field == "comment" else "AdminComment"
            text = comment_with(record.get(self.policy.comment_field), card["short"])
            wanted.append((["scontrol", "update", f"JobId={key.job_id}", f"{field_name}={text}"],
                           f"verdict written into {self.policy.comment_field}"))
        reasons = cards.hold_reasons(card, self.policy.hold_threshold) if self.policy.hold else []
        if reasons:
            wanted.append((["scontrol", "hold", str(key.job_id)], "; ".join(reasons)))
        versions = cards.versions(card)
        standing = {act["command"][1]: act["command"] for _, verdict in self._verdicts(key, versions)
                    for act in verdict.get("acts") or [] if act.get("done") is not False}
        wanted = [(command, why) for command, why in wanted if standing.get(command[1]) != command]
        if not self.rate.take(len(wanted)):
            for command, _ in wanted:
                self.series.adapter_actions_refused.labels(adapter=ADAPTER, action=ACTIONS.get(command[1], "other"),
                                                           reason="rate_limit").inc()
            return None
        acts = []
        for command, why in wanted:
            act_id = f"{key.text()} {name} {command[1]}"
            if act_id in self.audit:  # audited before a crash cut the pass short: never acted on twice
                acts.append({"command": command, "why": why, "done": None, "audited_before": True})
                continue
            done = self.slurm.run(*command) is not None if self.act else None
            acts.append({"command": command, "why": why, "done": done})
            outcome = "dry_run" if done is None else "done" if done else "failed"
            self.series.adapter_actions.labels(adapter=ADAPTER, action=ACTIONS.get(command[1], "other"),
                                               outcome=outcome).inc()
            self.audit.write(stamp({
                "id": act_id, "actor": "jobaware slurm adapt", "cluster": key.cluster, "job_id": key.job_id,
                "submit_time": key.submit_time, "action": command[1], "command": command, "why": why,
                "dry_run": not self.act, "done": done, "short": card["short"], "versions": versions,
                "missing": card["missing"]}))
        return acts
