"""The commands that read the registry and the runs: `jobaware models show`, `jobaware runs list|show`,
`jobaware capabilities`. Heavy libraries are imported inside the commands: `jobaware --help` stays fast."""

from __future__ import annotations

from typing import Annotated

import typer

from jobaware import capabilities
from jobaware.console import err, out, show
from jobaware.errors import JobawareError

runs_app = typer.Typer(help="The MLflow runs: training, sweeps, promotions, rollbacks.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON instead of tables")]


def models_show(
    key: Annotated[str, typer.Argument(help=f"capability: {', '.join(capabilities.keys())}")],
    version: Annotated[str, typer.Argument(help="model version")],
    as_json: JsonFlag = False,
):
    """A version: the data it was trained on, its parameters, every baseline's metrics, its gate history."""
    from jobaware import tracking

    capabilities.get(key)
    described = tracking.describe_version(key, version)
    if as_json:
        show(described, True)
        return
    trained = described["trained_on"]
    show(None, False, [{"model": described["model"], "version": described["version"],
                        "aliases": ",".join(described["aliases"]), described["metric"]: described["score"],
                        "created": described["created"], "run_id": described["run_id"]}], title="version")
    show(None, False, [{"data": trained["data"] or "unknown", "kind": trained["kind"],
                        "tables": ", ".join(f"{t} ({n:,} rows)" for t, n in trained["tables"].items()),
                        "feature_version": trained["feature_version"]}], title="trained on")
    if described["params"]:
        show(None, False, [{"parameter": k, "value": v} for k, v in described["params"].items()], title="parameters")
    columns = capabilities.get(key).metrics_table or sorted(
        {m for values in described["metrics"].values() if isinstance(values, dict)
         for m, v in values.items() if isinstance(v, int | float)})  # --json has every metric
    if columns:
        show(None, False, [{"model": name, **{m: values.get(m, float("nan")) for m in columns}}
                           for name, values in described["metrics"].items() if isinstance(values, dict)],
             title="metrics (the model and its baselines, on its evaluation data)")
    if described["gate"]:
        show(None, False, described["gate"], title="gate history")
    else:
        out.print("gate history: no decision on this version yet", highlight=False)


def runs_list(
    key: Annotated[str, typer.Argument(help="capability (default: all)")] = "",
    limit: Annotated[int, typer.Option(help="how many runs, newest first")] = 20,
    as_json: JsonFlag = False,
):
    """The newest runs of one or every capability."""
    from jobaware import tracking

    if not 1 <= limit <= 10_000:
        raise JobawareError(f"--limit: expected 1..10,000, got {limit}")
    rows = tracking.list_runs([capabilities.get(key).key] if key else capabilities.keys(), limit)
    if not rows and not as_json:
        out.print("no runs yet; run `jobaware pipeline run <capability>`")
        return
    show(rows, as_json, rows)


def runs_show(run_id: Annotated[str, typer.Argument(help="an MLflow run id")], as_json: JsonFlag = False):
    """A run's parameters, metrics, tags and artifacts."""
    from jobaware import tracking

    described = tracking.describe_run(run_id)
    if as_json:
        show(described, True)
        return
    show(None, False, [{k: described[k] for k in ("run_id", "experiment", "name", "status", "started")}], title="run")
    for part in ("params", "metrics", "tags"):
        if described[part]:
            show(None, False, [{"name": k, "value": v} for k, v in described[part].items()], title=part)
    out.print(f"artifacts: {', '.join(described['artifacts']) or 'none'}", highlight=False, soft_wrap=True)


def capabilities_command(as_json: JsonFlag = False):
    """Every capability: its question, the formats it reads, its champion and what the champion was trained on."""
    from jobaware import tracking

    rows, unread = [], None
    for key, capability in capabilities.registry().items():
        row = {"key": key, "question": capability.question, "formats": "; ".join(capability.formats),
               "champion": None, "metric": capability.primary_metric, "score": None, "trained_on": None}
        try:
            version = tracking.champion_version(key)
            if version:
                described = tracking.describe_version(key, version)
                trained = described["trained_on"]
                row.update(champion=version, trained_on=f"{trained['kind']} {', '.join(trained['tables'])}: "
                                                        f"{trained['data'] or 'unknown'}".strip())
                row["score"] = described["score"]
        except JobawareError as exc:  # no store yet, or the registry unreadable: the capability is still listed
            unread = str(exc)
        rows.append(row)
    show(rows, as_json, rows)
    if unread and not as_json:
        err.print(f"champions unknown: {unread}", highlight=False, soft_wrap=True)


def register(app: typer.Typer, models_app: typer.Typer) -> None:
    models_app.command("show")(models_show)
    runs_app.command("list")(runs_list)
    runs_app.command("show")(runs_show)
    app.add_typer(runs_app, name="runs")
    app.command("capabilities")(capabilities_command)
