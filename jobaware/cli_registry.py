"""The commands that read the registry and the runs: `jobaware models show`, `jobaware runs list|show`,
`jobaware capabilities`. They read through `jobaware.registry_read` (no MLflow import on the embedded store):
`jobaware --help` and these commands stay fast."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from jobaware import capabilities
from jobaware.cli_contract import argument
from jobaware.console import err, out, show
from jobaware.errors import JobawareError

runs_app = typer.Typer(help="The MLflow runs: training, sweeps, promotions, rollbacks.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON instead of tables (errors too)")]
Key = Annotated[Literal[tuple(capabilities.keys())], argument(metavar="KEY", help=f"capability: {', '.join(capabilities.keys())}")]


def models_show(
    key: Key,
    version: Annotated[str, typer.Argument(metavar="VERSION", help="model version")],
    as_json: JsonFlag = False,
):
    """A model version: its training data, parameters, metrics beside its baselines, and gate history.

    The metrics are the model's and its baselines' at its operating point.

    Example: jobaware models show failure 1
    """
    from jobaware import registry_read
    from jobaware.results import metrics_rows

    described = registry_read.describe_version(key, version)
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
    rows, notes = metrics_rows(capabilities.get(key), described["metrics"])
    if rows:
        show(None, False, rows, title="metrics (the model and its baselines, on its evaluation data)")
    for note in notes:
        out.print(f"note: {note}", soft_wrap=True)
    if described["gate"]:
        show(None, False, described["gate"], title="gate history")
    else:
        out.print("gate history: no decision on this version yet")


def runs_list(
    key: Annotated[Literal[tuple(capabilities.keys())] | None, argument(metavar="[KEY]",
                                                                        help="capability (default: all)")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="how many runs, newest first")] = 20,
    as_json: JsonFlag = False,
):
    """The newest runs of one or every capability, each with its capability's primary metric.

    Example: jobaware runs list failure --limit 5
    """
    from jobaware import registry_read

    rows = registry_read.list_runs([key] if key else capabilities.keys(), limit)
    if not rows and not as_json:
        out.print("no runs yet; run `jobaware pipeline run <capability>`")
        return
    show(rows, as_json, rows)


def runs_show(run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="an MLflow run id")],
              as_json: JsonFlag = False):
    """A run's parameters, metrics, tags and artifacts.

    Example: jobaware runs show 0f8e4c1d2b3a49e6a7c5d4e3f2a1b0c9
    """
    from jobaware import registry_read

    described = registry_read.describe_run(run_id)
    if as_json:
        show(described, True)
        return
    show(None, False, [{k: described[k] for k in ("run_id", "experiment", "name", "status", "started")}], title="run")
    for part in ("params", "metrics", "tags"):
        if described[part]:
            show(None, False, [{"name": k, "value": v} for k, v in described[part].items()], title=part)
    out.print(f"artifacts: {', '.join(described['artifacts']) or 'none'}", soft_wrap=True)


def capabilities_command(as_json: JsonFlag = False):
    """Every capability: its question, the formats it reads, its champion and what that was trained on.

    Example: jobaware capabilities --json
    """
    from jobaware import registry_read

    rows, unread = [], None
    for key, capability in capabilities.registry().items():
        row = {"key": key, "question": capability.question, "formats": "; ".join(capability.formats),
               "champion": None, "metric": capability.primary_metric, "score": None, "trained_on": None}
        try:
            version = registry_read.champion_version(key)
            if version:
                described = registry_read.describe_version(key, version)
                trained = described["trained_on"]
                row.update(champion=version, trained_on=f"{trained['kind']} {', '.join(trained['tables'])}: "
                                                        f"{trained['data'] or 'unknown'}".strip())
                row["score"] = described["score"]
        except JobawareError as exc:  # no store yet, or the registry unreadable: the capability is still listed
            unread = str(exc)
        rows.append(row)
    show(rows, as_json, rows)
    if unread and not as_json:
        err.print(f"champions unknown: {unread}", soft_wrap=True)


def register(app: typer.Typer, models_app: typer.Typer) -> None:
    models_app.command("show")(models_show)
    runs_app.command("list")(runs_list)
    runs_app.command("show")(runs_show)
    app.add_typer(runs_app, name="runs")
    app.command("capabilities")(capabilities_command)
