"""What every reader reports: the records it kept, the bad ones it quarantined, and where they were."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_EXAMPLES = 20


@dataclass
class Problem:
    """One bad record: where it was and what was wrong with it."""

    file: str
    line: int | None
    field: str
    value: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: field '{self.field}': {self.reason} (got {self.value!r})"


@dataclass
class ReadReport:
    """What a read saw: rows kept, rows quarantined and the first problems."""

    file: str
    rows: int = 0
    bad_rows: int = 0
    problems: list[Problem] = field(default_factory=list)

    def add(self, problems: list[Problem]) -> None:
        room = MAX_EXAMPLES - len(self.problems)
        self.problems.extend(problems[: max(room, 0)])

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "rows": self.rows,
            "bad_rows": self.bad_rows,
            "problems": [str(p) for p in self.problems],
        }
