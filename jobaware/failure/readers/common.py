"""Turning raw columns into the canonical job table, record by record accountable."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from jobaware.errors import InputError
from jobaware.reading import MAX_EXAMPLES, Problem
from jobaware.failure.schema import COLUMNS, INTEGER, NUMERIC, STATES, TIME_COLUMNS, normalize_states

CSV_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass
class Batch:
    """Canonical rows, the problems met, and the quarantined raw records."""

    frame: pd.DataFrame
    problems: list[Problem]
    quarantined: list[dict]


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _present(raw: pd.Series) -> np.ndarray:
    """True where the raw value was given (not null, not an empty string)."""
    if raw.dtype == object or pd.api.types.is_string_dtype(raw):
        return (raw.notna() & (raw.astype("string").str.strip() != "")).to_numpy(dtype=bool, na_value=False)
    return raw.notna().to_numpy()


def _parse_times(raw: pd.Series, epoch_unit: str | None) -> pd.Series:
    if pd.api.types.is_datetime64_any_dtype(raw):
        values = raw.dt.tz_localize(None) if getattr(raw.dt, "tz", None) is not None else raw
        return values.astype("datetime64[s]")
    if pd.api.types.is_numeric_dtype(raw):
        return pd.to_datetime(raw, unit=epoch_unit or "ms", errors="coerce").astype("datetime64[s]")
    text = raw.astype("string").str.strip()
    if epoch_unit:
        numbers = pd.to_numeric(text, errors="coerce")
        return pd.to_datetime(numbers, unit=epoch_unit, errors="coerce").astype("datetime64[s]")
    return pd.to_datetime(text, format=CSV_TIME_FORMAT, errors="coerce").astype("datetime64[s]")


def canonicalize(
    raw: pd.DataFrame,
    *,
    file: str,
    lines: np.ndarray,
    epoch_unit: str | None = None,
    require_state: bool = False,
) -> Batch:
    """Convert raw columns to canonical types; rows with an unreadable value are quarantined.

    `lines` gives each raw row's line (or record) number in `file`, for the report.
    """
    missing = [c for c in ("job_id", "submit_time") if c not in raw.columns]
    if missing:
        raise InputError(f"{file}: missing required column(s) {', '.join(missing)}; found {', '.join(map(str, raw.columns))}")
    n = len(raw)
    bad = np.zeros(n, dtype=bool)
    problems: list[Problem] = []
    out: dict[str, pd.Series] = {}

    def flag(mask: np.ndarray, column: str, reason: str) -> None:
        nonlocal bad
        for i in np.flatnonzero(mask & ~bad)[:MAX_EXAMPLES]:
            problems.append(Problem(file, int(lines[i]), column, _text(raw[column].iloc[i]), reason))
        bad |= mask

    for column in COLUMNS:
        if column not in raw.columns:
            out[column] = pd.Series([None] * n, dtype="object")
            continue
        values = raw[column]
        given = _present(values)
        if column in NUMERIC or column == "job_id":
            parsed = pd.to_numeric(values, errors="coerce")
            flag(given & parsed.isna().to_numpy(), column, "not a number")
            if column in INTEGER:
                whole = parsed.isna() | (parsed == np.floor(parsed))
                flag(~whole.to_numpy(dtype=bool, na_value=True), column, "not a whole number")
            flag(given & (parsed < 0).to_numpy(dtype=bool, na_value=False), column, "negative")
            out[column] = parsed
        elif column in TIME_COLUMNS:
            parsed = _parse_times(values, epoch_unit)
            expected = f"epoch {epoch_unit}" if epoch_unit else f"a time like {CSV_TIME_FORMAT}"
            flag(given & parsed.isna().to_numpy(), column, f"not {expected}")
            out[column] = parsed
        else:
            text = values.astype("string").str.strip()
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
        {"file": file, "line": int(lines[i]), **{c: _text(raw[c].iloc[i]) for c in raw.columns}}
        for i in np.flatnonzero(bad)
    ]
    frame = frame.loc[~bad].reset_index(drop=True)
    return Batch(to_canonical_dtypes(frame), problems, quarantined)


def to_canonical_dtypes(frame: pd.DataFrame) -> pd.DataFrame:
    """Cast a frame with the canonical columns to the canonical pandas dtypes (nullable ints)."""
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
