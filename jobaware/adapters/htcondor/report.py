"""`jobaware report holds`: an audit summed up by week, the model beside the site's rule and what really happened.

For every audited hold: what the model recommended (release, remove, or nothing: no answer, between the
thresholds, a manual code), what the site's rule would have done, whether anything was acted, and, from the
events the follower saw afterwards, how the hold really ended (like the training labels: the job's first
termination or removal after the hold; a normal termination means releasing was right, anything else that
removing was). Released jobs that went on hold again are counted with the hours between the release and the
next hold (a slot each: the slot-hours a re-hold wasted). A call is right when it matches the real ending
(`model right`: the policy's call from the model's answer; `decision right`: the model's own decision at its
threshold, whatever the policy's confidence bounds);
`release all` is the blanket periodic release OSG advises against, for reference.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path

from jobaware.adapters.htcondor.audit import hold_records
from jobaware.errors import InputError
from jobaware.store import JobStore

COLUMNS = ("week", "holds", "model release", "model remove", "model none", "no decision", "rule release",
           "rule remove", "rule none", "acted", "ended", "model right", "decision right", "rule right", "release-all right",
           "released", "re-held after release", "slot-hours wasted")


def _week(time: str) -> str:
    year, week, _ = dt.datetime.fromisoformat(time).isocalendar()
    return f"{year}-W{week:02d}"


def _hours(start: str, end: str) -> float:
    return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds() / 3600


def hold_outcomes(records: list[dict]) -> list[dict]:
    """Each hold record with `ended` (release / remove / None), `released_at` and `reheld_at` from what followed."""
    by_job: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        if record.get("kind") in ("hold", "outcome"):
            by_job[record["job"]].append(record)
    holds = []
    for events in by_job.values():
        for i, record in enumerate(events):
            if record["kind"] != "hold":
                continue
            ended = released_at = reheld_at = None
            for later in events[i + 1:]:
                if later["kind"] == "hold":
                    if released_at is not None and reheld_at is None:
                        reheld_at = later["hold_time"]
                    continue
                if later["event"] == "released" and released_at is None and reheld_at is None:
                    released_at = later["time"]
                elif later["event"] in ("terminated", "removed"):
                    ended = "release" if later["event"] == "terminated" and later.get("normal") else "remove"
                    break
            holds.append({**record, "ended": ended, "released_at": released_at, "reheld_at": reheld_at})
    return holds


def summarize(audit: str | Path | JobStore, where: str | None = None) -> list[dict]:
    """One row per week of hold times, and a last row `all` (from an audit file, or a job store's audit)."""
    records = list(hold_records(audit))
    if not any(r["kind"] == "hold" for r in records):
        raise InputError(f"{where or audit}: no hold recorded in this audit")
    acted = {r["hold_id"] for r in records if r["kind"] == "acted" and r.get("ok")}
    rows: dict[str, dict] = {}
    for hold in hold_outcomes(records):
        for week in (_week(hold["hold_time"]), "all"):
            row = rows.setdefault(week, dict.fromkeys(COLUMNS, 0) | {"week": week, "slot-hours wasted": 0.0})
            row["holds"] += 1
            row[f"model {hold['recommended']}"] += 1
            row["no decision"] += hold["p_release"] is None
            row[f"rule {hold['site_rule']}"] += 1
            row["acted"] += hold["id"] in acted
            if hold["ended"] is not None:
                row["ended"] += 1
                row["model right"] += hold["recommended"] == hold["ended"]
                row["decision right"] += hold.get("model_decision") == hold["ended"]
                row["rule right"] += hold["site_rule"] == hold["ended"]
                row["release-all right"] += hold["ended"] == "release"
            if hold["released_at"] is not None:
                row["released"] += 1
                if hold["reheld_at"] is not None:
                    row["re-held after release"] += 1
                    row["slot-hours wasted"] += _hours(hold["released_at"], hold["reheld_at"])
    for row in rows.values():
        row["slot-hours wasted"] = round(row["slot-hours wasted"], 2)
    weeks = sorted(k for k in rows if k != "all")
    return [rows[k] for k in weeks] + [rows["all"]]
