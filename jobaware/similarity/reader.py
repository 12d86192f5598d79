"""Readers of the Mistral coding files (see `schema` for the formats) and `ingest` into canonical Parquet.

Files are read in blocks of whole lines (memory bounded by the block, not the file) and every block is
checked column by column with pyarrow/numpy. A bad record (wrong number of fields, a value that does not
parse or is out of range, sequences of different lengths, a zero-aggregated coding that does not match its
coding, a jobid seen before) is skipped, counted, reported with file, line and field, and written to the
quarantine; `strict=True` turns the first one into an `InputError`. Blank lines are not records and are
passed over. Duplicate (jobid, node) rows of the node-values table are caught within a block here and
across blocks when the index is built (the later row is dropped and counted there).
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from jobaware.errors import InputError, UnreadableFile
from jobaware.reading import QUARANTINE, Problem, ReadReport, line_blocks, read_each
from jobaware.similarity.flat import sequences_equal
from jobaware.similarity.schema import (
    CODINGS,
    COLUMNS,
    FAMILIES,
    FLOATS,
    JOBS,
    LEVEL_MAX,
    LEVELS,
    MAX_NAME,
    MAX_SEGMENTS,
    METRICS,
    NODE_VALUES,
    SCHEMAS,
    SCORE_MAX,
    SOURCE_COLUMNS,
    SYMBOL_MAX,
    aggregate_zeros_flat,
    table_of_header,
)
from jobaware.sources import files as source_files
from jobaware.text import ascii_digits

BLOCK_BYTES = 16 << 20
SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".txt")
MAX_NODES = 1_000_000
MAX_ELAPSED = 10 * 365 * 86400
_INT_SEQ = r"^[0-9]{1,6}(:[0-9]{1,6})*$"
_NUMBER = r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]{1,3})?"
_FLOAT_SEQ = rf"^{_NUMBER}(:{_NUMBER})*$"
_SLURM_TIME = re.compile(r"^(?:(\d{1,4})-)?(\d{1,2}):(\d{2}):(\d{2})$")
# tables read first: a binary file, when given, is the pool; the levels' coding_abs stands in otherwise
ORDER = (CODINGS, LEVELS, JOBS, NODE_VALUES, FAMILIES)


@dataclass
class Block:
    """The good rows of one block as a canonical table, and what was wrong with the others."""

    table: str
    rows: pa.Table
    problems: list[Problem] = field(default_factory=list)
    quarantined: list[dict] = field(default_factory=list)


def _open(path: Path):
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".bz2"):
        return bz2.open(path, "rb")
    if name.endswith(".xz"):
        return lzma.open(path, "rb")
    return open(path, "rb")


def read_header(path: Path) -> tuple[str, list[str]]:
    """The table a file holds and its column names, from its first line."""
    try:
        with _open(path) as handle:
            first = handle.readline(64 << 10)
    except OSError as exc:
        raise UnreadableFile(f"{path}: cannot read ({exc.strerror or exc})") from None
    names = first.decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r\n").split(",")
    table = table_of_header(names)
    if table is None:
        known = "; ".join(f"{t}: {','.join(SOURCE_COLUMNS[t])}" for t in ORDER)
        raise UnreadableFile(f"{path}:1: header {first[:200].decode('utf-8', 'replace').strip()!r} is none of the "
                         f"Mistral tables ({known})")
    return table, names


def _blocks(path: Path) -> Iterator[tuple[bytes, int]]:
    """(block of whole lines, line number of its first line), the header excluded."""
    with _open(path) as handle:
        handle.readline(64 << 10)
        for block in line_blocks(handle, BLOCK_BYTES, 2):
            yield bytes(block.data), block.first_line


class _Rows:
    """One block's raw text columns and the first problem of each row."""

    def __init__(self, path: Path, table: str, names: list[str], raw: pa.Table, lines: np.ndarray):
        self.path, self.table, self.names, self.raw, self.lines = path, table, names, raw, lines
        self.bad = np.zeros(raw.num_rows, bool)
        self.why: dict[int, tuple[str, str, str]] = {}

    def text(self, column: str) -> pa.Array:
        return self.raw.column(column).combine_chunks()

    def flag(self, mask: np.ndarray, column: str, reason: str | Callable[[int], str]) -> None:
        """Mark rows as bad (their first problem wins)."""
        new = np.flatnonzero(mask & ~self.bad)
        if not len(new):
            return
        values = self.text(column).take(pa.array(new)).to_pylist() if column in self.names else [""] * len(new)
        for row, value in zip(new.tolist(), values, strict=True):
            self.why[row] = (column, reason(row) if callable(reason) else reason, (value or "")[:80])
        self.bad[new] = True

    def integers(self, column: str, low: int, high: int) -> np.ndarray:
        text = self.text(column)
        ok = np.asarray(pc.match_substring_regex(text, r"^-?[0-9]{1,18}$").to_numpy(zero_copy_only=False), bool)
        values = np.zeros(len(text), np.int64)
        if ok.any():
            values[ok] = pc.cast(text.filter(pa.array(ok)), pa.int64()).to_numpy()
        self.flag(~ok, column, "expected an integer")
        self.flag(ok & ((values < low) | (values > high)), column, f"expected {low}..{high}")
        return values

    def names_text(self, column: str, required: bool) -> None:
        text = self.text(column)
        length = pc.utf8_length(text).to_numpy(zero_copy_only=False)
        if required:
            self.flag(length == 0, column, "empty")
        self.flag(length > MAX_NAME, column, f"longer than {MAX_NAME} characters")

    def sequence(self, column: str, low: float, high: float, *, integer: bool):
        """Parse a `:`-separated column: (lengths (-1 where bad), flat values, offsets over all rows)."""
        text = self.text(column)
        ok = np.asarray(pc.match_substring_regex(text, _INT_SEQ if integer else _FLOAT_SEQ)
                        .to_numpy(zero_copy_only=False), bool)
        kind = "integers" if integer else "numbers"
        self.flag(~ok, column, f"expected a ':'-separated sequence of {kind}")
        parts = pc.split_pattern(text.filter(pa.array(ok)), ":")
        flat = pc.cast(pc.list_flatten(parts), pa.int32() if integer else pa.float64()).to_numpy()
        lengths = np.full(len(text), -1, np.int64)
        lengths[ok] = pc.list_value_length(parts).to_numpy()
        offsets = np.concatenate([[0], np.cumsum(np.maximum(lengths, 0))])
        out_of_range = (flat < low) | (flat > high) | ~np.isfinite(flat)
        if out_of_range.any():
            row_of = np.repeat(np.arange(len(text)), np.maximum(lengths, 0))
            rows = np.zeros(len(text), bool)
            rows[row_of[out_of_range]] = True
            shown = f"{low:g}..{high:g}"
            self.flag(rows, column, f"a value outside {shown}")
        self.flag(lengths > MAX_SEGMENTS, column, f"more than {MAX_SEGMENTS} segments")
        return lengths, flat, offsets

    def problems(self) -> tuple[list[Problem], list[dict]]:
        problems, quarantined = [], []
        records = None
        rows = sorted(self.why)
        if rows:
            records = [",".join(v) for v in zip(*(self.text(c).take(pa.array(rows)).to_pylist() for c in self.names),
                                                strict=True)]
        for i, row in enumerate(rows):
            column, reason, value = self.why[row]
            line = int(self.lines[row])
            problems.append(Problem(str(self.path), line, column, value, reason))
            quarantined.append({"file": str(self.path), "line": line, "table": self.table, "field": column,
                                "reason": reason, "record": records[i][:2000]})
        return problems, quarantined


def _parse_block(path: Path, table: str, names: list[str], block: bytes, first_line: int) -> tuple[_Rows, list]:
    invalid: list[tuple[int, str]] = []

    def skip(row) -> str:
        invalid.append((first_line + row.number - 1, row.text or ""))
        return "skip"

    # bytes that are not UTF-8 become U+FFFD: the row then fails its checks and is reported, not the file
    text = block.decode("utf-8", "replace").encode()
    try:
        raw = pacsv.read_csv(
            io.BytesIO(text),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False, block_size=len(text) + 1),
            parse_options=pacsv.ParseOptions(quote_char=False, ignore_empty_lines=False, invalid_row_handler=skip),
            convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                                 strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
    except pa.ArrowInvalid as exc:
        raise InputError(f"{path}:{first_line}: cannot read the lines from here on ({str(exc).splitlines()[0]})") from None
    # line of each parsed row: the block's lines in order, less those pyarrow skipped as malformed
    skipped = np.array(sorted(line for line, _ in invalid), np.int64)
    index = np.arange(raw.num_rows)
    before = skipped - first_line - np.arange(len(skipped))
    lines = first_line + index + np.searchsorted(before, index, side="right")
    blank = np.ones(raw.num_rows, bool)
    for name in names:
        blank &= pc.equal(raw.column(name), "").to_numpy(zero_copy_only=False)
    rows = _Rows(path, table, names, raw.filter(pa.array(~blank)), lines[~blank])
    malformed = [
        (Problem(str(path), line, "(record)", text[:80], f"expected {len(names)} comma-separated fields"),
         {"file": str(path), "line": line, "table": table, "field": "(record)",
          "reason": f"expected {len(names)} comma-separated fields", "record": text[:2000]})
        for line, text in invalid
    ]
    return rows, malformed


def _check(rows: _Rows, seen: set[int] | None) -> pa.Table:
    """Check one block's rows by table; return the good rows as the canonical table."""
    table = rows.table
    jobid = rows.integers("jobid", 1, 2**62)
    if table == CODINGS:
        rows.sequence("coding", 0, SYMBOL_MAX, integer=True)
    elif table == LEVELS:
        lengths = {m: rows.sequence(m, 0, LEVEL_MAX, integer=True)[0] for m in METRICS}
        lengths.update({f: rows.sequence(f, 0, SCORE_MAX, integer=False)[0] for f in FLOATS})
        coding_len, coding, coding_off = rows.sequence("coding_abs", 0, SYMBOL_MAX, integer=True)
        agg_len, agg, agg_off = rows.sequence("coding_abs_aggzeros", 0, SYMBOL_MAX, integer=True)
        for column, length in lengths.items():
            differs = (length >= 0) & (coding_len >= 0) & (length != coding_len)
            rows.flag(differs, column, lambda r, n=length: f"{n[r]} segments, coding_abs has {coding_len[r]}")
        expect, expect_off = aggregate_zeros_flat(coding, coding_off)
        both = (coding_len >= 0) & (agg_len >= 0)
        mismatch = both & ~sequences_equal(agg, agg_off, expect, expect_off)
        rows.flag(mismatch, "coding_abs_aggzeros", "not coding_abs with each run of zeros collapsed to one 0")
    elif table == JOBS:
        rows.names_text("user", True)
        rows.names_text("group", True)
        rows.names_text("job_name", False)
        rows.integers("nodes", 1, MAX_NODES)
        elapsed = _elapsed_seconds(rows)
    elif table == NODE_VALUES:
        rows.names_text("node", True)
        lengths = [rows.sequence(m, 0, SCORE_MAX, integer=False)[0] for m in METRICS]
        first = lengths[0]
        for metric, length in zip(METRICS[1:], lengths[1:], strict=True):
            rows.flag((length >= 0) & (first >= 0) & (length != first), metric,
                      lambda r, n=length: f"{n[r]} segments, {METRICS[0]} has {first[r]}")
        pairs = pc.binary_join_element_wise(rows.text("jobid"), rows.text("node"), "\x00").to_numpy(zero_copy_only=False)
        _, first_index = np.unique(pairs, return_index=True)
        repeated = np.ones(len(pairs), bool)
        repeated[first_index] = False
        rows.flag(repeated, "node", "duplicate (jobid, node) row")
    elif table == FAMILIES:
        rows.integers("family", -1, 2**62)
        rows.names_text("variant", False)
    if seen is not None:
        candidates = np.flatnonzero(~rows.bad)
        duplicate = np.zeros(len(jobid), bool)
        for row, value in zip(candidates.tolist(), jobid[candidates].tolist(), strict=True):
            if value in seen:
                duplicate[row] = True
            else:
                seen.add(value)
        rows.flag(duplicate, "jobid", "duplicate jobid (an earlier record has it)")
    good = pa.array(~rows.bad)
    columns = {}
    for name in COLUMNS[table]:
        if name == "jobid":
            columns[name] = pa.array(jobid, pa.int64()).filter(good)
        elif name in ("nodes", "family"):
            columns[name] = pc.cast(rows.text(name).filter(good), pa.int64())
        elif name == "elapsed":
            columns[name] = pa.array(elapsed, pa.int64()).filter(good)
        elif name == "job_name":
            names = rows.text(name).filter(good)
            columns[name] = pc.if_else(pc.equal(names, ""), pa.scalar(None, pa.string()), names)
        else:
            columns[name] = rows.text(name).filter(good)
    return pa.table(columns, schema=SCHEMAS[table])


def _elapsed_seconds(rows: _Rows) -> np.ndarray:
    """Seconds from `elapsed` given as whole seconds or as Slurm's [D-]HH:MM:SS."""
    values = rows.text("elapsed").to_pylist()
    seconds = np.zeros(len(values), np.int64)
    bad = np.zeros(len(values), bool)
    for i, value in enumerate(values):
        if ascii_digits(value) and len(value) <= 12:
            seconds[i] = int(value)
            continue
        match = _SLURM_TIME.match(value)
        if match and int(match.group(3)) < 60 and int(match.group(4)) < 60:
            days, hours, minutes, secs = (int(g or 0) for g in match.groups())
            seconds[i] = ((days * 24 + hours) * 60 + minutes) * 60 + secs
        else:
            bad[i] = True
    rows.flag(bad, "elapsed", "expected seconds or [D-]HH:MM:SS")
    rows.flag(~bad & (seconds > MAX_ELAPSED), "elapsed", f"more than {MAX_ELAPSED} seconds")
    return seconds


def iter_blocks(path: str | Path, seen: set[int] | None = None) -> Iterator[Block]:
    """Read one source file block by block; `seen` (jobids met before) catches duplicates across files."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    table, names = read_header(path)
    for block, first_line in _blocks(path):
        if not block.strip():  # blank lines only
            continue
        rows, malformed = _parse_block(path, table, names, block, first_line)
        canonical = _check(rows, seen if table != NODE_VALUES else None)
        problems, quarantined = rows.problems()
        problems += [p for p, _ in malformed]
        quarantined += [q for _, q in malformed]
        order = sorted(range(len(problems)), key=lambda i: problems[i].line or 0)
        yield Block(table, canonical, [problems[i] for i in order], [quarantined[i] for i in order])


def expand(sources: list[str]) -> list[Path]:
    """Files named by `sources`: paths, globs, or folders (every coding file directly inside)."""
    return [Path(p) for p in source_files(sources, SUFFIXES)]


def read_tables(path: str | Path, *, strict: bool = False) -> tuple[str, pa.Table, ReadReport]:
    """A whole (small) source file as its canonical table, with the read report."""
    report = ReadReport(str(path))
    parts, table = [], None
    for block in iter_blocks(path, set()):
        _account(report, block, strict)
        parts.append(block.rows)
        table = block.table
    if table is None:
        table = read_header(Path(path))[0]
    return table, pa.concat_tables(parts) if parts else SCHEMAS[table].empty_table(), report


def _account(report: ReadReport, block: Block, strict: bool) -> None:
    report.rows += block.rows.num_rows
    report.bad_rows += len(block.quarantined)
    report.add(block.problems)
    if strict and block.problems:
        raise InputError(f"{block.problems[0]} (strict mode; {len(block.problems)} bad record(s) in this block)")


def ingest(sources: list[str], out_dir: Path, *, strict: bool = False, progress=None) -> ReadReport:
    """Read the source files into `out_dir/<table>.parquet` (one per table found) and `quarantine.jsonl`.

    Sources are paths, globs or folders; each file's table is known by its header. Without a binary coding
    file, `mistral_codings` is derived from the quantised table's `coding_abs`, so every pool has it; with
    one, the binary file is the pool (its codings are not compared with `coding_abs`) and the quantised rows
    join it by jobid.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    named = expand(sources)
    unreadable: list[tuple[Problem, dict]] = []  # files without a header of a Mistral table: one bad record each
    kinds = dict(read_each(named, lambda path: (path, read_header(path)[0]), lambda *bad: unreadable.append(bad),
                           strict=strict))
    if not {CODINGS, LEVELS} & set(kinds.values()):
        raise InputError(f"{', '.join(map(str, named))}: no coding file among the sources (need the binary "
                         f"coding file 'coding,jobid' or the quantised job_codings table)")
    files = sorted(kinds, key=lambda p: ORDER.index(kinds[p]))
    derive_codings = CODINGS not in kinds.values()
    report = ReadReport(", ".join(str(p) for p in named))
    report.bad_rows += len(unreadable)
    report.add([problem for problem, _ in unreadable])
    writers: dict[str, pq.ParquetWriter] = {}
    seen: dict[str, set[int]] = {table: set() for table in ORDER}

    def write(table: str, rows: pa.Table) -> None:
        if table not in writers:
            writers[table] = pq.ParquetWriter(out_dir / f"{table}.parquet", SCHEMAS[table])
        writers[table].write_table(rows)

    try:
        with open(out_dir / QUARANTINE, "w") as quarantine:
            for _, record in unreadable:
                quarantine.write(json.dumps(record) + "\n")
            for path in files:
                for block in iter_blocks(path, seen[kinds[path]]):
                    _account(report, block, strict)
                    write(block.table, block.rows)
                    if derive_codings and block.table == LEVELS:
                        write(CODINGS, pa.table({"jobid": block.rows["jobid"], "coding": block.rows["coding_abs"]},
                                                schema=SCHEMAS[CODINGS]))
                    for record in block.quarantined:
                        quarantine.write(json.dumps(record) + "\n")
                    if progress:
                        progress(block.rows.num_rows + len(block.quarantined))
    finally:
        for writer in writers.values():
            writer.close()
    for table in set(kinds.values()) | ({CODINGS} if derive_codings else set()):
        if table not in writers:  # a file with a header and no records: an empty table, still validated
            pq.write_table(SCHEMAS[table].empty_table(), out_dir / f"{table}.parquet")
    return report
