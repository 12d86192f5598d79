"""Dates: the year rule of year-less dates (see the package docstring) and a file's first event time."""

from __future__ import annotations

import re
import time as _time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from jobaware.hold.reader.sources import Source

HALF_YEAR = 6 * 32  # in units of the month*32+day ordinal


def days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm), vectorised."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * (m + np.where(m > 2, -3, 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def days_in_month(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[np.clip(m, 0, 12)]
    return days + ((m == 2) & leap)


_DATE_HEADER = re.compile(
    rb"^\d{3} \([^)\n]*\) (?:(\d{4})-(\d\d)-(\d\d)[ T]|(\d\d)/(\d\d) )(\d\d):(\d\d):(\d\d)", re.MULTILINE)


def anchor_year(source: Source, block: int = 1 << 20) -> int | None:
    """The year of the source's first year-less date by the package's rule; None when it starts with ISO dates."""
    dates: list[tuple[int, int, int]] = []
    iso: tuple[int, int, int] | None = None
    with source.open() as handle:
        carry = b""
        while iso is None:
            chunk = handle.read(block)
            if not chunk:
                break
            text = carry + chunk
            cut = text.rfind(b"\n") + 1
            text, carry = text[:cut], text[cut:]
            for match in _DATE_HEADER.finditer(text):
                g = match.groups()
                if g[0]:
                    iso = (int(g[0]), int(g[1]), int(g[2]))
                    break
                dates.append((int(g[3]), int(g[4]), int(g[5]) * 3600 + int(g[6]) * 60 + int(g[7])))
    if not dates:
        return None
    rollovers = sum(b[0] * 32 + b[1] < a[0] * 32 + a[1] - HALF_YEAR for a, b in zip(dates, dates[1:]))
    month, day, seconds = dates[-1]
    if iso is not None:  # the year-less run ends just before an ISO date
        last_year = iso[0] - int(iso[1] * 32 + iso[2] < month * 32 + day - HALF_YEAR)
    else:
        mtime = _time.localtime(source.written)
        now = (mtime.tm_mon, mtime.tm_mday, mtime.tm_hour * 3600 + mtime.tm_min * 60 + mtime.tm_sec)
        last_year = mtime.tm_year - int((month, day, seconds) > now)
    return last_year - rollovers


@dataclass
class DateState:
    """Per-file year context for year-less dates (see the package docstring)."""

    year: int
    ordinal: int | None = None



def resolve_years(iso: np.ndarray, old: np.ndarray, year: np.ndarray, month: np.ndarray, day: np.ndarray,
           dates: DateState) -> np.ndarray:
    """The year of every header: ISO years as written, year-less ones by context and roll-over."""
    used = iso | old
    if not old.any():
        if iso.any():
            last = np.flatnonzero(iso)[-1]
            dates.year, dates.ordinal = int(year[last]), int(month[last] * 32 + day[last])
        return year
    index = np.flatnonzero(used)
    ordinal = (month * 32 + day)[index]
    previous = np.concatenate([[dates.ordinal if dates.ordinal is not None else ordinal[0]], ordinal[:-1]])
    roll = old[index] & (ordinal < previous - HALF_YEAR)
    rolls = np.cumsum(roll)
    is_iso = iso[index]
    # the year and roll count at the last ISO event at or before each event (the file context before it)
    last_iso = np.maximum.accumulate(np.where(is_iso, np.arange(len(index)), -1))
    base_year = np.where(last_iso >= 0, year[index][np.maximum(last_iso, 0)], dates.year)
    base_rolls = np.where(last_iso >= 0, rolls[np.maximum(last_iso, 0)], 0)
    resolved = np.where(is_iso, year[index], base_year + rolls - base_rolls)
    out = year.copy()
    out[index] = resolved
    dates.year, dates.ordinal = int(resolved[-1]), int(ordinal[-1])
    return out


_FIRST = re.compile(rb"^\d{3} \(-?\d+\.-?\d+\.-?\d+\) (?:(\d{4})-(\d\d)-(\d\d)[ T]|(\d\d)/(\d\d) )(\d\d):(\d\d):(\d\d)",
                    re.MULTILINE)


def first_time(source: Source, year: int) -> int | None:
    """Seconds since the epoch of the first parseable header in the source's first MiB (for ordering)."""
    with source.open() as handle:
        match = _FIRST.search(handle.read(1 << 20))
    if not match:
        return None
    g = match.groups()
    y, m, d = (int(g[0]), int(g[1]), int(g[2])) if g[0] else (year, int(g[3]), int(g[4]))
    try:
        return int(pd.Timestamp(year=y, month=m, day=d, hour=int(g[5]), minute=int(g[6]), second=min(int(g[7]), 59))
                   .timestamp())
    except ValueError:
        return None
