"""The steps every capability's pipeline shares, as plain functions over folders: ingest, validate,
register, promote. The KFP components in `components/` only call these.

A canonical dataset is a folder: one `<contract>.parquet` per table (held to `data_contracts/<contract>.json`),
`read.json` (the read report: records kept, bad records and the first problems) and `quarantine.jsonl`
(every bad record, with its file and line).

Bad-record budget: a pipeline goes past bad records only while they are at most `budget` of all records
read (default 0.01; 0 allows none); beyond it, validate stops the run with the report. `jobaware data
validate` uses a budget of 0: any bad record fails it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from jobaware import capabilities, sources
from jobaware.errors import ContractError, JobawareError
from jobaware.jsonable import jsonable
from jobaware.reading import QUARANTINE, ReadReport
from jobaware.store import is_store

DEFAULT_BUDGET = 0.01
READ_REPORT = "read.json"


def use_tracking(uri: str) -> None:
    """Point this step at the tracking server: the pipeline's argument, else MLFLOW_TRACKING_URI (from the
    `jobaware-mlflow` Secret on a cluster). A step never falls back to a store of its own."""
    if uri:
        os.environ["MLFLOW_TRACKING_URI"] = uri
    elif not os.environ.get("MLFLOW_TRACKING_URI"):
        raise JobawareError("no MLflow tracking URI for this step: pass tracking_uri, or set MLFLOW_TRACKING_URI "
                            "(on Kubernetes from the Secret jobaware-mlflow, key tracking_uri)")


def ingest(key: str, data: str | list[str], out_dir: str | Path, *, strict: bool = False, progress=None) -> ReadReport:
    """Read the source(s) (local paths or object-store URIs) into a canonical dataset folder."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        capability = capabilities.get(key)
        local = [_from_store(capability, source, Path(tmp) / f"store{i}") if is_store(source) else source
                 for i, source in enumerate(sources.localize(sources.parse(data), Path(tmp)))]
        report = capability.ingest(local, out_dir, strict=strict, progress=progress)
    (out_dir / READ_REPORT).write_text(json.dumps(report.as_dict(), indent=2))
    return report


def _from_store(capability, uri: str, workdir: Path) -> str:
    """A job store's records as the file the capability's ingest reads."""
    if capability.from_store is None:
        raise JobawareError(f"{uri}: a job store; {capability.key} does not train from a job store")
    return capability.from_store(uri, workdir)


def validate(dataset: str | Path, budget: float = DEFAULT_BUDGET) -> dict:
    """Every table against its contract, and the bad records against the budget: one report."""
    from jobaware import contracts

    dataset = Path(dataset)
    if not 0 <= budget <= 1:
        raise JobawareError(f"bad-record budget: expected a fraction in [0, 1], got {budget}")
    read = json.loads((dataset / READ_REPORT).read_text())
    tables = sorted(dataset.glob("*.parquet"))
    if not tables:
        raise JobawareError(f"{dataset}: no canonical table to validate")
    results = [contracts.validate_parquet(table, table.stem) for table in tables]
    total = read["rows"] + read["bad_rows"]
    share = read["bad_rows"] / total if total else 0.0
    return {
        "success": all(r["success"] for r in results) and share <= budget,
        "contracts": results,
        "read": read,
        "budget": budget,
        "bad_share": share,
        "quarantine": str(dataset / QUARANTINE),
    }


def format_validation(report: dict) -> str:
    """Failed expectations and bad records, readable; one line when all is well."""
    from jobaware import contracts

    read = report["read"]
    lines = [contracts.format_report(r) for r in report["contracts"]]
    if read["bad_rows"]:
        verdict = "over" if report["bad_share"] > report["budget"] else "within"
        lines.append(f"{read['bad_rows']:,} bad record(s) of {read['rows'] + read['bad_rows']:,} read "
                     f"({report['bad_share']:.2%}, {verdict} the budget of {report['budget']:.2%}); "
                     f"all in {report['quarantine']}:")
        lines += [f"  - {p}" for p in read["problems"]]
        if read["bad_rows"] > len(read["problems"]):
            lines.append(f"  ... and {read['bad_rows'] - len(read['problems']):,} more")
    return "\n".join(lines)


def validate_step(dataset: str, report_out: str, budget: float = DEFAULT_BUDGET) -> dict:
    """Validate; write the report; stop the run (ContractError) when it fails."""
    report = validate(dataset, budget)
    Path(report_out).write_text(json.dumps(jsonable(report), indent=2, default=str))
    print(format_validation(report))
    if not report["success"]:
        raise ContractError(format_validation(report), report)
    return report


def register_step(key: str, run_id: str) -> str:
    from jobaware import tracking

    return tracking.register(key, run_id)


def promote_step(key: str, version: str) -> dict:
    from jobaware import gate

    decision = gate.promote(key, version)
    print(json.dumps(jsonable(decision), default=str))
    return decision


def train_step(key: str, dataset: str, params: str, validation: str, data: str, truth: str, workdir: str,
               model_out: str) -> tuple[str, dict[str, float]]:
    """Fit and evaluate with the capability's `train`; log the run (`tracking.log_training`); return the MLflow
    run id and the model's metrics."""
    import joblib

    from jobaware import tracking

    capability = capabilities.get(key)
    p = capability.check_params(json.loads(params or "{}"))
    extra = {"truth": truth} if truth else {}
    bundle, evaluation = capability.train(dataset, p, Path(workdir), **extra)
    joblib.dump(bundle, model_out)
    report = json.loads(Path(validation).read_text()) if validation else {}
    run_id = tracking.log_training(key, {**p, "data": data}, bundle, evaluation, report, Path(dataset) / QUARANTINE,
                                   dataset)
    return run_id, evaluation.primary
