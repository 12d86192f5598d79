"""Where each hold comes from: its log, whether the log is real or generated, and its workflow.

Logs. Every hold is decided from the events of its own log only (the rotations of one log, `EventLog`,
`EventLog.1` ... `EventLog.old`, are one log), as the service sees one log per request: logs of different pools
share no jobs and no clock, and a job id of one may be another's.

Real or generated. A log is generated when jobaware.hold.synth wrote it (its truth file lies beside it).

Workflows, the groups of cross-validation (one workflow's holds never sit on both sides of a split). The
workflow of a hold is, in this order: the one a `workflows.csv` (columns `file`, `workflow`; `file` relative to
the CSV's folder) in the log's folder or a folder above it names for the log (the bundled real logs carry one:
the repository each came from); else the job's submitter (the Owner of its job ad, else the user most often
named by its own hold, release and removal events, `condor` and `root` aside); else the log itself.
"""

from __future__ import annotations

import csv
import json
import re
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from jobaware.hold.labels import decisions
from jobaware.hold.outcomes import Outcomes, fit, hold_ends
from jobaware.hold.synth import truth_path

WORKFLOWS = "workflows.csv"
ROTATION = re.compile(r"\.(old|\d+)$")
SYSTEM_USERS = ("condor", "root")
JOB = ["cluster", "proc", "subproc"]


def log_of(source: str) -> str:
    """The log a file belongs to: its path without a rotation suffix (`.old`, `.1`, ...)."""
    path = Path(source)
    return str(path.with_name(ROTATION.sub("", path.name)))


@cache
def _manifest(folder: Path) -> dict[str, str]:
    path = folder / WORKFLOWS
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as handle:
        return {str((folder / row["file"]).resolve()): row["workflow"] for row in csv.DictReader(handle)
                if row.get("file") and row.get("workflow")}


def named_workflow(source: str) -> str | None:
    """The workflow a `workflows.csv` in the file's folder or above names for it, if any."""
    path = Path(source).resolve()
    for folder in path.parents:
        found = _manifest(folder).get(str(path))
        if found:
            return found
    return None


def is_generated(source: str) -> bool:
    return truth_path(source).exists()


def _owners(events: pd.DataFrame) -> dict[tuple, str]:
    """Per job (cluster, proc, subproc): the Owner of its first job ad, else the user its events name most."""
    ads = events[events["job_ad"].notna()] if "job_ad" in events.columns else events.iloc[:0]
    owner = {}
    for row in ads.itertuples():
        key = (row.cluster, row.proc, row.subproc)
        if key not in owner:
            name = json.loads(row.job_ad).get("Owner")
            if isinstance(name, str) and name.strip('"'):
                owner[key] = name.strip('"')
    named = events[events["by_user"].notna() & ~events["by_user"].isin(SYSTEM_USERS)] \
        if "by_user" in events.columns else events.iloc[:0]
    if len(named):
        common = named.groupby(JOB)["by_user"].agg(lambda s: s.value_counts().index[0])
        for key, name in common.items():
            owner.setdefault(key, name)
    return owner


def by_log(events: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The events of each log (rotations joined), in log order; `events` needs `seq` and `source`."""
    logs = events["source"].astype(object).map({s: log_of(s) for s in pd.unique(events["source"])})
    return {log: part.sort_values("seq", kind="stable").reset_index(drop=True)
            for log, part in events.groupby(logs.to_numpy(), sort=True)}


def workflows(events: pd.DataFrame, table: pd.DataFrame, log: str) -> np.ndarray:
    """The workflow of each decision of `table`, all from one log's `events`, by the module's rule."""
    sources = events["source"].astype(object)
    named = {s: named_workflow(s) for s in pd.unique(sources)}
    source = sources.to_numpy()[np.searchsorted(events["seq"].to_numpy(np.int64), table["hold_seq"].to_numpy(np.int64))]
    owners = _owners(events)
    out = []
    for s, key in zip(source, table[JOB].itertuples(index=False, name=None)):
        owner = owners.get(key)
        out.append(named[s] or (f"user:{owner}" if owner else f"log:{log}"))
    return np.array(out, dtype=object)


def log_holds(events: pd.DataFrame, log: str, nonzero_exit_is_failure: bool = False) -> pd.DataFrame:
    """The decisions of one log's events (jobaware.hold.labels), with what happened next (`action`, `hours`:
    jobaware.hold.outcomes.hold_ends), `log`, `generated` and `workflow`."""
    table = decisions(events, nonzero_exit_is_failure)
    generated = bool(len(events)) and all(is_generated(s) for s in pd.unique(events["source"].astype(object)))
    return table.join(hold_ends(events, table)).assign(log=log, generated=generated,
                                                       workflow=workflows(events, table, log))


def real_outcomes(logs: list[str]) -> Outcomes | None:
    """Outcomes fitted on the holds of real logs (files, globs, folders); None when they hold none."""
    from jobaware.hold.reader import read_events

    events, _ = read_events(logs)
    tables = [log_holds(part, log) for log, part in by_log(events).items()]
    real = [t for t in tables if len(t) and not t["generated"].iloc[0]]
    return fit(pd.concat(real, ignore_index=True)) if real else None
