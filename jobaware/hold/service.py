"""Request handling of `POST /hold-decision` as plain functions (`serving/hold.py` only wires them).

A request names the held job and gives the event log around it, either as text or, where the service was started
with a log folder (`JOBAWARE_HOLD_LOG_DIR`), as the path of a log in that folder:
  {"cluster": 14736943, "proc": 0, "subproc": 0, "log": "000 (14736943.000.000) ...\\n...\\n"}
  {"cluster": 14736943, "proc": 0, "path": "ap40/EventLog"}
Reading files on the service's host is opt-in: without a log folder a `path` is refused, saying so, and the OpenAPI
document shows no `path`. `Limits` are what the service accepts (`JOBAWARE_HOLD_*`); `request_model` declares the
body under them, bounds and all (`HoldRequest`: under the limits read at start); errors are `InputError`s whose
message starts with the JSON path of the bad field, a size over a limit a `TooLargeError`. A log with a bad record,
a job the log does not know, and a job that is not on hold at the end of the log are refused, each saying which.
The answer (`hold_decision`): P(release), the decision, the hold reason in words (and as the log wrote it), who
decided (`decided_by`: the decision-maker the model serves, a plain policy when nothing beat it on real holds)
and why (`why`), what drove this decision (`reasons`: the hold code and how real holds of it ended, how this
log's earlier holds ended, how often this job and its siblings were held and what happened after, how long it is
held), the model version and what it was trained on.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import pyarrow as pa
from pydantic import ConfigDict, Field, model_validator
from pydantic_settings import SettingsConfigDict

from jobaware import fit
from jobaware.bodies import Body
from jobaware.bodies import Limits as BaseLimits
from jobaware.errors import InputError, TooLargeError
from jobaware.hold.labels import current_holds, decisions
from jobaware.hold.reader import EventLogReader, ReadOptions, Source, read_events, to_frame
from jobaware.hold.schema import CONTRACT, SCHEMA
from jobaware.model import Served
from jobaware.outputs import atomic_text
from jobaware.prediction import PredictionSummary
from jobaware.reading import write_quarantine

MAX_ID = 2**31 - 1
JobNumber = Annotated[int, Field(ge=0, le=MAX_ID)]
MAX_REASON_CHARS = 1000  # the hold reason echoed in an answer: longer ones are cut, with a marker that says so


class Limits(BaseLimits):
    """What the service accepts (JOBAWARE_HOLD_LOG_DIR, JOBAWARE_HOLD_MAX_LOG_BYTES, JOBAWARE_HOLD_MAX_PATH_CHARS):
    the folder a `path` must lie in (none: no path is read), the size of a log and the length of a path."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_HOLD_")
    log_dir: Path | None = None
    max_log_bytes: int = Field(32 << 20, ge=1)
    max_path_chars: int = Field(4096, ge=1)


@dataclass(frozen=True)
class CheckedRequest:
    """A body checked beyond its model: the log as bytes, or the resolved path of a log file."""

    cluster: int
    proc: int
    subproc: int
    log: bytes | None
    path: Path | None


@cache
def request_model(limits: Limits) -> type[Body]:
    """The body of `POST /hold-decision` under `limits`: a path only where the service reads log files."""
    sources = ("log", "path") if limits.log_dir is not None else ("log",)

    class HoldRequestBody(Body):
        model_config = ConfigDict(title="HoldRequest",
                                  json_schema_extra={"oneOf": [{"required": [field]} for field in sources]})

        @model_validator(mode="before")
        @classmethod
        def _path_only_with_a_folder(cls, data):
            if isinstance(data, dict) and "path" in data and limits.log_dir is None:
                raise ValueError("path: this service reads no log files (it was started without "
                                 "JOBAWARE_HOLD_LOG_DIR); send the log text as `log`")
            return data

        cluster: JobNumber = Field(description="the held job's cluster id")
        proc: JobNumber = Field(description="its proc id")
        subproc: JobNumber = Field(0, description="its subproc id")
        log: str | None = Field(None, max_length=limits.max_log_bytes, description=(
            f"the event log around it, as text (at most {limits.max_log_bytes:,} bytes in UTF-8)"))
        if limits.log_dir is not None:
            path: str | None = Field(None, min_length=1, max_length=limits.max_path_chars,
                                     description="or the path of a log, relative to the service's log folder")

        @model_validator(mode="after")
        def _one_source(self) -> HoldRequestBody:
            if (self.log is None) == (getattr(self, "path", None) is None):
                raise ValueError("log: give exactly one of log (the event-log text) and path (a log the service "
                                 "may read)" if len(sources) == 2 else "log: give the event-log text")
            return self

    return HoldRequestBody


LIMITS = Limits.load()
HoldRequest = request_model(LIMITS)


# Why a body valid by the OpenAPI document may still be refused (the reason with numbers and quoted values blanked as
# #): what no JSON Schema can state. The log must be an event log in which the job is on hold.
UNSTATABLE = (r"^log: # bad record", r"^log: no event in the log", r"^cluster: job [#.]+ (has no event|is not on hold)")


def checked(body, limits: Limits) -> CheckedRequest:
    """A body of `request_model(limits)` checked beyond its model: the log's size in bytes, the path inside the
    log folder; raise InputError naming the field."""
    if body.log is not None:
        data = body.log.encode("utf-8", "replace")
        if len(data) > limits.max_log_bytes:
            raise TooLargeError(f"log: {len(data):,} bytes, more than the limit of {limits.max_log_bytes:,}")
        return CheckedRequest(body.cluster, body.proc, body.subproc, data, None)
    path = body.path
    if "\x00" in path:
        raise InputError("path: contains a NUL character")
    root = limits.log_dir.resolve()
    try:
        target = (root / path).resolve()
        if not target.is_relative_to(root):
            raise InputError(f"path: {path!r:.200} lies outside the service's log folder")
        if not target.is_file():
            raise InputError(f"path: {path!r:.200} is not a file in the service's log folder")
        size = target.stat().st_size
    except OSError as error:  # a name too long for the file system, a loop of links, no permission
        raise InputError(f"path: {path!r:.200} cannot be read: {error.strerror or error}") from None
    if size > limits.max_log_bytes:
        raise TooLargeError(f"path: {size:,} bytes, more than the limit of {limits.max_log_bytes:,}")
    return CheckedRequest(body.cluster, body.proc, body.subproc, None, target)


def read_request_log(request: CheckedRequest, options: ReadOptions | None = None) -> pd.DataFrame:
    """The request's log as events; a log with any bad record, or with no event, is refused."""
    where = "log" if request.log is not None else "path"
    source = Source.text(request.log, "log") if request.log is not None else Source.file(request.path)
    events, report = read_events([source], options)
    if report.bad_rows:
        first = report.problems[0]
        raise InputError(f"{where}: {report.bad_rows} bad record(s); the first at line {first.line}: {first.reason}")
    if events.empty:
        raise InputError(f"{where}: no event in the log")
    return events


def cut(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """`text`, or its first characters and a marker with the length, within `limit` characters."""
    if len(text) <= limit:
        return text
    marker = f"... [cut: {len(text):,} characters in all]"
    return text[: limit - len(marker)] + marker


def decide(bundle, request: CheckedRequest, version: str, options: ReadOptions | None = None,
           trained: dict | None = None) -> dict:
    """The decision for the request's held job, as a plain JSON-ready dict (no NaN); `fit` says where the log is
    unlike what the model was `trained` on (its profile, `jobaware.fit`)."""
    events = read_request_log(request, options)
    job_id = f"{request.cluster}.{request.proc}.{request.subproc}"
    is_mine = ((events["cluster"] == request.cluster) & (events["proc"] == request.proc)
               & (events["subproc"] == request.subproc)).to_numpy()
    if not is_mine.any():
        raise InputError(f"cluster: job {job_id} has no event in the log")
    table = decisions(events)
    standing = current_holds(events, table) if len(table) else np.zeros(0, bool)
    standing &= ((table["cluster"] == request.cluster) & (table["proc"] == request.proc)
                 & (table["subproc"] == request.subproc)).to_numpy()
    if not standing.any():
        last = events[is_mine].sort_values("seq").iloc[-1]
        raise InputError(f"cluster: job {job_id} is not on hold: its last event is {int(last['event_code']):03d} "
                         f"{last['event_name']} at {pd.Timestamp(last['time']).isoformat(sep=' ')}")
    hold_seq = int(table.loc[standing, "hold_seq"].iloc[-1])
    row = bundle.predict(events.assign(decide=events["seq"] == hold_seq)).iloc[0]
    reason = events.loc[events["seq"] == hold_seq, "reason"].iloc[0]
    p_release = float(row["p_release"])
    return {
        "cluster": request.cluster,
        "proc": request.proc,
        "subproc": request.subproc,
        "hold_time": pd.Timestamp(row["hold_time"]).isoformat(sep=" "),
        "hold_code": None if math.isnan(row["hold_code"]) else int(row["hold_code"]),
        "hold_subcode": None if math.isnan(row["hold_subcode"]) else int(row["hold_subcode"]),
        "hold_reason": row["hold_reason"],
        "hold_reason_text": None if pd.isna(reason) else cut(str(reason)),
        "p_release": p_release if math.isfinite(p_release) else None,
        "decision": str(row["decision"]),
        "threshold": float(bundle.threshold),
        "decided_by": str(row["decided_by"]),
        "why": bundle.why,
        "reasons": str(row["reasons"]),
        "model_version": str(version),
        "trained_on": dict(bundle.trained_on) or {"source": "unrecorded"},
        "fit": fit.answer_flags(trained, version, fit.numeric_columns(events)),
    }


def hold_decision(body, model: Served, limits: Limits = LIMITS) -> dict:
    """P(release), the decision and the hold reason for a held job, from the event log around it."""
    return decide(model.bundle, checked(body, limits), model.version, trained=model.profile)


def predict_file(inputs: list[str], output: str | Path, model, progress=None) -> PredictionSummary:
    """Decide every hold still standing at the end of the event logs (files, globs, folders); one JSON object
    per line in `output` (`-`: standard output), bad records in `<output>.quarantine.jsonl`. The logs are read
    before `model()` loads the model, and only when a hold stands is it loaded (no hold standing: no decision,
    and the summary says why)."""
    quarantined: list[dict] = []
    reader = EventLogReader(inputs, strict=False, progress=progress,
                            on_bad=lambda record: quarantined.append(json.loads(record.as_json())))
    events = to_frame(pa.Table.from_batches(list(reader.batches()), schema=SCHEMA))
    if not len(events):
        raise InputError(f"{', '.join(map(str, inputs))}: no HTCondor event read ({reader.report.bad_rows:,} bad "
                         "record(s))" + (f"; first: {reader.report.problems[0]}" if reader.report.problems else ""))
    table = decisions(events)
    standing = int(current_holds(events, table).sum()) if len(table) else 0
    bundle, version = model() if standing else (None, None)
    decided = bundle.predict(events) if standing else pd.DataFrame(columns=["decision"])
    with atomic_text(output) as handle:
        for row in decided.itertuples(index=False):
            record = row._asdict()
            record["hold_time"] = record["hold_time"].isoformat(sep=" ")
            for key in ("hold_code", "hold_subcode"):
                record[key] = None if record[key] != record[key] else int(record[key])
            record["model_version"] = version
            handle.write(json.dumps(record) + "\n")
    reason = None if standing else (f"no hold stands at the end of the logs ({len(events):,} events, {len(table):,} "
                                    "hold(s), every one released, removed or run since); predict decides standing holds")
    return PredictionSummary(predictions=len(decided), model_version=version, output=str(output),
                             bad_records=reader.report.bad_rows, quarantine=write_quarantine(output, quarantined),
                             problems=[str(p) for p in reader.report.problems],
                             counts={"events": reader.report.rows, "remove": int((decided["decision"] == "remove").sum())},
                             input_profile=fit.describe({CONTRACT: events}, inputs), reason=reason)
