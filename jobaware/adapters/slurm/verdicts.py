"""The verdict cache: the adapter's verdicts, keyed by who asks for what, in a file the Slurm plugins read.

A job that does not exist yet gets the verdict of its nearest known request shape. A shape is five numbers
(wall time in minutes, nodes, CPUs, memory per node in MiB, GPUs), each put into a doubling bucket:
`bucket(x) = floor(log2(x + 1))`, so 0 -> 0, 1-2 -> 1, 3-6 -> 2, 7-14 -> 3, ... The distance between two
shapes is the sum over the five dimensions of the difference of their buckets; a dimension the job did not
state counts 0. Lookup: the exact shape for (user, account, partition); else the nearest shape for the same
(user, account, partition); else the nearest shape for (user, partition) under any account; else no verdict.
Ties go to the verdict with more similar jobs, then to the first in the file. A verdict older than the header's
MAX_AGE when it is read is left out. The Lua plugins implement the same rule over the same file
(`adapters/slurm/lua/cache.lua`).

A verdict holds text, not numbers: what the card parts say (`jobaware.card`), so that a capability joins the
plugins by its registration alone. COMMENT is the parts' words (`job_submit.lua` writes `jobaware: COMMENT` into the
job's comment, with `; nearest shape` or `; user+partition shape` when the shape was not cached exactly); ADVICE
is the parts' advice, empty for none (`cli_filter.lua` prints `jobaware: ADVICE`, after filling in the values the
job asks for: `{time_minutes}`, `{nodes}`, `{cpus}`, `{mem_mib}`, `{gpus}`; words in square brackets around such
a name are left out when the job does not state the value).

File format 2 (text, UTF-8, tab-separated, one record a line):
    jobaware-verdicts  2  GENERATION  CREATED_EPOCH  STALE_AFTER_S  DEFAULT_PARTITION  COUNT  MAX_AGE_S
    USER ACCOUNT PARTITION T N C M G  N_SIMILAR  CREATED  COMMENT  ADVICE
    ... (COUNT lines)
    end  COUNT
CREATED of a line is when its verdict was made (a card's time), CREATED_EPOCH when the file was written: the
adapter rewrites the file only after a pass that could judge every job it had to, so a file older than
STALE_AFTER_S means the verdicts are not being kept up (the plugins then use none). The trailer lets a reader
tell a complete file from a truncated one.

Beside the file, one file per user, so that a plugin reads only the submitting user's verdicts (`cli_filter.lua`
runs in every sbatch): `PATH.users` is a symbolic link to a folder `.NAME.users.GENERATION` that holds `USER.tsv`
for each user with verdicts, in the same format (the same header, with that user's COUNT, and that user's lines),
`#UID.tsv`, a link to it, for each user this host knows (cli_filter.lua finds the user so when $USER is unset), and
`#header.tsv`, the header with no lines (COUNT 0), where the CLI filters read the cache's state.

Who reads what: the writer (the adapter, as SlurmUser) owns every file. The cache file is the writer's alone (0600:
job_submit.lua runs in slurmctld as SlurmUser); `#header.tsv` and the folder are everyone's (0644, 0755); each
`USER.tsv` is 0600 with a POSIX ACL entry that lets that user read it (an owner may set ACLs on its own files), so
that the CLI filter, which runs as the submitting user, reads that user's verdicts and no other's, whatever $USER
says. On a file system without POSIX ACLs the user files are made 0644 instead, and a warning says so.
The folder is complete before the link is switched to it (atomically) and before the file itself is replaced, so
a reader that finds the file finds the users of the same or a newer generation; the folder before is kept (a
reader may have it open) and older ones are removed. The user files are not synced one by one (hundreds per pass):
after a power loss a torn one lacks its trailer, is refused like a torn cache, and the next pass rewrites it.
Format 1 (the numbers P_FAIL KIND RESOURCE N_FAILED N_TIMEOUT
MODEL_VERSION in place of the texts) is refused by the plugins of this version: render them again
(`jobaware slurm plugins`) when the adapter is upgraded.
"""

from __future__ import annotations

import errno
import logging
import os
import pwd
import re
import shutil
import struct
import tempfile
import time
from pathlib import Path
from typing import Iterable, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from jobaware.errors import InputError, one_line

MAGIC = "jobaware-verdicts"
FORMAT_VERSION = 2
FIELDS = 12
HEADER_FIELDS = 8
DIMENSIONS = ("time_minutes", "nodes", "cpus", "mem_mib", "gpus")
# Slurm user, account and partition names: no tab, newline or space can reach the file
NAME = re.compile(r"[A-Za-z0-9._@+-]*")
TEXT = re.compile(r"[^\t\n\r\x00-\x1f\x7f]*")  # a comment or advice: one line, no tab, no control character
COMMENT_MAX, ADVICE_MAX = 200, 1000
HEADER_FILE = "#header.tsv"  # in the users folder; "#" is in no user name
CACHE_MODE, HEADER_MODE, FOLDER_MODE, USER_MODE = 0o600, 0o644, 0o755, 0o600
log = logging.getLogger(__name__)


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
    """What the card parts said about jobs of one user, account, partition and request shape."""

    user: str = Field(min_length=1, max_length=64)
    account: str = Field("", max_length=64)
    partition: str = Field(min_length=1, max_length=64)
    shape: Shape
    n_similar: int = Field(0, ge=0)  # finished jobs of this shape in the store (ties go to more)
    created: int = Field(default_factory=lambda: int(time.time()), ge=0)  # when the verdict was made
    comment: str = Field(min_length=1, max_length=COMMENT_MAX)  # the parts' words
    advice: str = Field("", max_length=ADVICE_MAX)  # the parts' advice; "" for none

    @field_validator("user", "account", "partition")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME.fullmatch(value):
            raise ValueError(f"{value!r} has characters outside letters, digits and ._@+-")
        return value

    @field_validator("comment", "advice")
    @classmethod
    def _text(cls, value: str) -> str:
        if not TEXT.fullmatch(value):
            raise ValueError("a tab, line break or control character cannot be cached")
        return value

    @field_validator("shape")
    @classmethod
    def _complete(cls, shape: Shape) -> Shape:
        missing = [d for d in DIMENSIONS if getattr(shape, d) is None]
        if missing:
            raise ValueError(f"a cached shape states every dimension; missing {', '.join(missing)}")
        return shape

    def key(self) -> tuple:
        return (self.user, self.account, self.partition, *self.shape.buckets())

    def line(self) -> str:
        fields = [self.user, self.account, self.partition, *map(str, self.shape.buckets()), str(self.n_similar),
                  str(self.created), self.comment, self.advice]
        return "\t".join(fields)


def write_cache(path: str | Path, verdicts: Iterable[Verdict | dict], *, stale_after: int = 3600,
                max_age: int = 30 * 86_400, default_partition: str = "", now: int | None = None) -> int:
    """Write the cache atomically (a temporary file in the same folder, then rename); return its generation.

    `stale_after`: seconds after which the plugins ignore this file (fail open); `max_age`: seconds after which
    they ignore a verdict (its own `created`). The caller must be slurmctld's user (SlurmUser), who alone reads the
    cache file; each user reads only their own file (see the module docstring).
    One verdict per key: a second one for the same key is an error.
    """
    path = Path(path)
    if stale_after <= 0 or max_age <= 0:
        raise InputError(f"stale_after and max_age must be positive seconds, got {stale_after} and {max_age}")
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
              str(len(checked)), str(max_age)]
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_users(path, generation, header, checked)
    _replace(path, _text(header, checked), CACHE_MODE, sync=True)
    return generation


def users_folder(path: str | Path) -> Path:
    """The link to the folder of per-user files beside the cache at `path` (`PATH.users/USER.tsv`)."""
    path = Path(path)
    return path.with_name(path.name + ".users")


def _text(header: list[str], verdicts: list[Verdict]) -> str:
    head = header[:6] + [str(len(verdicts))] + header[7:]
    return "\t".join(head) + "\n" + "".join(v.line() + "\n" for v in verdicts) + f"end\t{len(verdicts)}\n"


def _replace(path: Path, text: str, mode: int, sync: bool) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_users(path: Path, generation: int, header: list[str], verdicts: list[Verdict]) -> None:
    """One file per user and the header file in a new generation folder, then the `.users` link switched to it;
    older folders go."""
    prefix = f".{path.name}.users."
    folder = path.parent / f"{prefix}{generation}"
    shutil.rmtree(folder, ignore_errors=True)  # a leftover of a write that died half-way
    folder.mkdir()
    by_user: dict[str, list[Verdict]] = {}
    for v in verdicts:
        by_user.setdefault(v.user, []).append(v)
    _create(folder / HEADER_FILE, _text(header, []), HEADER_MODE)
    without_acls = []
    for user, theirs in by_user.items():
        try:
            uid = pwd.getpwnam(user).pw_uid
        except KeyError:
            uid = None  # not a user on this host: the file stays the writer's alone
        if not _create(folder / f"{user}.tsv", _text(header, theirs), USER_MODE, uid):
            without_acls.append(user)
        if uid is not None:
            try:  # "#" is in no user name: the link by user id cannot meet a user's file
                (folder / f"#{uid}.tsv").symlink_to(f"{user}.tsv")
            except FileExistsError:
                pass  # a uid that two names share
    if without_acls:
        log.warning("%s: this file system refuses POSIX ACLs, so the verdict files of %d users are readable by every "
                    "user (0644)", folder, len(without_acls))
    os.chmod(folder, FOLDER_MODE)
    link = users_folder(path)
    before = os.readlink(link) if link.is_symlink() else None
    tmp = path.parent / f"{prefix}link.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(folder.name)
    os.replace(tmp, link)
    for old in path.parent.glob(f"{prefix}*"):
        if old.name not in (folder.name, before) and old.name[len(prefix):].isdigit():
            shutil.rmtree(old, ignore_errors=True)


def _create(path: Path, text: str, mode: int, reader: int | None = None) -> bool:
    """A new file at `path` holding `text`, with `mode`; with `reader` (a uid), a POSIX ACL entry lets that user read
    it. False when the file system refuses ACLs: the file is then made 0644."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(text.encode("utf-8"))
        f.flush()
        os.fchmod(fd, mode)
        if reader is None:
            return True
        try:
            os.setxattr(fd, ACL_XATTR, acl_bytes([(ACL_USER_OBJ, 6, NO_ID), (ACL_USER, 4, reader),
                                                  (ACL_GROUP_OBJ, 0, NO_ID), (ACL_MASK, 4, NO_ID),
                                                  (ACL_OTHER, 0, NO_ID)]))
        except OSError as exc:
            if exc.errno != errno.EOPNOTSUPP:
                raise
            os.fchmod(fd, 0o644)
            return False
    return True


# POSIX ACLs as Linux stores them in the extended attribute system.posix_acl_access (include/uapi/linux/
# posix_acl_xattr.h): a little-endian version 2, then (tag, permission bits, id) entries sorted by tag and id. Written
# by hand: the library made for it (pylibacl) is not among this project's dependencies, and the format is 8 bytes an
# entry.
ACL_XATTR = "system.posix_acl_access"
ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
NO_ID = 0xFFFFFFFF
_ACL_HEAD, _ACL_ENTRY = struct.Struct("<I"), struct.Struct("<HHI")


def acl_bytes(entries: list[tuple[int, int, int]]) -> bytes:
    """The extended attribute's value for (tag, permission bits, id) entries."""
    return _ACL_HEAD.pack(2) + b"".join(_ACL_ENTRY.pack(*e) for e in sorted(entries))


def acl_entries(path: str | Path) -> list[tuple[int, int, int]] | None:
    """The (tag, permission bits, id) entries of the file's access ACL (links followed); None when it has none."""
    try:
        value = os.getxattr(path, ACL_XATTR)
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.EOPNOTSUPP):
            return None
        raise
    if len(value) < 4 or (len(value) - 4) % 8 or _ACL_HEAD.unpack_from(value)[0] != 2:
        raise ValueError(f"{path}: not a version 2 POSIX ACL")
    return [_ACL_ENTRY.unpack_from(value, offset) for offset in range(4, len(value), 8)]


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
    max_age: int
    verdicts: list[Verdict]

    def current(self, now: float | None = None) -> list[Verdict]:
        """The verdicts not older than `max_age` (what the plugins look up)."""
        now = time.time() if now is None else now
        return [v for v in self.verdicts if now - v.created <= self.max_age]


def read_cache(path: str | Path) -> Cache:
    """Read a cache written by `write_cache`; a file it did not write is an InputError naming the line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the verdict cache: {exc}") from None
    head = lines[0].split("\t")
    if len(head) != HEADER_FIELDS or head[0] != MAGIC or head[1] != str(FORMAT_VERSION):
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
                 default_partition=head[5], max_age=int(head[7]), verdicts=verdicts)


def _from_fields(f: list[str]) -> Verdict:
    # buckets come back as the smallest raw value of each bucket, which buckets to the same number
    shape = Shape(**{d: 2 ** int(b) - 1 for d, b in zip(DIMENSIONS, f[3:8])})
    return Verdict(user=f[0], account=f[1], partition=f[2], shape=shape, n_similar=int(f[8]), created=int(f[9]),
                   comment=f[10], advice=f[11])


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
