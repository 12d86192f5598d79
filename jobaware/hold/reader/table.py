"""The canonical events table (`condor_events`), how to read, and what a read reports besides the rows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from jobaware.reading import Problem

CONTRACT = "condor_events"
SCHEMA = pa.schema([
    ("seq", pa.int64()),
    ("source", pa.string()),
    ("line", pa.int64()),
    ("event_code", pa.int16()),
    ("event_name", pa.string()),
    ("cluster", pa.int64()),
    ("proc", pa.int64()),
    ("subproc", pa.int64()),
    ("time", pa.timestamp("ms")),
    ("utc", pa.bool_()),
    ("text", pa.string()),
    ("code", pa.int32()),
    ("subcode", pa.int32()),
    ("reason", pa.string()),
    ("via", pa.string()),
    ("by_user", pa.string()),
    ("terminated_normally", pa.bool_()),
    ("return_value", pa.int32()),
    ("signal", pa.int32()),
    ("direction", pa.string()),
    ("stage", pa.string()),
    ("job_ad", pa.string()),
])
MAX_QUARANTINE_TEXT = 2000


class ReadOptions(BaseModel):
    """How to read: the year of year-less dates, the block size and the segment threshold."""

    model_config = ConfigDict(extra="forbid")

    year: int | None = Field(default=None, ge=1970, le=2200, strict=True)
    block_bytes: int = Field(default=8 << 20, ge=1 << 12, le=1 << 30, strict=True)
    max_event_bytes: int = Field(default=64 << 20, ge=1 << 12, le=1 << 31, strict=True)
    backstep_seconds: float = Field(default=0.0, ge=0.0, le=366 * 86400.0, allow_inf_nan=False)


@dataclass
class BadRecord:
    file: str
    line: int
    reason: str
    text: str

    def problem(self) -> Problem:
        first = self.text.split("\n", 1)[0]
        return Problem(self.file, self.line, "event", first[:200], self.reason)

    def as_json(self) -> str:
        return json.dumps({"file": self.file, "line": self.line, "reason": self.reason,
                           "text": self.text[:MAX_QUARANTINE_TEXT]})


@dataclass
class ReadStats:
    """What a read saw besides good and bad records: the sources in reading order, duplicates, segments."""

    files: list[str] = field(default_factory=list)
    duplicates: int = 0
    segments: int = 0
