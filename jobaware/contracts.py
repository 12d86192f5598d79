"""Data contracts: Great Expectations suites (data_contracts/*.json) run over canonical tables."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from jobaware.errors import ContractError, InputError
from jobaware.packaged import bundled

BATCH_ROWS = 1_000_000
SAMPLE = 5


def contracts_dir() -> Path:
    override = os.environ.get("JOBAWARE_CONTRACTS")
    return Path(override) if override else bundled("data_contracts")


def load_suite(name: str) -> dict:
    path = contracts_dir() / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in contracts_dir().glob("*.json"))
        raise InputError(f"no data contract '{name}' (looked in {contracts_dir()}; have {', '.join(known)})")
    return json.loads(path.read_text())


def _gx_suite(name: str, items: list[dict]):
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    suite = gx.ExpectationSuite(name=name)
    for item in items:
        suite.add_expectation_configuration(ExpectationConfiguration(type=item["type"], kwargs=item["kwargs"]))
    return suite


# expectations about the table's columns, not its rows: checked once, on the table's schema
SCHEMA_EXPECTATIONS = ("expect_table_columns_to_match_set", "expect_table_columns_to_match_ordered_list")


def read_columns(spec: dict) -> set[str]:
    """The columns whose values some expectation of a suite reads."""
    columns = set()
    for item in spec["expectations"]:
        kwargs = item["kwargs"]
        columns.update(kwargs[k] for k in ("column", "column_A", "column_B") if k in kwargs)
        columns.update(kwargs.get("column_list", []))
    return columns


def _validator():
    import great_expectations as gx
    from great_expectations.execution_engine import pandas_execution_engine

    # GE fingerprints every in-memory batch under 1 GB by hashing all of its values (its batch metadata, which
    # jobaware does not keep); that costs as much as the checks themselves, so it is off
    pandas_execution_engine.HASH_THRESHOLD = 0

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_pandas("jobaware").add_dataframe_asset("table")
    return asset.add_batch_definition_whole_dataframe("whole")


def validate_frames(frames: Iterable[pd.DataFrame], contract: str, schema: pd.DataFrame | None = None) -> dict:
    """Validate batches of one table against a contract; merge the results into one report.

    With `schema` (the table's columns, no rows) the schema expectations are checked on it, once, and the frames
    need to hold only the columns the other expectations read (`read_columns`) and `job_id`."""
    spec = load_suite(contract)
    items = list(enumerate(spec["expectations"]))
    on_schema = [(i, e) for i, e in items if e["type"] in SCHEMA_EXPECTATIONS] if schema is not None else []
    on_rows = [(i, e) for i, e in items if (i, e) not in on_schema]
    definition = _validator()
    checked = read_columns(spec)
    merged: dict[int, dict] = {}
    for suite in _suites(contract, on_schema):
        _merge(merged, suite, _validated(definition, suite, schema), schema, 0)
    row_suites = _suites(contract, on_rows)
    rows = 0
    for frame in frames:
        rows += len(frame)
        # GE's numeric checks want NumPy numbers (nullable ints -> float); text is passed as it is read (a test
        # holds GE's verdicts on Arrow-backed text to its verdicts on Python strings)
        plain = frame.astype({c: "float64" for c in checked & set(frame.columns) if str(frame[c].dtype) == "Int64"})
        for suite in row_suites:
            _merge(merged, suite, _validated(definition, suite, plain), frame, rows - len(frame))
    results = [merged[i] for i in sorted(merged)]
    failed = [e for e in results if not e["success"]]
    return {"contract": contract, "rows": rows, "success": not failed, "expectations": len(results),
            "failed": failed, "results": results}


def _key(kind: str, kwargs: dict) -> tuple:
    """An expectation's type and domain: GE keeps one expectation per key in a suite (a second replaces the first)."""
    return (kind, kwargs.get("column"), kwargs.get("column_A"), kwargs.get("column_B"),
            tuple(kwargs.get("column_list", ())))


def _suites(contract: str, items: list[tuple[int, dict]]) -> list[tuple[dict, object]]:
    """The items in as few GE suites as hold them all, no two of one key in a suite; each as ({key: position},
    suite). (Two checks of one column of one type, as a strict bound and a `mostly` one, are both kept.)"""
    layers: list[dict[tuple, tuple[int, dict]]] = []
    for position, item in items:
        key = _key(item["type"], item["kwargs"])
        layer = next((layer for layer in layers if key not in layer), None)
        if layer is None:
            layer = {}
            layers.append(layer)
        layer[key] = (position, item)
    return [({key: position for key, (position, _) in layer.items()},
             _gx_suite(contract, [item for _, item in layer.values()])) for layer in layers]


def _validated(definition, suite: tuple[dict, object], frame: pd.DataFrame):
    return definition.get_batch(batch_parameters={"dataframe": frame}).validate(
        suite[1], result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE})


def _merge(merged: dict[int, dict], suite: tuple[dict, object], result, frame: pd.DataFrame, offset: int) -> None:
    """Fold one batch's results into the report's entries (kept by the expectation's place in the contract)."""
    positions = suite[0]
    for item in result.results:
        kwargs = item.expectation_config.kwargs
        entry = merged.setdefault(
            positions[_key(item.expectation_config.type, kwargs)],
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
            entry["examples"] += _null_rows(frame, entry["column"], offset)[:room]
        elif room > 0:
            entry["examples"] += [_plain(v) for v in (res.get("partial_unexpected_list") or [])[:room]]
        if item.exception_info and item.exception_info.get("raised_exception"):
            entry["error"] = str(item.exception_info.get("exception_message"))[:300]
        if not item.success and not res and not entry["error"]:
            entry["error"] = f"observed {res.get('observed_value', item.result)}"


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
    """Validate a canonical Parquet table batch by batch (bounded memory), reading only the columns whose values
    the contract checks; the schema expectations are checked on the file's schema."""
    source = pq.ParquetFile(path)
    wanted = read_columns(load_suite(contract)) | {"job_id"}
    columns = [name for name in source.schema_arrow.names if name in wanted]
    schema = source.schema_arrow.empty_table().to_pandas(types_mapper=_types)
    frames = (batch.to_pandas(types_mapper=_types)
              for batch in source.iter_batches(batch_size=BATCH_ROWS, columns=columns))
    with ThreadPoolExecutor(1, thread_name_prefix="contract-read") as reader:
        return validate_frames(_read_ahead(reader, frames), contract, schema=schema)


def _read_ahead(reader: ThreadPoolExecutor, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The frames, each read by `reader` while the one before is checked (and the first while Great Expectations
    is imported): Arrow decodes without the interpreter's lock, so reading and checking share the cores."""
    pending = reader.submit(next, frames, None)

    def ahead() -> Iterator[pd.DataFrame]:
        nonlocal pending
        while (frame := pending.result()) is not None:
            pending = reader.submit(next, frames, None)
            yield frame

    return ahead()


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
