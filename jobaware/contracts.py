"""Data contracts: Great Expectations suites (data_contracts/*.json) run over canonical tables."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from jobaware.errors import ContractError, InputError

BATCH_ROWS = 1_000_000
SAMPLE = 5


def contracts_dir() -> Path:
    override = os.environ.get("JOBAWARE_CONTRACTS")
    return Path(override) if override else Path(__file__).resolve().parents[1] / "data_contracts"


def load_suite(name: str) -> dict:
    path = contracts_dir() / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in contracts_dir().glob("*.json"))
        raise InputError(f"no data contract '{name}' (looked in {contracts_dir()}; have {', '.join(known)})")
    return json.loads(path.read_text())


def _gx_suite(spec: dict):
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    suite = gx.ExpectationSuite(name=spec["name"])
    for item in spec["expectations"]:
        suite.add_expectation_configuration(ExpectationConfiguration(type=item["type"], kwargs=item["kwargs"]))
    return suite


def _validator():
    import great_expectations as gx

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_pandas("jobaware").add_dataframe_asset("table")
    return asset.add_batch_definition_whole_dataframe("whole")


def validate_frames(frames: Iterable[pd.DataFrame], contract: str) -> dict:
    """Validate batches of one table against a contract; merge the results into one report."""
    spec = load_suite(contract)
    suite = _gx_suite(spec)
    definition = _validator()
    rows = 0
    merged: dict[int, dict] = {}
    for frame in frames:
        rows += len(frame)
        # GE's pandas checks want NumPy dtypes: nullable ints -> float, strings -> object
        plain = frame.astype({c: "float64" for c in frame.columns if str(frame[c].dtype) == "Int64"})
        plain = plain.astype({c: object for c in plain.columns if pd.api.types.is_string_dtype(plain[c])})
        result = definition.get_batch(batch_parameters={"dataframe": plain}).validate(
            suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE}
        )
        for i, item in enumerate(result.results):
            kwargs = item.expectation_config.kwargs
            entry = merged.setdefault(
                i,
                {
                    "expectation": item.expectation_config.type,
                    "column": kwargs.get("column") or ", ".join(
                        str(kwargs[k]) for k in ("column_A", "column_B") if k in kwargs
                    ) or None,
                    "success": True,
                    "unexpected_count": 0,
                    "examples": [],
                    "error": None,
                },
            )
            res = item.result or {}
            entry["success"] &= bool(item.success)
            entry["unexpected_count"] += int(res.get("unexpected_count") or 0)
            room = SAMPLE - len(entry["examples"])
            if room > 0 and not item.success and entry["expectation"] == "expect_column_values_to_not_be_null":
                entry["examples"] += _null_rows(frame, entry["column"], rows - len(frame))[:room]
            elif room > 0:
                entry["examples"] += [_plain(v) for v in (res.get("partial_unexpected_list") or [])[:room]]
            if item.exception_info and item.exception_info.get("raised_exception"):
                entry["error"] = str(item.exception_info.get("exception_message"))[:300]
            if not item.success and not res and not entry["error"]:
                entry["error"] = f"observed {res.get('observed_value', item.result)}"
    failed = [e for e in merged.values() if not e["success"]]
    return {"contract": contract, "rows": rows, "success": not failed, "expectations": len(merged),
            "failed": failed, "results": list(merged.values())}


def _null_rows(frame: pd.DataFrame, column: str, offset: int) -> list[str]:
    """Where `column` is null: the row's number in the whole table and, where the table has one, its job id."""
    where = np.flatnonzero(frame[column].isna().to_numpy())[:SAMPLE]
    with_id = "job_id" in frame and column != "job_id"
    return [f"row {offset + i + 1}" + (f" (job_id {frame['job_id'].iloc[i]})" if with_id else "") for i in where]


def _plain(value):
    if isinstance(value, dict | list | tuple):
        return json.loads(json.dumps(value, default=str))
    return value if isinstance(value, int | float | str | bool) or value is None else str(value)


def validate_parquet(path: str | Path, contract: str) -> dict:
    """Validate a canonical Parquet table batch by batch (bounded memory)."""
    source = pq.ParquetFile(path)
    frames = (batch.to_pandas(types_mapper=_types) for batch in source.iter_batches(batch_size=BATCH_ROWS))
    return validate_frames(frames, contract)


def _types(arrow_type):
    import pyarrow as pa

    if pa.types.is_integer(arrow_type):
        return pd.Int64Dtype()
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return pd.StringDtype()
    return None


def format_report(report: dict) -> str:
    """A readable account of the failed expectations."""
    if report["success"]:
        return f"contract {report['contract']}: all {report['expectations']} expectations met on {report['rows']:,} rows"
    lines = [f"contract {report['contract']}: {len(report['failed'])} of {report['expectations']} expectations failed on {report['rows']:,} rows"]
    for e in report["failed"]:
        detail = f"{e['unexpected_count']:,} row(s)" + (f", e.g. {e['examples']}" if e["examples"] else "")
        if e["error"]:
            detail += f" ({e['error']})"
        lines.append(f"  - {e['expectation']} on column {e['column']}: {detail}")
    return "\n".join(lines)


def require(report: dict) -> None:
    """Stop a run at a failed contract."""
    if not report["success"]:
        raise ContractError(format_report(report), report)
