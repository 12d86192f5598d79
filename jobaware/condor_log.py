"""HTCondor job event logs (the user log, classic text format): the jobs that terminated, with what they asked for
and what they used. The platform's reader for every slice that learns from the end of HTCondor jobs.

A log is a run of events, each a header line `NNN (cluster.proc.subproc) DATE TIME text`, body lines, and a line
`...`. Per job (`cluster.proc`) it keeps the submit event's time and DAG node (`DAG Node: name`), the last execute
event's time, and the terminate event (005): its time, how it ended (`Normal termination (return value N)` or
`Abnormal termination (signal N)`) and its resource table (`Partitionable Resources : Usage Request Allocated`; a
row with two numbers has no usage; a Cpus, Memory or Disk row of anything but two or three numbers of at least 0 is a
problem naming its line, and the job no row). A job that never terminated in the log (still queued, removed, held) is
no row, nor is an event of no job (`-1.-1.-1`). An event counts only once its `...` closes it: one cut off by the next
header or by the end of the file (a log still being written) is a problem, as is text outside any event (named at
the first line of each run of it). The file is streamed twice (the dates of the headers first, for their years,
then the events), and what it keeps is per job, never per event or per line.

Times: the log names no zone; they are read as UTC. Their order and the run times they give hold but across a
daylight-saving change of the schedd's zone (an hour off). ISO dates (`2024-04-30 18:39:44`) carry their year;
year-less dates (`04/30 18:39:44`, the default before 9.0) get the year that puts the file's last year-less date at
or before the file's modification time (in this machine's zone), one year earlier at each turn of the year (a date
more than half a year before the one before it).

Why not htcondor2's `JobEventLog`: it stops at the first event it cannot parse (`ULOG_RD_ERROR`, naming no line,
or silently at a blank line between events), so one damaged event would lose the rest of a log; this reader skips a
damaged event with its file and line.
"""

from __future__ import annotations

import calendar
import os
import re
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from jobaware.reading import Problem

_HEADER_START = re.compile(r"^\d{3} \(")
_HEADER = re.compile(r"^(\d{3}) \((-?\d+)\.(-?\d+)\.(-?\d+)\) (\S+) (\S+)")
_ISO = re.compile(r"^(\d{4})-(\d\d)-(\d\d)$")
_YEARLESS = re.compile(r"^(\d\d)/(\d\d)$")
_CLOCK = re.compile(r"^(\d\d):(\d\d):(\d\d)(?:\.\d+)?(?:Z|([+-])(\d\d):?(\d\d))?$")
_NORMAL = re.compile(r"Normal termination \(return value (-?\d+)\)")
_ABNORMAL = re.compile(r"Abnormal termination \(signal (-?\d+)\)")
_DAG_NODE = re.compile(r"^\s*DAG Node: (\S+)", re.MULTILINE)
_RESOURCE = re.compile(r"^\s*(Cpus|Memory \(MB\)|Disk \(KB\))\s*:((?:\s+\d+(?:\.\d+)?){2,3})\s*(?:\"[^\"]*\")?\s*$",
                       re.MULTILINE)
# any row of those resources, to name one whose numbers the pattern above does not take (negative, 1e30, ...)
_RESOURCE_ROW = re.compile(r"^\s*(Cpus|Memory \(MB\)|Disk \(KB\))\s*:(.*)$", re.MULTILINE)
RESOURCES = {"Cpus": "cpus", "Memory (MB)": "memory_mb", "Disk (KB)": "disk_kb"}
SUBMIT, EXECUTE, TERMINATED = 0, 1, 5
HALF_YEAR_DAYS = 6 * 32  # in units of `_ordinal`
HEAD = 64 * 1024  # bytes `is_event_log` reads


@dataclass(slots=True)
class EndedJob:
    """One job that terminated: its times (seconds since the epoch), how it ended, its resources (`usage`,
    `request`, `allocated`: resource -> value, a resource absent where the log does not say) and where its
    terminate event is."""

    cluster: int
    proc: int
    submit: float
    start: float | None
    end: float
    return_value: int | None
    signal: int | None
    dag_node: str | None
    line: int
    usage: dict[str, float] = field(default_factory=dict)
    request: dict[str, float] = field(default_factory=dict)
    allocated: dict[str, float] = field(default_factory=dict)

    @property
    def job(self) -> str:
        return f"{self.cluster}.{self.proc}"


def is_event_log(path: str | Path) -> bool:
    """Whether a file is an HTCondor event log in the classic text format: its first line an event header, or (a
    rotated log, starting inside an event) an event header among its first HEAD bytes."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEAD).decode("utf-8", "replace").lstrip("\ufeff")
    except OSError:
        return False
    return bool(_HEADER_START.match(head)) or any(_HEADER.match(line) for line in head.splitlines()[1:])


MAX_JOB_NUMBER = 2**31 - 1  # HTCondor's cluster and proc numbers are C ints
MAX_BODY_LINES = 256        # lines of one event's body kept (a submit's or a terminate's; the rest is skipped)
MAX_LINE = 4096             # characters of a body line kept (no line the reader reads is longer)
SHOWN = 200                 # characters of a damaged line a problem keeps
KEPT = (SUBMIT, TERMINATED)  # the events whose bodies are read


@dataclass
class _Event:
    code: int
    cluster: int
    proc: int
    when: float
    line: int
    text: str


def read_ended_jobs(path: str | Path) -> tuple[list[EndedJob], list[Problem]]:
    """The jobs that terminated in one event log, in the order they terminated, and the problems in line order: an
    event whose header cannot be read or that nothing closes, text outside any event, a job terminated with no
    submit event in the log, terminated twice, or ending before its submit (each skipped, named with its file, line
    and field)."""
    path = str(path)
    problems: list[Problem] = []
    submitted: dict[tuple[int, int], tuple[float, str | None]] = {}
    started: dict[tuple[int, int], float] = {}
    ended: dict[tuple[int, int], EndedJob] = {}
    for event in _events(path, _years(_header_dates(path), os.stat(path).st_mtime), problems):
        key = (event.cluster, event.proc)
        if event.cluster < 0 or event.proc < 0:  # an event of no job (-1.-1.-1: the schedd's, DAGMan's)
            continue
        if event.code == SUBMIT:
            node = _DAG_NODE.search(event.text)
            submitted.setdefault(key, (event.when, node.group(1) if node else None))
        elif event.code == EXECUTE:
            started[key] = event.when
        elif event.code == TERMINATED:
            job = f"{event.cluster}.{event.proc}"
            if key in ended:
                problems.append(Problem(path, event.line, "job", job, "job terminated twice in this log"))
            elif key not in submitted:
                problems.append(Problem(path, event.line, "job", job, "no submit event for this job in this log"))
            elif event.when < submitted[key][0]:
                problems.append(Problem(path, event.line, "time", job, "the job terminated before its submit"))
            elif damaged := _damaged_row(event):
                line, resource, numbers = damaged
                problems.append(Problem(path, line, resource, numbers, f"job {job}: expected 2 or 3 numbers of at "
                                                                        "least 0 (usage, request, allocated)"))
            else:
                ended[key] = _ended(event, *submitted[key], started.get(key))
    return list(ended.values()), sorted(problems, key=lambda problem: problem.line)


def _ended(event: _Event, submit: float, node: str | None, start: float | None) -> EndedJob:
    normal, abnormal = _NORMAL.search(event.text), _ABNORMAL.search(event.text)
    job = EndedJob(event.cluster, event.proc, submit, start if start is not None and start <= event.when else None,
                   event.when, int(normal.group(1)) if normal else None, int(abnormal.group(1)) if abnormal else None,
                   node, event.line)
    for name, numbers in _RESOURCE.findall(event.text):
        values = [float(v) for v in numbers.split()]
        resource = RESOURCES[name]
        if len(values) == 3:
            job.usage[resource] = values[0]
        job.request[resource], job.allocated[resource] = values[-2], values[-1]
    return job


def _damaged_row(event: _Event) -> tuple[int, str, str] | None:
    """The first row of the resource table that is not two or three numbers: its line, resource and text."""
    for row in _RESOURCE_ROW.finditer(event.text):
        if not _RESOURCE.fullmatch(row.group(0)):
            line = event.line + 1 + event.text.count("\n", 0, row.start())
            return line, row.group(1), " ".join(row.group(2).split())[:SHOWN]
    return None


def _lines(path: str):
    """(number, line) of a log, text decoded leniently (a byte-order mark dropped)."""
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        yield from enumerate(handle, 1)


def _header_dates(path: str) -> array:
    """The first pass: each header's date, packed (year x 10,000 + month x 100 + day; year 0 where the date has
    none; -1 where it is no date)."""
    dates = array("i")
    for _, line in _lines(path):
        header = _HEADER.match(line)
        if header:
            date = _date(header.group(5))
            dates.append(-1 if date is None else (date[0] or 0) * 10_000 + date[1] * 100 + date[2])
    return dates


_SKIP = "skip"  # the state inside a damaged event: its lines are skipped up to its '...'


def _events(path: str, years: array, problems: list[Problem]):
    """The second pass: every event its `...` closes, with its time (years resolved); problems as they come."""
    current: list | None = None  # [code, cluster, proc, when, line, body lines], or SKIP inside a damaged event
    outside = False  # inside a run of text outside any event, already named
    k = -1
    for number, line in _lines(path):
        header = _HEADER.match(line)
        if header or _HEADER_START.match(line):
            if isinstance(current, list):
                problems.append(Problem(path, current[4], "event", f"{current[1]}.{current[2]}",
                                        "event not closed by '...' before the next one"))
            current, outside = _SKIP, False
            if header is None:
                problems.append(Problem(path, number, "event", line[:SHOWN].rstrip("\n"),
                                        "not an event header with a job id"))
                continue
            k += 1
            code, cluster, proc, _sub, day, clock = header.groups()
            moment, year, date = _clock(clock), years[k], _date(day)
            if max(abs(int(cluster)), abs(int(proc))) > MAX_JOB_NUMBER:
                problems.append(Problem(path, number, "event", f"{cluster}.{proc}", "a job id beyond HTCondor's"))
            elif date is None or moment is None or not _valid(year, date[1], date[2]):
                problems.append(Problem(path, number, "time", f"{day} {clock}", "not an event date and time"))
            else:
                when = calendar.timegm((year, date[1], date[2], 0, 0, 0)) + moment[0] - moment[1]
                current = [int(code), int(cluster), int(proc), float(when), number, []]
        elif line.startswith("..."):
            if isinstance(current, list):
                yield _Event(*current[:5], "".join(current[5]))
            current = None
        elif isinstance(current, list):
            if current[0] in KEPT and len(current[5]) < MAX_BODY_LINES:
                current[5].append(line[:MAX_LINE])
        elif current is None and line.strip() and not outside:
            problems.append(Problem(path, number, "event", line[:SHOWN].rstrip("\n"), "text outside any event"))
            outside = True
    if isinstance(current, list):
        problems.append(Problem(path, current[4], "event", f"{current[1]}.{current[2]}",
                                "event cut off at the end of the log (not closed by '...')"))


def _date(day: str) -> tuple[int | None, int, int] | None:
    """(year or None, month, day) of a header's date, None when it is neither form."""
    iso, yearless = _ISO.match(day), _YEARLESS.match(day)
    if iso:
        return int(iso.group(1)), int(iso.group(2)), int(iso.group(3))
    if yearless:
        return None, int(yearless.group(1)), int(yearless.group(2))
    return None


def _clock(clock: str) -> tuple[int, int] | None:
    """(seconds into the day, the zone's offset in seconds) of a header's time, None when it is not one."""
    match = _CLOCK.match(clock)
    if not match:
        return None
    h, m, s, sign, oh, om = match.groups()
    if int(h) > 23 or int(m) > 59 or int(s) > 60:
        return None
    offset = (int(oh) * 3600 + int(om) * 60) * (-1 if sign == "-" else 1) if sign else 0
    return int(h) * 3600 + int(m) * 60 + int(s), offset


def _valid(year: int, month: int, day: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1] if 1970 <= year <= 2100 else False


def _years(dates: array, written: float) -> array:
    """Each packed date's year (`_header_dates`): an ISO date's own; a year-less date's by the module's rule, walking
    back from the latest known date (the next ISO date, else the file's modification time, which no date may pass)."""
    mtime = time.localtime(written)
    year, later, tolerance = mtime.tm_year, _ordinal(mtime.tm_mon, mtime.tm_mday), 0
    years = array("i", bytes(4 * len(dates)))
    for k in range(len(dates) - 1, -1, -1):
        packed = dates[k]
        if packed >= 0:
            month, day = packed // 100 % 100, packed % 100
            if packed >= 10_000:
                year, later, tolerance = packed // 10_000, _ordinal(month, day), HALF_YEAR_DAYS
            else:
                year -= _ordinal(month, day) > later + tolerance
                later, tolerance = _ordinal(month, day), HALF_YEAR_DAYS
        years[k] = year
    return years


def _ordinal(month: int, day: int) -> int:
    return month * 32 + day
