"""Read labelled scripts (a `labels.csv` and the files it lists) into the canonical `labelled_scripts` table.

A source is a labels.csv, a folder holding one, or a folder with labels.csv files below it (all are read);
globs are expanded. `labels.csv` has a header naming `file` and `class` and optionally `stored_as` (any order,
any case; other columns ignored); LF or CRLF line ends and a UTF-8 byte-order mark are accepted, values are stripped and
classes lower-cased. A row's script is `stored_as` (relative to the labels.csv folder) when given, else the
first that exists of `<file>`, `<file>.txt`, `files/<file>`, `files/<file>.txt`, `scripts/<file>`.

Bad records are quarantined with file, line, field and reason: a row with too few fields, an empty file
name, a class outside cpu/mem/network/io/other, a missing or unreadable script, a path that leaves the labels
folder, and a file listed a second time (the repeat is quarantined; when the repeat gives another class the
first row is kept but marked `label_conflict`).

Stated rules for what is kept:
- stub: a script with at most one code token (empty, blank, comments only, or a lone name such as the
  iCloud placeholder `Non`). Its label cannot be learned from its content.
- label_conflict: scripts with the same content (line ends and trailing blanks ignored) but different
  classes, e.g. identical 3-byte stubs labelled cpu and mem. All of them are marked.
- usable = neither stub nor label_conflict: only usable rows train or score a model; the others stay in
  the table for the record.
- group (near-duplicates, kept on one side of every CV split): scripts of one origin are joined when their
  names differ only by a copy suffix (`x.py` / `x copy.py` / `x copy 2.py` / `x (1).py`), when their
  normalized content is identical, or (real scripts of 200+ characters, in sets of at most 2,000) when
  rapidfuzz's `fuzz.ratio` of the normalized texts is at least 90.
- origin: `synthetic` when the folder holds the generator's truth file (`synthetic_truth.csv`), else `real`.
- scripts longer than `max_file_bytes` keep their first `max_file_bytes` bytes (`truncated`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from rapidfuzz import fuzz
from rapidfuzz.process import cdist

from jobaware.errors import InputError, UnreadableFile
from jobaware.reading import QUARANTINE, Problem, ReadReport
from jobaware.resource.lexer import NEWLINE, scan_tokens
from jobaware.resource.schema import CLASSES, CONTRACT, LABELLED_SCRIPTS, TRUTH_FILE
from jobaware.sources import expand

MAX_FILE_BYTES = 16 * 1024 * 1024
NEAR_DUPLICATE_RATIO = 90.0
NEAR_DUPLICATE_MIN_CHARS = 200
NEAR_DUPLICATE_MAX_SCRIPTS = 2000  # all-pairs similarity grows with the square: above this, names and hashes only
_COPY_SUFFIX = re.compile(r"(\s+copy(\s+\d+)?|\s*\(\d+\)|[-_ ]copy\d*)$", re.IGNORECASE)


def _labels_paths(source: str) -> list[Path]:
    """A labels.csv, or every labels.csv in a folder (itself, else below it, in name order)."""
    path = Path(source)
    if path.is_dir():
        found = [path / "labels.csv"] if (path / "labels.csv").is_file() else sorted(path.rglob("labels.csv"))
        if found:
            return found
    elif path.is_file():
        return [path]
    raise InputError(f"{source}: no labels.csv here (expected a labels.csv file or a folder holding one)")


def _expand(sources: list[str] | str) -> list[Path]:
    """The labels.csv files of `sources`: each path or glob expanded by the shared `jobaware.sources.expand`,
    then a folder searched for its labels.csv files (a slice rule: the shared `files` would list every file)."""
    sources = [sources] if isinstance(sources, str | Path) else list(sources)
    if not sources:
        raise InputError("no sources given: name a labels.csv or its folder")
    paths: list[Path] = []
    for source in sources:
        for match in expand(str(source)):
            paths.extend(_labels_paths(match))
    return list(dict.fromkeys(paths))


def _header(row: list[str], path: Path) -> dict[str, int]:
    names = [c.strip().lstrip("\ufeff").lower() for c in row]
    if "file" not in names or "class" not in names:
        raise UnreadableFile(f"{path}:1: header must name the columns file and class (optionally stored_as); "
                         f"got {','.join(row)[:120]!r}")
    return {name: names.index(name) for name in ("file", "class", "stored_as") if name in names}


def _candidates(folder: Path, name: str) -> list[Path]:
    return [folder / name, folder / f"{name}.txt", folder / "files" / name, folder / "files" / f"{name}.txt",
            folder / "scripts" / name]


def _within(folder: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def normalized_text(content: bytes) -> str:
    """Content for duplicate detection: decoded leniently, LF line ends, no trailing blanks."""
    text = content.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def is_stub(content: bytes) -> bool:
    """At most one code token (see the module docstring)."""
    if len(content) > 4096:
        return False
    tokens: list = []
    scan_tokens(normalized_text(content).splitlines(), 1, 8, float("inf"), tokens)
    return sum(1 for t in tokens if t.kind != NEWLINE) <= 1


def read_labels(path: Path, *, strict: bool = False, max_file_bytes: int = MAX_FILE_BYTES,
                progress: Callable[[int], None] | None = None) -> tuple[list[dict], list[dict], ReadReport]:
    """Rows of one labels.csv with their script bytes, the quarantined records, and the read report."""
    report = ReadReport(str(path))
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    while rows and not any(c.strip() for c in rows[0]):
        rows.pop(0)
    if not rows:
        raise UnreadableFile(f"{path}: empty labels file (expected a header file,class[,stored_as])")
    columns = _header(rows[0], path)
    folder = path.parent
    origin = "synthetic" if (folder / TRUTH_FILE).is_file() else "real"
    kept: list[dict] = []
    bad: list[dict] = []
    first_seen: dict[str, dict] = {}

    def quarantine(line: int, field: str, value: str, reason: str) -> None:
        problem = Problem(str(path), line, field, value[:200], reason)
        report.bad_rows += 1
        report.add([problem])
        bad.append({"file": str(path), "line": line, "field": field, "value": value[:200], "reason": reason})
        if strict:
            raise InputError(f"{problem} (strict mode)")

    for line, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) <= max(columns["file"], columns["class"]):
            quarantine(line, "row", ",".join(row), f"expected {len(rows[0])} fields, got {len(row)}")
            continue
        name = row[columns["file"]].strip()
        label = row[columns["class"]].strip().lower()
        stored = row[columns["stored_as"]].strip() if "stored_as" in columns and len(row) > columns["stored_as"] else ""
        if not name:
            quarantine(line, "file", "", "empty file name")
            continue
        if label not in CLASSES:
            quarantine(line, "class", row[columns["class"]], f"expected one of {', '.join(CLASSES)}")
            continue
        if name in first_seen:
            first = first_seen[name]
            if first["class"] != label:
                first["label_conflict"] = True
                quarantine(line, "file", name, f"listed again with class {label} (line {first['line']} says "
                                               f"{first['class']}); both set aside")
            else:
                quarantine(line, "file", name, f"listed again (first at line {first['line']})")
            continue
        candidates = [folder / stored] if stored else _candidates(folder, name)
        script = next((c for c in candidates if c.is_file()), None)
        if script is None:
            looked = ", ".join(str(c.relative_to(folder)) for c in candidates)
            quarantine(line, "stored_as" if stored else "file", stored or name, f"no such script (looked for {looked})")
            continue
        if not _within(folder, script):
            quarantine(line, "stored_as" if stored else "file", stored or name, "path leaves the labels folder")
            continue
        try:
            size = script.stat().st_size
            with open(script, "rb") as handle:
                content = handle.read(max_file_bytes)
        except OSError as error:
            quarantine(line, "file", name, f"cannot read script: {error.strerror or error}")
            continue
        record = {"file": name, "class": label, "stored_as": str(script.relative_to(folder)), "source": str(path),
                  "line": line, "origin": origin, "sha256": hashlib.sha256(content).hexdigest(), "n_bytes": size,
                  "truncated": size > len(content), "stub": is_stub(content), "label_conflict": False,
                  "content": content}
        first_seen[name] = record
        kept.append(record)
        report.rows += 1
        if progress and report.rows % 64 == 0:
            progress(64)
    if progress and report.rows % 64:
        progress(report.rows % 64)
    return kept, bad, report


def _name_stem(name: str) -> str:
    stem = re.sub(r"(\.txt)?$", "", name)
    stem = re.sub(r"\.[A-Za-z0-9]{1,6}$", "", stem)
    return _COPY_SUFFIX.sub("", stem).strip().lower()


def near_duplicate_groups(frame: pd.DataFrame) -> pd.Series:
    """A group name per row (see the module docstring); rows of different origins never share a group."""
    parent = list(range(len(frame)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        a, b = find(i), find(j)
        if a != b:
            parent[max(a, b)] = min(a, b)

    texts = [normalized_text(c) for c in frame["content"]]
    keys = list(zip(frame["origin"], [_name_stem(f) for f in frame["file"]], strict=True))
    hashes = list(zip(frame["origin"], [hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts],
                      strict=True))
    for column in (keys, hashes):
        first: dict = {}
        for i, key in enumerate(column):
            union(i, first.setdefault(key, i))
    real = [i for i in range(len(frame))
            if frame["origin"].iat[i] == "real" and len(texts[i]) >= NEAR_DUPLICATE_MIN_CHARS]
    if 1 < len(real) <= NEAR_DUPLICATE_MAX_SCRIPTS:
        scores = cdist([texts[i] for i in real], [texts[i] for i in real], scorer=fuzz.ratio,
                       score_cutoff=NEAR_DUPLICATE_RATIO, dtype=np.uint8, workers=1)
        for a, b in zip(*np.nonzero(np.triu(scores, k=1)), strict=True):
            union(real[a], real[b])
    names = [f"{frame['origin'].iat[find(i)]}:{frame['file'].iat[find(i)]}" for i in range(len(frame))]
    return pd.Series(names, index=frame.index, dtype="string")


def _finish(records: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(records, columns=LABELLED_SCRIPTS.names)
    if frame.empty:
        return frame
    texts = pd.Series([hashlib.sha256(normalized_text(c).encode("utf-8", "surrogatepass")).hexdigest()
                       for c in frame["content"]], index=frame.index)
    classes_per_text = frame.groupby(texts)["class"].transform("nunique")
    frame["label_conflict"] = frame["label_conflict"].astype(bool) | (classes_per_text > 1)
    frame["group"] = near_duplicate_groups(frame)
    frame["usable"] = ~frame["stub"].astype(bool) & ~frame["label_conflict"]
    return frame


def read_scripts(sources: list[str] | str, *, strict: bool = False, max_file_bytes: int = MAX_FILE_BYTES,
                 progress: Callable[[int], None] | None = None) -> tuple[pd.DataFrame, list[dict], ReadReport]:
    """All sources into one canonical frame, the quarantined records, and one report over them."""
    paths = _expand(sources)
    records: list[dict] = []
    quarantined: list[dict] = []
    total = ReadReport(", ".join(str(p) for p in paths))
    for path in paths:
        kept, bad, report = read_labels(path, strict=strict, max_file_bytes=max_file_bytes, progress=progress)
        records.extend(kept)
        quarantined.extend(bad)
        total.rows += report.rows
        total.bad_rows += report.bad_rows
        total.add(report.problems)
    return _finish(records), quarantined, total


def ingest(sources: list[str] | str, out_dir: Path | str, *, strict: bool = False,
           progress: Callable[[int], None] | None = None, max_file_bytes: int = MAX_FILE_BYTES) -> ReadReport:
    """Write `out_dir/labelled_scripts.parquet` and `out_dir/quarantine.jsonl`; return the read report."""
    frame, quarantined, report = read_scripts(sources, strict=strict, max_file_bytes=max_file_bytes,
                                              progress=progress)
    if frame.empty:
        raise InputError(f"{report.file}: no readable labelled scripts ({report.bad_rows} bad record(s))")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, schema=LABELLED_SCRIPTS, preserve_index=False),
                   out_dir / f"{CONTRACT}.parquet")
    with open(out_dir / QUARANTINE, "w") as handle:
        for record in quarantined:
            handle.write(json.dumps(record) + "\n")
    return report


def load_table(dataset_dir: Path | str) -> pd.DataFrame:
    """The canonical table written by `ingest`."""
    path = Path(dataset_dir) / f"{CONTRACT}.parquet"
    if not path.is_file():
        raise InputError(f"{path}: no such table; run ingest first")
    return pd.read_parquet(path)
