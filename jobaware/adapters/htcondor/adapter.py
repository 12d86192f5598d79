"""The hold adapter: new events (the follower) -> each new hold decided over HTTP -> the policy's call -> audit
(-> act).

Order of work, so that a crash neither loses nor repeats a hold: the events of a poll are read; each new hold
is decided and its audit record written (and synced) before any act; the act's answer is audited after it;
only then is the read position (with the window of recent events) committed, at most once a second. A restart reads again from the
last committed position and skips every hold whose id the audit already holds.

Acting needs all of: acting turned on (`--act` or the policy's mode), a model call above the policy's
confidence for a code it allows, a model trained on real logs (the answer's `trained_on.source` `real` or `mixed`,
and, where it says, `evaluated_on` `real`: measured on real holds), a hold that
still stands (a backlog read at start-up may show it resolved further on), and room under the rate limit.
A hold for memory that the policy's `raise_memory` raises (`policy.memory_call`) takes that call instead of the
model's: the policy's own rule, so the model's training does not bar it; the rest stands (one act of the rate).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

from jobaware import metrics
from jobaware.adapters.common.pacing import RateLimit
from jobaware.adapters.htcondor.audit import hold_audit, usage_audit
from jobaware.adapters.htcondor.client import DecisionClient
from jobaware.adapters.htcondor.follower import Event, Follower
from jobaware.adapters.htcondor.memory import HELD_FOR_MEMORY, condor_memory
from jobaware.adapters.htcondor.policy import (
    Actor,
    Call,
    Hold,
    Policy,
    bindings_call,
    command_line,
    memory_call,
    model_call,
    site_rule,
)
from jobaware.adapters.htcondor.usage import terminate_usage
from jobaware.adapters.htcondor.window import Window, seconds
from jobaware.errors import JobawareError
from jobaware.store import JobStore

logger = logging.getLogger("jobaware.adapters.htcondor")

MIN_REQUEST_BYTES = 16 << 10
CLEARS_HOLD = (1, 5, 9, 13)  # execute, terminated, aborted, released: the hold no longer stands
OUTCOMES = {13: "released", 5: "terminated", 9: "removed"}
ADAPTER = "htcondor"  # its `adapter` label in the metrics
ACTIONS = ("release", "remove", "raise")
RESOLVED = "the hold was already resolved further on in the log"
NOT_REAL = "the model was not trained on real logs"
REFUSALS = {RESOLVED: "resolved", NOT_REAL: "not_trained_on_real"}  # why an act was refused (else the rate limit)
PROBE_LOG = ("000 (1.000.000) 2026-01-05 10:00:00 Job submitted from host: <10.0.0.1:9618>\n...\n"
             "012 (1.000.000) 2026-01-05 10:30:00 Job was held.\n"
             "\tTransfer input files failure at execution point slot1@node2 using protocol osdf.\n"
             "\tCode 13 Subcode 256\n...\n")


def trained_on_real(answer: dict | None) -> bool:
    trained = (answer or {}).get("trained_on") or {}
    return trained.get("source") in ("real", "mixed") and trained.get("evaluated_on", "real") == "real"


def refuse_synthetic(client: DecisionClient) -> None:
    """Before acting: ask the service once; a model not trained on real logs is refused with one line."""
    reply = client.decide(1, 0, 0, PROBE_LOG.encode())
    if reply.status != "ok":
        logger.warning("could not ask the hold service before acting (%s); every answer is checked as it comes",
                       reply.reason)
        return
    answer = reply.answer
    if not trained_on_real(answer):
        trained = answer.get("trained_on") or {}
        raise JobawareError(
            f"--act: the hold model (version {answer.get('model_version')}) was trained on "
            f"{trained.get('source', 'unrecorded')} logs ({trained.get('labelled_holds', '?')} labelled holds), not a "
            "site's real logs; it never acts. Train it on your schedd's logs: jobaware pipeline run hold --data "
            "'EVENT_LOG*'")


@dataclass
class Counts:
    events: int = 0
    holds: int = 0
    decided: int = 0
    acted: int = 0
    outcomes: int = 0
    seen_before: int = 0
    lines: list[str] = field(default_factory=list)


class HoldAdapter:
    """Follows event logs and decides every new hold: audited, and acted on only as the policy says. The audit and
    the read position are kept in `store` when given (its stream `htcondor.holds` and a checkpoint), else in the
    file `audit` and the position file `state` (default AUDIT.state.json). `series` (`metrics.ADAPTER`, in a registry
    of its own unless given) counts what each poll did."""

    def __init__(self, logs: list[str | Path], audit: str | Path | None, state: str | Path | None = None, *,
                 store: JobStore | None = None,
                 client: DecisionClient | None = None, policy: Policy | None = None, act: bool = False,
                 actor: Actor | None = None, year: int | None = None, window: Window | None = None,
                 on_line: Callable[[str], None] | None = None, commit_seconds: float = 1.0,
                 series: metrics.Group | None = None):
        self.policy = policy or Policy()
        self.series = series or metrics.Group(metrics.ADAPTER, CollectorRegistry())
        self.acting = act or self.policy.mode == "act"
        if store is not None:  # the audit, the jobs' use and the position in the site's job store
            self.audit, self.usage = hold_audit(store), usage_audit(store)
            position = (store, "htcondor.follow:" + ",".join(sorted(str(Path(log)) for log in logs)))
        else:
            self.audit = hold_audit(audit)
            self.usage = usage_audit(self.audit)  # usage records beside the holds in the file
            position = state or Path(str(audit) + ".state.json")
        self.follower = Follower(logs, position, year=year)
        self.window = window or Window()
        self.window.restore(self.follower.extra.get("window", {}))
        self.client = client
        self.actor = actor if actor is not None or not self.acting else Actor()
        self.rate = RateLimit(self.policy.acts_per_minute)
        self.on_line = on_line or (lambda line: None)
        self.commit_seconds = commit_seconds
        self._committed = 0.0
        self._dirty = False

    def step(self) -> Counts:
        """One poll: read, decide, audit, act, commit (its series counted)."""
        started, outcome = time.monotonic(), "failed"
        try:
            counts = self._step()
            outcome = "ok"
            return counts
        finally:
            self.series.adapter_passes.labels(adapter=ADAPTER, outcome=outcome).inc()
            self.series.adapter_pass_duration_seconds.labels(adapter=ADAPTER).observe(time.monotonic() - started)

    def _step(self) -> Counts:
        counts = Counts()
        events = self.follower.poll()
        if not events:
            return counts
        cleared_after = _cleared_after(events)
        for index, event in enumerate(events):
            times = self.window.run_times(event.job) if event.code == 5 else None  # before the window forgets the job
            seq = self.window.add(event)
            if event.code == 5:
                self._usage(event, *times)
            if event.code == 12:
                self._hold(event, seq, index >= cleared_after.get(event.job, -1), counts)
            elif event.code in OUTCOMES and self.audit.has_subject(_job(event)):
                self._outcome(event, counts)
        counts.events = len(events)
        self._dirty = True
        if time.monotonic() - self._committed >= self.commit_seconds:
            self.commit()
        return counts

    def commit(self) -> None:
        """Make the position and the window durable (at most every `commit_seconds`, and at the end: a restart
        reads again what came after, and the audit's ids keep every hold once)."""
        if self._dirty:
            self.follower.commit({"window": self.window.state()})
            self._committed, self._dirty = time.monotonic(), False
            series = self.series
            series.adapter_cache_written_timestamp_seconds.labels(adapter=ADAPTER).set(time.time())
            series.adapter_cache_entries.labels(adapter=ADAPTER).set(len(self.window.jobs))
            series.adapter_cache_bytes.labels(adapter=ADAPTER).set(self.window.held_bytes)

    def run(self, seconds: float | None = None, once: bool = False, interval: float = 0.2,
            stop: Callable[[], bool] = lambda: False) -> Counts:
        """Poll until `seconds` have passed (or once, or `stop()`); the totals."""
        total = Counts()
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            counts = self.step()
            for name in ("events", "holds", "decided", "acted", "outcomes", "seen_before"):
                setattr(total, name, getattr(total, name) + getattr(counts, name))
            if once or stop() or (deadline is not None and time.monotonic() >= deadline):
                return total
            if not counts.events:
                time.sleep(interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic())))

    def close(self) -> None:
        self.commit()
        self.audit.close()
        if self.client is not None:
            self.client.close()

    # ------------------------------------------------------------ per event
    def _hold(self, event: Event, seq: int, standing: bool, counts: Counts) -> None:
        job = _job(event)
        hold_id = event.identity
        if hold_id in self.audit:
            counts.seen_before += 1
            return
        counts.holds += 1
        starts, holds = self.window.starts_and_holds(event.job)
        hold = Hold(event.cluster, event.proc, event.hold_code, event.hold_subcode, job_starts=starts, holds=holds)
        rule = site_rule(self.policy, hold)
        started = time.monotonic()
        answer, error, sent = self._ask(event, seq)
        counts.decided += answer is not None
        p_release = answer.get("p_release") if answer else None
        model = model_call(self.policy, hold, p_release)
        memory = self._memory(event, seq, hold)
        call = memory["call"] if memory and memory["call"].action == "raise" else model
        action, why = self._licence(call, standing, answer)
        reason = f"jobaware: {call.fired}"
        record = {
            "kind": "hold", "id": hold_id, "logged": time.strftime("%Y-%m-%d %H:%M:%S"), "job": job,
            "cluster": event.cluster, "proc": event.proc, "subproc": event.subproc,
            "hold_time": event.time.isoformat(sep=" "), "hold_code": event.hold_code,
            "hold_subcode": event.hold_subcode, "hold_reason": event.reason, "num_job_starts": hold.job_starts,
            "num_holds": hold.holds, "where": f"{event.path} line {event.line}",
            "p_release": p_release, "model_decision": (answer or {}).get("decision"),
            "decided_by": (answer or {}).get("decided_by"),
            "model_version": (answer or {}).get("model_version"), "trained_on": (answer or {}).get("trained_on"),
            "no_decision": error, "request_bytes": sent, "seconds_to_decide": round(time.monotonic() - started, 3),
            "site_rule": rule.action, "site_rule_fired": rule.fired,
            "recommended": model.action, "fired": model.fired,
            "raise_memory": None if memory is None else {
                "request_mb": memory["request_mb"], "peak_mb": memory["peak_mb"],
                "to_mb": memory["call"].memory_mb, "fired": memory["call"].fired},
            "mode": "act" if self.acting else "dry-run", "action": action, "not_acted_because": why,
            "command": command_line(call, event.cluster, event.proc, reason) if call.action != "none" else None,
            "call": bindings_call(call, event.cluster, event.proc, reason) if call.action != "none" else None,
        }
        self.audit.write(record)
        self.on_line(_line(record))
        self.series.adapter_verdicts.labels(adapter=ADAPTER).inc()
        if answer is None:
            self.series.adapter_deferred.labels(adapter=ADAPTER).inc()
        if action != "none":
            self._act(hold_id, call, event, reason)
            counts.acted += 1
        elif call.action != "none" and why == "dry-run":
            self.series.adapter_actions.labels(adapter=ADAPTER, action=metrics.one_of(call.action, ACTIONS),
                                               outcome="dry_run").inc()
        elif call.action != "none":
            self.series.adapter_actions_refused.labels(adapter=ADAPTER, action=metrics.one_of(call.action, ACTIONS),
                                                       reason=REFUSALS.get(why, "rate_limit")).inc()

    def _memory(self, event: Event, seq: int, hold: Hold) -> dict | None:
        """For a hold the policy's `raise_memory` looks at (on, code 34): the limit its reason names, the job's
        largest peak in the window (this hold included), and the policy's `call` (raise, or none and why)."""
        if self.policy.raise_memory is None or hold.code != HELD_FOR_MEMORY:
            return None
        request = condor_memory(event.raw.decode(errors="replace")).get("request")
        own = b"".join(item[3] for item in self.window.history(event.job) if item[0] <= seq)
        peak = condor_memory(own.decode(errors="replace")).get("peak")
        return {"request_mb": request, "peak_mb": peak, "call": memory_call(self.policy, hold, request, peak)}

    def _ask(self, event: Event, seq: int) -> tuple[dict | None, str | None, int]:
        """The service's answer (or why none) and the size of the log sent. A service whose body limit is below
        the window's (413) is asked again with a quarter of the log, down to MIN_REQUEST_BYTES."""
        if self.client is None:
            return None, "no service given", 0
        budget = self.window.max_bytes
        while True:
            log = self.window.request_log(event.job, seq, budget)
            reply = self.client.decide(event.cluster, event.proc, event.subproc, log)
            if reply.code != 413 or budget <= MIN_REQUEST_BYTES:
                return reply.answer, None if reply.status == "ok" else f"{reply.status}: {reply.reason}", len(log)
            budget = max(budget // 4, MIN_REQUEST_BYTES)

    def _licence(self, call: Call, standing: bool, answer: dict | None) -> tuple[str, str | None]:
        """The action taken, or none and why not."""
        if call.action == "none":
            return "none", call.fired
        if not self.acting:
            return "none", "dry-run"
        if not standing:
            return "none", RESOLVED
        if call.action != "raise" and not trained_on_real(answer):
            return "none", NOT_REAL
        if not self.rate.take():
            return "none", f"rate limit: {self.policy.acts_per_minute} acts per minute"
        return call.action, None

    def _act(self, hold_id: str, call: Call, event: Event, reason: str) -> None:
        record = {"kind": "acted", "id": f"acted:{hold_id}", "hold_id": hold_id, "job": _job(event),
                  "action": call.action}
        if call.action == "raise":
            record["memory_mb"] = call.memory_mb
        try:
            answer = (self.actor.raise_memory(event.cluster, event.proc, call.memory_mb, reason)
                      if call.action == "raise" else self.actor.act(call.action, event.cluster, event.proc, reason))
            record.update(ok=True, answer=answer)
        except Exception as exc:  # noqa: BLE001 - the schedd's refusal is audited; the follower goes on
            record.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:300]}")
            logger.warning("%s of %s failed: %s", call.action, _job(event), record["error"])
        self.audit.write(record)
        self.series.adapter_actions.labels(adapter=ADAPTER, action=metrics.one_of(call.action, ACTIONS),
                                           outcome="done" if record["ok"] else "failed").inc()

    def _usage(self, event: Event, executed: float | None, submitted: float | None, started: float | None) -> None:
        """The terminated job's use (`jobaware.adapters.htcondor.usage`), kept once (store: the stream USAGE_STREAM)."""
        record_id = f"usage:{event.identity}"
        if record_id in self.usage:
            return
        ended = seconds(event.time)
        usage = terminate_usage(event.raw.decode(errors="replace"),
                                elapsed_s=ended - executed if executed is not None else None,
                                wait_s=started - submitted if started is not None and submitted is not None else None)
        self.usage.write({"kind": "usage", "id": record_id, "job": _job(event), "cluster": event.cluster,
                          "proc": event.proc, "subproc": event.subproc, "end_time": event.time.isoformat(sep=" "),
                          "where": f"{event.path} line {event.line}", "usage": usage})

    def _outcome(self, event: Event, counts: Counts) -> None:
        record_id = f"outcome:{event.identity}"
        if record_id in self.audit:
            return
        self.audit.write({"kind": "outcome", "id": record_id, "job": _job(event), "event": OUTCOMES[event.code],
                          "time": event.time.isoformat(sep=" "), "normal": event.normal})
        counts.outcomes += 1


def _job(event: Event) -> str:
    return f"{event.cluster}.{event.proc}.{event.subproc}"


def _cleared_after(events: list[Event]) -> dict[tuple, int]:
    """Per job: the index of its last hold-clearing event in this poll (a hold before it no longer stands)."""
    last: dict[tuple, int] = {}
    for index, event in enumerate(events):
        if event.code in CLEARS_HOLD:
            last[event.job] = index
    return last


def _line(record: dict) -> str:
    p = record["p_release"]
    said = f"P(release) {p:.2f}" if p is not None else "no decision"
    code = f"{record['hold_code']}/{record['hold_subcode']}"
    raised = (record.get("raise_memory") or {}).get("to_mb")
    also = f"; raise_memory: RequestMemory {raised} MB, release" if raised else ""
    done = record["action"] if record["action"] != "none" else f"not acted ({record['not_acted_because']})"
    return (f"hold {record['job']} at {record['hold_time']} code {code}: {said}, recommend {record['recommended']}; "
            f"site rule {record['site_rule']}{also}; {done}")
