"""Fit for the input: what a model was trained on, and how far an input to predict is from it.

At training, `profile` describes the canonical dataset (its tables, the 1st, 50th and 99th percentile of
every numeric column) and its sources (synthetic when a generator's ground truth lies beside them, public when
they are a list of public traces, the records of other sites (a `*.public.json` manifest), real otherwise); it is
logged with the run (`fit/profile.json`). At prediction, the slice describes its input
with `describe` (the same function over the same canonical columns) and `notes` says in a line each where
the input lies outside what the model saw.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# what the generators write beside their data: `<name>.truth.parquet`, `synthetic_truth.csv`, `families.csv`
TRUTH_MARKS = ("truth", "families")
# a manifest of public traces: JSON with "traces", a list of {"name", "path"} (paths relative to the manifest)
PUBLIC_SUFFIX = ".public.json"
# a column is far when the input's median lies outside the training's 1st..99th percentile, or its own 1st or
# 99th percentile lies beyond them by more than this share of the training's range
FAR_SHARE = 0.25
MIN_ROWS = 20
# positions and identifiers: their range says nothing of the jobs
IDENTITY = frozenset({"seq", "line", "cluster", "proc", "subproc"})


def _compared(column: str) -> bool:
    return column not in IDENTITY and not column.lower().endswith("id")


def is_public(source: str | Path) -> bool:
    """Whether a source is a manifest of public traces (PUBLIC_SUFFIX)."""
    return str(source).lower().endswith(PUBLIC_SUFFIX)


def public_traces(manifest: str | Path) -> list[dict]:
    """The traces a public manifest lists: {"name", "path"} each, the path made absolute."""
    import json

    from jobaware.errors import InputError

    manifest = Path(manifest)
    try:
        traces = json.loads(manifest.read_text())["traces"]
        return [{"name": str(t["name"]), "path": str((manifest.parent / t["path"]).resolve())} for t in traces]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{manifest}: not a list of public traces ({type(exc).__name__}: {exc})") from None


def source_kind(sources: list[str]) -> str:
    """`synthetic` when a generator's ground truth lies beside (or inside, for a folder) every source; `public` when
    every source is a manifest of public traces."""
    def generated(source: str) -> bool:
        path = Path(source)
        folder, stem = (path, "") if path.is_dir() else (path.parent, path.name.split(".")[0])
        try:
            return any(p.name.startswith(stem) and any(m in p.name for m in TRUTH_MARKS) for p in folder.iterdir())
        except OSError:
            return False

    if sources and all(is_public(s) for s in sources):
        return "public"
    return "synthetic" if sources and all(generated(s) for s in sources) else "real"


def describe(frames: dict, sources: list[str]) -> dict:
    """The profile of canonical tables (`{table name: DataFrame, or its number of rows alone}`) read from
    `sources`."""
    tables = {}
    for name, frame in frames.items():
        if isinstance(frame, int):
            tables[name] = {"rows": frame, "columns": {}}
            continue
        columns = {}
        for column, numbers in numeric_columns(frame).items():
            if not _compared(column):
                continue
            numbers = numbers[np.isfinite(numbers)]
            if len(numbers):
                columns[column] = [float(q) for q in np.percentile(numbers, [1, 50, 99])]
        tables[name] = {"rows": int(len(frame)), "columns": columns}
    kind = source_kind(sources)
    named = {"traces": [t["name"] for s in sources for t in public_traces(s)]} if kind == "public" else {}
    return {"kind": kind, "sources": [str(s) for s in sources][:20], **named, "tables": tables}


def profile(dataset: str | Path, sources: list[str]) -> dict:
    """The profile of a canonical dataset folder (its `<table>.parquet` files) and of its sources."""
    import pandas as pd

    return describe({p.stem: pd.read_parquet(p) for p in sorted(Path(dataset).glob("*.parquet"))}, sources)


def notes(trained: dict | None, given: dict | None, version: str) -> list[str]:
    """One line per way the input (`given`, from `describe`) is far from the training data (`trained`)."""
    if not trained or not given:
        return []
    found = []
    if trained.get("kind") == "synthetic" and given.get("kind") == "real":
        found.append(f"model version {version} was trained on synthetic data; this input is real data, "
                     f"so its scores may not carry over (train on data like it: jobaware pipeline run --data ...)")
    known = trained.get("tables", {})
    for name, table in given.get("tables", {}).items():
        if known and name not in known:
            found.append(f"model version {version} was trained on {', '.join(known)}; this input is {name}")
            continue
        if table["rows"] < MIN_ROWS:
            continue
        far = [(column, low, high) for column, (low, _, high) in known.get(name, {}).get("columns", {}).items()
               if column in table["columns"] and _compared(column) and _outside(table["columns"][column], low, high)]
        if far:
            listed = ", ".join(f"{c} (trained on {lo:g}..{hi:g})" for c, lo, hi in far[:3])
            found.append(f"this input's {name} lies outside model version {version}'s training range in "
                         f"{len(far)} column(s): {listed}")
    return found


def _outside(quantiles: list[float], low: float, high: float) -> bool:
    """True when the input's middle (its median) or much of its spread lies beyond the training range."""
    q01, q50, q99 = quantiles
    span = max(high - low, 1e-9)
    return not low <= q50 <= high or (q99 - high) > FAR_SHARE * span or (low - q01) > FAR_SHARE * span


def batch_flags(trained: dict | None, columns: dict[str, np.ndarray]) -> list[str]:
    """For a service's hot path: the numeric columns of a batch (one array per canonical column) with values
    outside the training's 1st..99th percentile, one line each (vectorised: a comparison per column)."""
    if not trained or len(trained.get("tables", {})) != 1:
        return []
    (table,) = trained["tables"].values()
    found = []
    for column, (low, _, high) in table["columns"].items():
        values = columns.get(column) if _compared(column) else None
        if values is None or values.dtype.kind != "f":
            continue
        outside = int(np.count_nonzero((values < low) | (values > high)))  # NaN (unknown) is never outside
        if outside:
            found.append(f"{column}: {outside} of {len(values)} outside the training range {low:g}..{high:g}")
    return found


def answer_flags(trained: dict | None, version: str, columns: dict[str, np.ndarray] | None = None) -> list[str]:
    """A service answer's `fit` field: a line when the model was trained on synthetic data or on public traces,
    then `batch_flags` for the request's numeric columns (float arrays by canonical column name). Not for a model
    trained on public traces: other sites' sizes are not a site's, and such a model reads a request's shape
    against the site's own jobs, not its numbers."""
    public = (trained or {}).get("kind") == "public"
    return trained_line(trained, version) + ([] if public else batch_flags(trained, columns or {}))


def trained_line(trained: dict | None, version: str) -> list[str]:
    """The line an answer carries about what its model learnt from, when that is not the site's own data."""
    kind = (trained or {}).get("kind")
    if kind == "synthetic":
        return [f"model version {version} was trained on synthetic data; its answers on a site's real jobs may not "
                f"carry over (train on your own jobs: jobaware pipeline run --data ...)"]
    if kind == "public":
        names = ", ".join(trained.get("traces") or []) or "other sites"
        return [f"model version {version} was trained on public traces ({names}), not on this site's jobs; a site's "
                f"own finished jobs train its model (jobaware pipeline run ... --data STORE)"]
    return []


def numeric_columns(frame) -> dict[str, np.ndarray]:
    """A DataFrame's numeric columns as float arrays (missing values NaN), for `batch_flags`."""
    return {str(c): frame[c].to_numpy(dtype="float64", na_value=np.nan) for c in frame.columns
            if _is_numeric(frame[c])}


def _is_numeric(values) -> bool:
    return values.dtype.kind in "iuf" or str(values.dtype) in ("Int64", "Int32", "Int16", "Float64")
