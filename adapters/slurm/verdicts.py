"""The verdict cache: the adapter's answers, keyed by who asks for what, in a file `job_submit.lua` reads.

A job that does not exist yet gets the verdict of its nearest known request shape. A shape is five numbers
(wall time in minutes, nodes, CPUs, memory per node in MiB, GPUs), each put into a doubling bucket:
`bucket(x) = floor(log2(x + 1))`, so 0 -> 0, 1-2 -> 1, 3-6 -> 2, 7-14 -> 3, ... The distance between two
shapes is the sum over the five dimensions of the difference of their buckets; a dimension the job did not
state counts 0. Lookup: the exact shape for (user, account, partition); else the nearest shape for the same
(user, account, partition); else the nearest shape for (user, partition) under any account; else no verdict.
Ties go to the verdict with more similar jobs, then to the first in the file. The Lua plugins implement the
same rule over the same file (`adapters/slurm/lua/cache.lua`).

File format (text, UTF-8, tab-separated, one record a line):
    jobaware-verdicts  1  GENERATION  CREATED_EPOCH  STALE_AFTER_S  DEFAULT_PARTITION  COUNT
    USER ACCOUNT PARTITION T N C M G  P_FAIL KIND RESOURCE N_SIMILAR N_FAILED N_TIMEOUT MODEL_VERSION CREATED
    ... (COUNT lines)
    end  COUNT
The trailer lets a reader tell a complete file from a truncated one.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import Iterable, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from jobaware.errors import InputError, one_line

MAGIC = "jobaware-verdicts"
FORMAT_VERSION = 1
FIELDS = 16
DIMENSIONS = ("time_minutes", "nodes", "cpus", "mem_mib", "gpus")
KINDS = ("", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")
# Slurm user, account and partition names, model versions: no tab, newline or space can reach the file
NAME = re.compile(r"[A-Za-z0-9._@+-]*")


def bucket(value: float) -> int:
    """The doubling bucket of a non-negative request value: floor(log2(value + 1))."""
    return (int(value) + 1).bit_length() - 1


class Shape(BaseModel):
    """A request shape as raw values; None where the job did not state the value.

    As job_submit.lua reads them from a job descriptor (fill them the same way from squeue records): the time
    limit in minutes; the minimum node count (1 when unset); the job's total CPUs (`min_cpus`: tasks x CPUs per
    task, 1 when unset); memory per node in MiB (`--mem`, or `--mem-per-cpu` x CPUs per node); the GPU count
    written in the TRES request (per node, else per job, else per task; 0 when none).
    """

    time_minutes: float | None = Field(None, ge=0)
    nodes: float | None = Field(None, ge=0)
    cpus: float | None = Field(None, ge=0)
    mem_mib: float | None = Field(None, ge=0)
    gpus: float | None = Field(None, ge=0)

    def buckets(self) -> tuple[int | None, ...]:
        return tuple(None if (v := getattr(self, d)) is None else bucket(v) for d in DIMENSIONS)


def distance(query: tuple[int | None, ...], cached: tuple[int, ...]) -> int:
    """Sum of bucket differences over the dimensions the query states."""
    return sum(abs(q - c) for q, c in zip(query, cached) if q is not None)


class Verdict(BaseModel):
    """What the models said about jobs of one user, account, partition and request shape."""

    user: str = Field(min_length=1, max_length=64)
    account: str = Field("", max_length=64)
    partition: str = Field(min_length=1, max_length=64)
    shape: Shape
    p_fail: float = Field(ge=0, le=1)
    kind: Literal[KINDS] = ""  # the likely way such jobs fail; "" when none stands out
    resource: Literal["", "cpu", "memory", "network", "io"] = ""  # the binding resource, where known
    n_similar: int = Field(0, ge=0)
    n_failed: int = Field(0, ge=0)  # how many of n_similar did not complete (any kind)
    n_timeout: int = Field(0, ge=0)  # how many of n_similar ran out of time
    model_version: str = Field(min_length=1, max_length=64)
    created: int = Field(default_factory=lambda: int(time.time()), ge=0)

    @field_validator("user", "account", "partition", "model_version")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME.fullmatch(value):
            raise ValueError(f"{value!r} has characters outside letters, digits and ._@+-")
        return value

    @field_validator("shape")
    @classmethod
    def _complete(cls, shape: Shape) -> Shape:
        missing = [d for d in DIMENSIONS if getattr(shape, d) is None]
        if missing:
            raise ValueError(f"a cached shape states every dimension; missing {', '.join(missing)}")
        return shape

    def model_post_init(self, _context) -> None:
        if self.n_failed > self.n_similar or self.n_timeout > self.n_failed:
            raise ValueError(f"counts must satisfy n_timeout <= n_failed <= n_similar, got "
                             f"{self.n_timeout}, {self.n_failed}, {self.n_similar}")

    def key(self) -> tuple:
        return (self.user, self.account, self.partition, *self.shape.buckets())

    def line(self) -> str:
        fields = [self.user, self.account, self.partition, *map(str, self.shape.buckets()), f"{self.p_fail:.4f}",
                  self.kind, self.resource, str(self.n_similar), str(self.n_failed), str(self.n_timeout),
                  self.model_version, str(self.created)]
        return "\t".join(fields)


def write_cache(path: str | Path, verdicts: Iterable[Verdict | dict], *, stale_after: int = 3600,
                default_partition: str = "", mode: int = 0o644, now: int | None = None) -> int:
    """Write the cache atomically (a temporary file in the same folder, then rename); return its generation.

    `stale_after`: seconds after which the plugins ignore this file (fail open). `mode`: the file must be
    readable by slurmctld's user (job_submit.lua) and by every user who runs sbatch (cli_filter.lua).
    One verdict per key: a second one for the same key is an error.
    """
    path = Path(path)
    if stale_after <= 0:
        raise InputError(f"stale_after must be positive seconds, got {stale_after}")
    if not NAME.fullmatch(default_partition):
        raise InputError(f"default_partition {default_partition!r} has characters outside letters, digits and ._@+-")
    checked, seen = [], {}
    for i, item in enumerate(verdicts):
        try:
            verdict = item if isinstance(item, Verdict) else Verdict.model_validate(item)
        except (ValidationError, ValueError) as exc:
            raise InputError(f"verdict {i}: {_first_error(exc)}") from None
        if verdict.key() in seen:
            raise InputError(f"verdict {i}: same user, account, partition and shape buckets as verdict "
                             f"{seen[verdict.key()]} ({'/'.join(map(str, verdict.key()))})")
        seen[verdict.key()] = i
        checked.append(verdict)
    checked.sort(key=lambda v: (v.user, v.account, v.partition, v.shape.buckets()))
    generation = _generation(path) + 1
    created = int(time.time()) if now is None else now
    header = [MAGIC, str(FORMAT_VERSION), str(generation), str(created), str(stale_after), default_partition,
              str(len(checked))]
    text = "\t".join(header) + "\n" + "".join(v.line() + "\n" for v in checked) + f"end\t{len(checked)}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return generation


def _first_error(exc: Exception) -> str:
    return one_line(exc) if isinstance(exc, ValidationError) else str(exc)


def _generation(path: Path) -> int:
    """The generation of the cache now at `path`; 0 when there is none or it cannot be read."""
    try:
        with open(path, "rb") as f:
            fields = f.readline(4096).decode("utf-8", "replace").rstrip("\n").split("\t")
        return int(fields[2]) if fields[0] == MAGIC else 0
    except (OSError, IndexError, ValueError):
        return 0


class Cache(BaseModel):
    generation: int
    created: int
    stale_after: int
    default_partition: str
    verdicts: list[Verdict]


def read_cache(path: str | Path) -> Cache:
    """Read a cache written by `write_cache`; a file it did not write is an InputError naming the line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the verdict cache: {exc}") from None
    head = lines[0].split("\t")
    if len(head) != 7 or head[0] != MAGIC or head[1] != str(FORMAT_VERSION):
        raise InputError(f"{path}:1: not a version {FORMAT_VERSION} jobaware verdict cache")
    count = int(head[6])
    if len(lines) != count + 3 or lines[count + 1] != f"end\t{count}" or lines[-1] != "":
        raise InputError(f"{path}: truncated or padded: the header announces {count} verdicts")
    verdicts = []
    for number, line in enumerate(lines[1:count + 1], start=2):
        f = line.split("\t")
        if len(f) != FIELDS:
            raise InputError(f"{path}:{number}: {len(f)} fields, expected {FIELDS}")
        try:
            verdicts.append(_from_fields(f))
        except (ValidationError, ValueError) as exc:
            raise InputError(f"{path}:{number}: {_first_error(exc)}") from None
    return Cache(generation=int(head[2]), created=int(head[3]), stale_after=int(head[4]),
                 default_partition=head[5], verdicts=verdicts)


def _from_fields(f: list[str]) -> Verdict:
    # buckets come back as the smallest raw value of each bucket, which buckets to the same number
    shape = Shape(**{d: 2 ** int(b) - 1 for d, b in zip(DIMENSIONS, f[3:8])})
    return Verdict(user=f[0], account=f[1], partition=f[2], shape=shape, p_fail=float(f[8]), kind=f[9],
                   resource=f[10], n_similar=int(f[11]), n_failed=int(f[12]), n_timeout=int(f[13]),
                   model_version=f[14], created=int(f[15]))


Match = Literal["exact", "nearest", "user+partition"]


def lookup(verdicts: list[Verdict], user: str, account: str, partition: str,
           shape: Shape) -> tuple[Verdict, Match] | None:
    """The verdict for a job by the nearest-shape rule (see the module docstring), or None."""
    query = shape.buckets()
    same = [v for v in verdicts if (v.user, v.account, v.partition) == (user, account, partition)]
    for v in same:
        if v.shape.buckets() == query:
            return v, "exact"
    if same:
        return _nearest(same, query), "nearest"
    wider = [v for v in verdicts if (v.user, v.partition) == (user, partition)]
    return (_nearest(wider, query), "user+partition") if wider else None


def _nearest(candidates: list[Verdict], query: tuple[int | None, ...]) -> Verdict:
    # min() keeps the first of equals: ties go to more similar jobs, then to file order
    return min(candidates, key=lambda v: (distance(query, v.shape.buckets()), -v.n_similar))
