"""Header lines `EEE (CLUSTER.PROC.SUBPROC) DATE TIME TEXT`, all of a block decoded at once by position."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jobaware.hold.reader.dates import DateState, days_from_civil, days_in_month, resolve_years

ID_WIDTH = 48  # bytes of a header decoded by position: code and job id ...
DATE_WIDTH = 40  # ... and from the date on
MAX_DIGITS = 18


def _number(digits: np.ndarray, start: np.ndarray, signed: bool = True):
    """The integer written at column `start` of each row of `digits` (byte - 48): an optional '-', then up to
    MAX_DIGITS digits. Returns (value, column after it, at least one digit)."""
    rows = np.arange(len(start))
    last = digits.shape[1] - 1
    negative = (digits[rows, np.minimum(start, last)] == 45 - 48) & signed
    column = start + negative
    value = np.zeros(len(start), np.int64)
    going = np.ones(len(start), bool)
    count = np.zeros(len(start), np.int64)
    for _ in range(MAX_DIGITS):
        d = digits[rows, np.minimum(column, last)]
        going &= (d >= 0) & (d <= 9) & (column < last)
        if not going.any():
            break
        value = np.where(going, value * 10 + d, value)
        column = column + going
        count += going
    return np.where(negative, -value, value), column, count > 0


def _two(digits: np.ndarray, at: int | np.ndarray, rows: np.ndarray | None = None):
    """Two-digit fields at column `at` (a column, or one per row): (value, both were digits)."""
    if rows is None:
        a, b = digits[:, at], digits[:, at + 1]
    else:
        a, b = digits[rows, at], digits[rows, at + 1]
    return a.astype(np.int64) * 10 + b, (a >= 0) & (a <= 9) & (b >= 0) & (b <= 9)


@dataclass
class Header:
    ok: np.ndarray
    reason: np.ndarray
    code: np.ndarray
    cluster: np.ndarray
    proc: np.ndarray
    subproc: np.ndarray
    ms: np.ndarray
    utc: np.ndarray
    text_start: np.ndarray


def decode_headers(pad: np.ndarray, starts: np.ndarray, ends: np.ndarray, dates: DateState) -> Header:
    """Decode every header line of the block at once; `ok` false where the line does not parse."""
    n = len(starts)
    rows = np.arange(n)
    ids = pad[starts[:, None] + np.arange(ID_WIDTH)].astype(np.int16) - 48
    reason = np.full(n, "", dtype=object)
    code = ids[:, 0] * 100 + ids[:, 1] * 10 + ids[:, 2]
    cluster, p1, ok1 = _number(ids, np.full(n, 5))
    proc, p2, ok2 = _number(ids, p1 + 1)
    subproc, p3, ok3 = _number(ids, p2 + 1)
    last = ID_WIDTH - 2
    ids_ok = ok1 & ok2 & ok3 & (ids[rows, np.minimum(p1, last)] == 46 - 48) & (ids[rows, np.minimum(p2, last)] == 46 - 48) \
        & (ids[rows, np.minimum(p3, last)] == 41 - 48) & (ids[rows, np.minimum(p3 + 1, last)] == 32 - 48)
    reason[~ids_ok] = "header: job id is not (CLUSTER.PROC.SUBPROC)"
    date_start = starts + np.minimum(p3 + 2, last)
    date = pad[date_start[:, None] + np.arange(DATE_WIDTH)].astype(np.int16) - 48
    iso = (date[:, 4] == 45 - 48) & (date[:, 7] == 45 - 48) & ((date[:, 10] == 32 - 48) | (date[:, 10] == 84 - 48))
    old = ~iso & (date[:, 2] == 47 - 48) & (date[:, 5] == 32 - 48)
    century, ok_c = _two(date, 0)
    decade, ok_d = _two(date, 2)
    year = century * 100 + decade
    month = np.where(iso, _two(date, 5)[0], _two(date, 0)[0])
    day = np.where(iso, _two(date, 8)[0], _two(date, 3)[0])
    md_ok = np.where(iso, _two(date, 5)[1] & _two(date, 8)[1] & ok_c & ok_d, _two(date, 0)[1] & _two(date, 3)[1])
    clock = np.where(iso, 11, 6)
    hh, ok_h = _two(date, clock, rows)
    mi, ok_m = _two(date, clock + 3, rows)
    ss, ok_s = _two(date, clock + 6, rows)
    colons = (date[rows, clock + 2] == 58 - 48) & (date[rows, clock + 5] == 58 - 48)
    form_ok = (iso | old) & md_ok & ok_h & ok_m & ok_s & colons
    reason[ids_ok & ~form_ok] = "header: date/time is neither YYYY-MM-DD HH:MM:SS nor MM/DD HH:MM:SS"
    end = clock + 8
    millis = np.zeros(n, np.int64)
    has_frac = date[rows, end] == 46 - 48
    if has_frac.any():
        frac, frac_end, _ = _number(date, end + 1, signed=False)
        places = frac_end - (end + 1)
        with_frac = has_frac & (places > 0)
        millis = np.where(with_frac, frac * 1000 // 10 ** np.clip(places, 0, MAX_DIGITS), 0)
        end = np.where(with_frac, frac_end, end)
    utc = date[rows, np.minimum(end, DATE_WIDTH - 1)] == 90 - 48
    end = end + utc
    text_start = date_start + end + (date[rows, np.minimum(end, DATE_WIDTH - 1)] == 32 - 48)
    form_ok &= (date_start + end <= ends) & (end < DATE_WIDTH)
    year = resolve_years(iso & form_ok & ids_ok, old & form_ok & ids_ok, year, month, day, dates)
    valid = (month >= 1) & (month <= 12) & (day >= 1) & (day <= days_in_month(year, month)) \
        & (hh <= 23) & (mi <= 59) & (ss <= 60)
    ok = ids_ok & form_ok & valid
    reason[ids_ok & form_ok & ~valid] = "header: no such date or time"
    days = days_from_civil(year.astype(np.int64), np.clip(month, 1, 12).astype(np.int64),
                            np.clip(day, 1, 31).astype(np.int64))
    ms = (days * 86400 + hh * 3600 + mi * 60 + ss) * 1000 + millis
    return Header(ok, reason, code.astype(np.int64), cluster, proc, subproc, ms, utc, text_start)
