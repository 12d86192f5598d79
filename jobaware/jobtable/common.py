"""Turning raw columns into the canonical job table, record by record accountable."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from jobaware.errors import UnreadableFile
from jobaware.jobtable.schema import (
    CANONICAL,
    COLUMNS,
    EPOCH_RANGE,
    INTEGER,
    LIMITS,
    NUMERIC,
    STATES,
    TIME_COLUMNS,
    max_text,
    normalize_state,
    normalize_states,
)
from jobaware.reading import MAX_EXAMPLES, Problem

CSV_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
# Spreadsheet formulas in a CSV (OWASP's CSV injection): a text column's value starting with = + - @ tab or CR is
# written after a `'` (`formulas_escaped`), so that a job named `=HYPERLINK(...)` shows as text; the CSV reader takes
# one `'` off again (`formulas_unescaped`), so that the name reads back as it was. A value that starts with `'`s
# before such a character gets one more, so that the round trip is exact.
TEXT_COLUMNS = ("user", "account", "partition", "qos", "state", "name", "work_dir", "submit_line")
_FORMULA, _ESCAPED = r"^('*[=+\-@\t\r])", r"^'('*[=+\-@\t\r])"


class Batch:
    """Canonical rows, the problems met, the quarantined raw records, and each row's line (or record) number in its
    file (None where the reader could not tell records from lines). The rows come as an Arrow table (the CSV
    reader's fast path) or a pandas frame (the other readers); each form is made from the other when asked."""

    def __init__(self, rows: pa.Table | pd.DataFrame, problems: list[Problem], quarantined: list[dict],
                 lines: np.ndarray | None = None):
        self._table = rows if isinstance(rows, pa.Table) else None
        self._frame = rows if isinstance(rows, pd.DataFrame) else None
        self.problems, self.quarantined = problems, quarantined
        self.lines = lines

    def __len__(self) -> int:
        return len(self._frame) if self._frame is not None else self._table.num_rows

    @property
    def table(self) -> pa.Table:
        if self._table is None:
            self._table = pa.Table.from_pandas(self._frame, schema=CANONICAL, preserve_index=False)
        return self._table

    @property
    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            self._frame = self._table.to_pandas(types_mapper=_pandas_type)
        return self._frame


def formulas_escaped(table: pa.Table) -> pa.Table:
    """`table` with every value of its text columns that a spreadsheet would read as a formula written after a `'`."""
    for name in TEXT_COLUMNS:
        if name in table.column_names:
            escaped = pc.replace_substring_regex(table[name], _FORMULA, r"'\1")
            table = table.set_column(table.column_names.index(name), name, escaped)
    return table


def formulas_unescaped(table: pa.Table) -> pa.Table:
    """`table` with the `'` that `formulas_escaped` put before a formula taken off again."""
    for name in TEXT_COLUMNS:
        if name in table.column_names and pc.any(pc.starts_with(table[name], "'")).as_py():
            plain = pc.replace_substring_regex(table[name], _ESCAPED, r"\1")
            table = table.set_column(table.column_names.index(name), name, plain)
    return table


def _pandas_type(arrow_type: pa.DataType):
    """The canonical pandas dtype of an Arrow column: nullable integers and strings (the rest as Arrow maps them)."""
    if pa.types.is_integer(arrow_type):
        return pd.Int64Dtype()
    if pa.types.is_string(arrow_type):
        return pd.StringDtype()
    return None


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _present(raw: pd.Series) -> np.ndarray:
    """True where the raw value was given (not null, not an empty string)."""
    if raw.dtype == object or pd.api.types.is_string_dtype(raw):
        return (raw.notna() & (raw.astype("string").str.strip() != "")).to_numpy(dtype=bool, na_value=False)
    return raw.notna().to_numpy()


def _parse_times(raw: pd.Series, epoch_unit: str | None) -> tuple[pd.Series, np.ndarray]:
    """Times in seconds, and where a given time lies outside EPOCH_RANGE (those become NaT)."""
    low, high = (pd.Timestamp(v, unit="s") for v in EPOCH_RANGE)
    if pd.api.types.is_datetime64_any_dtype(raw):
        values = raw.dt.tz_localize(None) if getattr(raw.dt, "tz", None) is not None else raw
    else:
        if pd.api.types.is_numeric_dtype(raw) or epoch_unit:
            numbers = pd.to_numeric(raw if pd.api.types.is_numeric_dtype(raw) else raw.astype("string").str.strip(),
                                    errors="coerce").astype("float64")
            seconds = numbers / 1000.0 if (epoch_unit or "ms") == "ms" else numbers
            outside = ~seconds.between(*EPOCH_RANGE) & seconds.notna()
            parsed = pd.to_datetime(seconds.where(~outside).round(), unit="s", errors="coerce").astype("datetime64[s]")
            return parsed, outside.to_numpy()
        values = pd.to_datetime(raw.astype("string").str.strip(), format=CSV_TIME_FORMAT, errors="coerce")
    outside = (values.notna() & ((values < low) | (values > high))).to_numpy()
    return values.where(~outside).astype("datetime64[s]"), outside


def _line(line) -> int | None:
    """A row's line number; None where the reader could not tell records from lines (the report names the file)."""
    return None if line is None else int(line)


def canonicalize(
    raw: pd.DataFrame,
    *,
    file: str,
    lines: np.ndarray,
    epoch_unit: str | None = None,
    require_state: bool = False,
    undecodable: dict[str, np.ndarray] | None = None,
) -> Batch:
    """Convert raw columns to canonical types; rows with an unreadable value are quarantined.

    `lines` gives each raw row's line (or record) number in `file`, for the report; `undecodable` marks, per
    column, the rows whose bytes were not UTF-8 (their text holds the bytes as \\x escapes).
    """
    missing = [c for c in ("job_id", "submit_time") if c not in raw.columns]
    if missing:
        raise UnreadableFile(f"{file}: missing required column(s) {', '.join(missing)}; found {', '.join(map(str, raw.columns))}")
    if require_state and "state" not in raw.columns:
        raise UnreadableFile(f"{file}: no 'state' column; a training table needs each job's final state")
    n = len(raw)
    bad = np.zeros(n, dtype=bool)
    problems: list[Problem] = []
    out: dict[str, pd.Series] = {}

    def flag(mask: np.ndarray, column: str, reason: str) -> None:
        nonlocal bad
        for i in np.flatnonzero(mask & ~bad)[:MAX_EXAMPLES]:
            problems.append(Problem(file, _line(lines[i]), column, _text(raw[column].iloc[i]), reason))
        bad |= mask

    for column, mask in (undecodable or {}).items():
        flag(mask, column, "not UTF-8 text")

    for column in COLUMNS:
        if column not in raw.columns:
            out[column] = pd.Series([None] * n, dtype="object")
            continue
        values = raw[column]
        given = _present(values)
        if column in NUMERIC or column == "job_id":
            parsed = pd.to_numeric(values, errors="coerce").astype("float64")
            number = parsed.to_numpy(dtype="float64", na_value=np.nan)
            flag(given & np.isnan(number), column, "not a number")
            flag(np.isinf(number), column, "not a finite number")
            low, high = LIMITS[column]
            flag(number < low, column, "negative")
            flag(number > high, column, f"above the limit of {high:,}")
            if column in INTEGER:
                flag(np.isfinite(number) & (number != np.floor(number)), column, "not a whole number")
            out[column] = parsed
        elif column in TIME_COLUMNS:
            parsed, outside = _parse_times(values, epoch_unit)
            flag(outside, column, "outside 1970-01-01 to 2100-01-01")
            expected = f"epoch {epoch_unit}" if epoch_unit else f"a time like {CSV_TIME_FORMAT}"
            flag(given & parsed.isna().to_numpy(), column, f"not {expected}")
            out[column] = parsed
        else:
            text = values.astype("string").str.strip()
            flag((text.str.len() > max_text(column)).to_numpy(dtype=bool, na_value=False), column,
                 f"longer than {max_text(column):,} characters")
            out[column] = text.where(pd.Series(given, index=values.index), None)
    flag(~_present(raw["job_id"]), "job_id", "missing")
    flag(~_present(raw["submit_time"]), "submit_time", "missing")
    if "state" in raw.columns:
        states = normalize_states(out["state"])
        known = states.isin(STATES).to_numpy() | states.isna().to_numpy()
        flag(~known, "state", f"unknown state (expected one of {', '.join(STATES)})")
        out["state"] = states
    if require_state:
        flag(out["state"].isna().to_numpy(), "state", "missing (a training table needs the final state)")

    frame = pd.DataFrame(out, index=raw.index)
    quarantined = [
        {"file": file, "line": _line(lines[i]), **{c: _text(raw[c].iloc[i]) for c in raw.columns}}
        for i in np.flatnonzero(bad)
    ]
    frame = frame.loc[~bad].reset_index(drop=True)
    return Batch(to_canonical_dtypes(frame), problems, quarantined, np.asarray(lines, dtype=object)[~bad])


def _dtype(column: str) -> str:
    if column in INTEGER:
        return "Int64"
    if column in NUMERIC:
        return "float64"
    return "datetime64[s]" if column in TIME_COLUMNS else "string"


def to_canonical_dtypes(frame: pd.DataFrame) -> pd.DataFrame:
    """Cast a frame with the canonical columns to the canonical pandas dtypes (nullable ints)."""
    if list(frame.columns) == list(COLUMNS) and all(str(frame[c].dtype) == _DTYPES[c] for c in COLUMNS):
        return frame
    typed = {}
    for column in COLUMNS:
        values = frame[column] if column in frame.columns else pd.Series([None] * len(frame), index=frame.index)
        if column in INTEGER:
            typed[column] = pd.to_numeric(values).astype("Int64")
        elif column in NUMERIC:
            typed[column] = pd.to_numeric(values).astype("float64")
        elif column in TIME_COLUMNS:
            typed[column] = pd.to_datetime(values).astype("datetime64[s]")
        else:
            typed[column] = values.astype("string")
    return pd.DataFrame(typed)


_DTYPES = {c: _dtype(c) for c in COLUMNS}


NAT = np.iinfo(np.int64).min  # a missing time in JobColumns: NumPy's NaT as an integer


class JobColumns:
    """Canonical jobs as one NumPy array per column, the serving path's table (no pandas per request): numbers
    float64 (NaN: unknown; whole numbers and job ids are exact up to 2**53, the bound of LIMITS), times int64
    seconds since the epoch (NAT: unknown), text as object arrays (None: unknown)."""

    def __init__(self, columns: dict[str, np.ndarray]):
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns["job_id"])

    def __getitem__(self, column: str) -> np.ndarray:
        return self.columns[column]

    @classmethod
    def from_rows(cls, rows: list[dict]) -> JobColumns:
        """From checked records (canonical field -> value or None; times as epoch seconds)."""
        columns = {}
        for column in COLUMNS:
            values = [row.get(column) for row in rows]
            if column in NUMERIC or column in INTEGER:
                columns[column] = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
            elif column in TIME_COLUMNS:
                columns[column] = np.array([NAT if v is None else v for v in values], dtype=np.int64)
            else:
                columns[column] = np.array([None if v is None else str(v) for v in values], dtype=object)
        return cls(columns)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> JobColumns:
        """From a table with the canonical columns (missing ones are unknown)."""
        columns = {}
        for column in COLUMNS:
            if column not in frame:
                columns[column] = (np.full(len(frame), np.nan) if column in NUMERIC or column in INTEGER else
                                   np.full(len(frame), NAT) if column in TIME_COLUMNS else
                                   np.full(len(frame), None, dtype=object))
            elif column in NUMERIC or column in INTEGER:
                columns[column] = frame[column].to_numpy(dtype=np.float64, na_value=np.nan)
            elif column in TIME_COLUMNS:
                columns[column] = np.asarray(frame[column], dtype="datetime64[s]").astype(np.int64)
            else:
                columns[column] = frame[column].to_numpy(dtype=object, na_value=None)
        return cls(columns)

    def frame(self) -> pd.DataFrame:
        """The canonical table, in the canonical pandas dtypes."""
        typed = {}
        for column in COLUMNS:
            values = self.columns[column]
            if column in INTEGER:
                typed[column] = pd.array(values, dtype="Float64").astype("Int64")
            elif column in NUMERIC:
                typed[column] = values
            elif column in TIME_COLUMNS:
                typed[column] = values.view("datetime64[s]")
            else:
                typed[column] = pd.array(values, dtype="string")
        return pd.DataFrame(typed)


def valid_table(raw: pa.Table, *, require_state: bool = False) -> pa.Table | None:
    """The canonical table of a block Arrow parsed (numbers typed, times as text), when every row passes the
    checks `canonicalize` makes, with the values `canonicalize` would give; None as soon as any row does not
    (the caller then takes `canonicalize`'s path, which names each bad record). Arrow throughout, no pandas."""
    n = raw.num_rows
    columns = []
    for field in CANONICAL:
        name = field.name
        values = raw[name] if name in raw.column_names else pa.nulls(n, field.type)
        if name in NUMERIC or name in INTEGER:
            values = _valid_numbers(name, values)
        elif name in TIME_COLUMNS:
            values = _valid_times(values)
        else:
            values = _valid_text(name, values)
        if values is None:
            return None
        columns.append(values.cast(field.type))
    table = pa.Table.from_arrays(columns, schema=CANONICAL)
    required = ("job_id", "submit_time", "state") if require_state else ("job_id", "submit_time")
    return None if any(table[name].null_count for name in required) else table


def _valid_numbers(name: str, values: pa.ChunkedArray):
    if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type) or pa.types.is_null(values.type)):
        return None
    if values.null_count == len(values):
        return values
    low, high = LIMITS[name]  # (infinities lie outside; "nan" is read as unknown, as the record path reads it)
    extremes = pc.min_max(values)
    return values if extremes["min"].as_py() >= low and extremes["max"].as_py() <= high else None


_TIME_TEXT = len("2019-01-01 00:00:00")  # CSV_TIME_FORMAT's text, always this long
# bytes that may begin or end text that str.strip() (and Arrow's utf8_trim_whitespace, the same set) would
# shorten: ASCII white space and separators, and the first or last byte of any non-ASCII character
_MAY_TRIM = np.zeros(256, dtype=bool)
_MAY_TRIM[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True
_MAY_TRIM[128:] = True


def _byte_views(values: pa.ChunkedArray):
    """Per chunk of a string column: its data bytes, each value's start offset and byte length (nulls: 0)."""
    for chunk in values.chunks:
        _, offsets, data = chunk.buffers()
        bounds = np.frombuffer(offsets, np.int32)[chunk.offset: chunk.offset + len(chunk) + 1]
        yield (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)), bounds[:-1], np.diff(bounds)


def _valid_times(values: pa.ChunkedArray):
    """Text in CSV_TIME_FORMAT: 19 bytes, a space between date and time, and a date and time Arrow reads."""
    if pa.types.is_null(values.type) or values.null_count == len(values):
        return pa.nulls(len(values), pa.timestamp("s"))
    if not pa.types.is_string(values.type):
        return None
    for data, starts, lengths in _byte_views(values):
        given = lengths > 0
        if (lengths[given] != _TIME_TEXT).any() or (data[starts[given] + 10] != ord(" ")).any():
            return None
    try:
        times = values.cast(pa.timestamp("s"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    extremes = pc.min_max(times.cast(pa.int64()))
    return times if extremes["min"].as_py() >= EPOCH_RANGE[0] and extremes["max"].as_py() <= EPOCH_RANGE[1] else None


def _valid_text(name: str, values: pa.ChunkedArray):
    """Text trimmed of surrounding white space (as str.strip() does), empty text as unknown; states normalized
    and known."""
    if pa.types.is_null(values.type) or values.null_count == len(values):
        return pa.nulls(len(values), pa.string())
    if not pa.types.is_string(values.type):
        return None
    longest = 0
    for data, starts, lengths in _byte_views(values):
        given = lengths > 0
        if _MAY_TRIM[data[starts[given]]].any() or _MAY_TRIM[data[starts[given] + lengths[given] - 1]].any():
            values = pc.utf8_trim_whitespace(values)  # only where some value may need it: it costs a copy
            values = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
            break
        longest = max(longest, int(lengths.max(initial=0)))
    if name == "state":
        known = pc.unique(values).drop_null().to_pylist()
        normal = [normalize_state(v) for v in known]
        if not set(normal) <= set(STATES):
            return None
        return pc.take(pa.array(normal, pa.string()), pc.index_in(values, pa.array(known, pa.string())))
    if longest > max_text(name) and (pc.max(pc.utf8_length(values)).as_py() or 0) > max_text(name):
        return None
    return values
