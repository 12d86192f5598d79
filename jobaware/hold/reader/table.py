"""How to read (`ReadOptions`), and what a read reports besides the rows (bad records, statistics)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from jobaware.reading import Problem

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
