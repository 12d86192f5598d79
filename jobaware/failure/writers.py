"""Writing job tables in the exact NREL Eagle encodings (CSV, JSON records, Parquet). In a CSV, a text that a
spreadsheet would run as a formula (starting with = + - @ tab or CR) is written after a `'`, as OWASP recommends; the
CSV reader takes it off again (`jobaware.jobtable.common.formulas_escaped`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from jobaware.jobtable.common import formulas_escaped
from jobaware.jobtable.schema import CANONICAL, COLUMNS


def _float_text(values: pd.Series) -> pd.Series:
    """Floats as the NREL CSV prints them: `172800.0`; missing values stay empty."""
    numbers = pd.to_numeric(values).astype("float64")
    whole = numbers.notna() & (numbers == np.floor(numbers))
    text = pd.Series(pd.NA, index=numbers.index, dtype="string")
    text[whole] = numbers[whole].astype("int64").astype("string") + ".0"
    other = numbers.notna() & ~whole
    text[other] = numbers[other].map(repr).astype("string")
    return text


def _quoting(table: pa.Table) -> str:
    """"none" (NREL's own bytes) unless a value holds a comma, quote or line break; then quote the strings."""
    for column in table.columns:
        if (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)) and pc.any(pc.match_substring_regex(column, r'[,"\r\n]')).as_py():
            return "needed"
    return "none"


class NrelWriter:
    """Streams chunks into one CSV, JSON-records or Parquet file, byte-for-byte in the NREL encodings."""

    def __init__(self, out: Path, fmt: str, append: bool = False):
        if append and fmt != "csv":
            raise ValueError("only CSV files can be appended to")
        self.first = not (append and out.exists() and out.stat().st_size > 0)
        self.fmt = fmt
        self.handle = open(out, "ab" if append else "wb") if fmt != "parquet" else None
        self.parquet = pq.ParquetWriter(out, CANONICAL) if fmt == "parquet" else None
        if fmt == "json":
            self.handle.write(b"[")

    def write(self, jobs: pd.DataFrame) -> None:
        if self.fmt == "parquet":
            typed = jobs.assign(**{c: jobs[c].astype("datetime64[s]") for c in ("submit_time", "start_time", "end_time")})
            self.parquet.write_table(pa.Table.from_pandas(typed[list(COLUMNS)], schema=CANONICAL, preserve_index=False))
        elif self.fmt == "csv":
            text = jobs.copy()
            for column in ("wallclock_req", "mem_req", "run_time"):
                text[column] = _float_text(text[column])
            for column in ("submit_time", "start_time", "end_time"):
                text[column] = text[column].dt.strftime("%Y-%m-%d %H:%M:%S")
            table = formulas_escaped(pa.Table.from_pandas(text.astype("string"), preserve_index=False))
            if self.first:
                self.handle.write((",".join(COLUMNS) + "\n").encode())
            options = pacsv.WriteOptions(include_header=False, quoting_style=_quoting(table))
            pacsv.write_csv(table, self.handle, write_options=options)
        else:
            records = jobs.to_json(orient="records", date_unit="ms")[1:-1]
            if records:
                self.handle.write((b"" if self.first else b",") + records.encode())
        self.first = False

    def close(self) -> None:
        if self.parquet:
            self.parquet.close()
        if self.handle:
            if self.fmt == "json":
                self.handle.write(b"]")
            self.handle.close()
