"""The `jobaware` command: data, pipelines, models, predictions and services, for every registered capability.

Each capability may add commands of its own under `jobaware <key>` (`jobaware/<key>/commands.py`, named in its
registration).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from typer.core import TyperCommand, TyperGroup

from jobaware import capabilities, cli_registry, config, extras
from jobaware.adapters.htcondor.commands import register as _register_htcondor
from jobaware.adapters.slurm.commands import part_command as _part_command
from jobaware.adapters.slurm.commands import register as _register_slurm
from jobaware.adapters.slurm.mail_commands import register as _register_mail
from jobaware.cli_contract import FOLDER, OUTPUT, SERVICE, SOURCE, STORE, argument, given, moved, option
from jobaware.console import err, out, progress, show, warning
from jobaware.errors import InputError, JobawareError, UsageError
from jobaware.store.commands import register as _register_store
from jobaware.text import ascii_digits, redacted
from jobaware.usage.commands import register as _register_usage

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)
data_app = typer.Typer(help="Read, validate and generate data.", no_args_is_help=True)
pipeline_app = typer.Typer(help="Run, submit and compile the KFP pipelines.", no_args_is_help=True)
models_app = typer.Typer(help="The MLflow model registry: list, show, promote, roll back.", no_args_is_help=True)
report_app = typer.Typer(help="Reports on what the adapters saw and did.", no_args_is_help=True)
deploy_app = typer.Typer(help="Write the deployment files the package carries: the systemd units, the Kubernetes "
                              "manifests.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(models_app, name="models")


@models_app.callback()
def reach_registry() -> None:
    """A person's registry command: a tracking server that does not answer is one line within seconds, said before
    MLflow is imported (seconds more). A help is shown without asking it (click has consumed the subcommand's
    arguments before this runs: the command line is read)."""
    if not {"--help", "-h"} & set(sys.argv[1:]):
        config.reach(config.tracking_uri(create=False))
app.add_typer(report_app, name="report")
app.add_typer(deploy_app, name="deploy")

KeyName = Literal[tuple(capabilities.keys())]
Key = Annotated[KeyName, argument(metavar="KEY", help=f"capability: {', '.join(capabilities.keys())}")]
JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON instead of tables (errors too)")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="replace an existing output file (a folder never)")]
Inputs = Annotated[list[str] | None, option("--input", "-i", role=SOURCE,
                                            help="file, folder or glob to read (repeatable)")]
OldInputs = Annotated[list[str] | None, argument(role=SOURCE, hidden=True, help="old spelling of --input")]
FIRST_PORT = 3000


def _print_version(wanted: bool) -> None:
    if wanted:
        from importlib.metadata import version

        out.print(f"jobaware {version('jobaware')}")
        raise typer.Exit(0)


@app.callback()
def root(version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                               help="print jobaware's version and exit")] = False):
    """Job awareness for HPC schedulers.

    Example: jobaware pipeline run all
    """
    config.load_site_settings()  # /etc/jobaware/jobaware.env (or JOBAWARE_CONFIG) under the environment
    config.fail_fast()  # a person waits seconds, not MLflow's minutes, on a tracking server that does not answer


def _parse_params(capability: capabilities.Capability, items: list[str]) -> dict:
    """`--param k=v` items (values read as JSON where they parse) checked by the capability's parameter model."""
    raw = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {item!r}: expected key=value")
        try:
            raw[key] = json.loads(value)
        except json.JSONDecodeError:
            raw[key] = value
    try:
        return capability.check_params(raw)
    except JobawareError as exc:
        raise UsageError(f"--param: {exc}") from None


# ---------------------------------------------------------------- data
@data_app.command("validate")
def data_validate(
    key: Key,
    inputs: Inputs = None,
    paths: OldInputs = None,
    as_json: JsonFlag = False,
    strict: Annotated[bool, typer.Option("--strict", help="stop at the first bad record")] = False,
):
    """Check source data against its contracts, record by record and expectation by expectation.

    Exit 0 when every record is good and every expectation met, 1 with the bad records (file:line, field, value,
    reason) and the failed expectations otherwise.

    Example: jobaware data validate failure --input jobs.csv
    """
    from jobaware import sources, steps
    from jobaware.reading import QUARANTINE

    extras.require("train")  # the data contracts run on Great Expectations
    paths = [path for source in given(inputs, paths) for path in sources.expand(source)]
    with tempfile.TemporaryDirectory() as tmp:
        with progress("reading") as bar:
            task = bar.add_task("records", total=None)
            read = steps.ingest(key, paths, Path(tmp), strict=strict, progress=lambda n: bar.advance(task, n))
        nothing_read(read, paths)
        with err.status("checking the data contracts"):
            report = steps.validate(Path(tmp), budget=0.0)
        text = steps.format_validation(report).replace(str(Path(tmp) / QUARANTINE), "the quarantine")
    if as_json:
        show(report, True)
    else:
        (out if report["success"] else err).print(text, soft_wrap=True)
    raise typer.Exit(0 if report["success"] else 1)


def nothing_read(report, paths: list[str]) -> None:
    """Reading nothing usable is never success: an InputError naming the sources and the first problem."""
    if report.rows:
        return
    first = f"; first: {report.problems[0]}" if report.problems else ""
    bad = f"{report.bad_rows:,} bad record(s)" if report.bad_rows else "no record at all"
    raise InputError(f"{', '.join(map(str, paths))}: nothing usable read ({bad}){first}")


@data_app.command("synth")
def data_synth(
    key: Key,
    jobs: Annotated[int, typer.Option(min=1, help="how many jobs (or records) to generate")],
    output: Annotated[Path, option("--output", "-o", role=OUTPUT, help="file or folder to write (with the "
                                   "ground truth beside it)")],
    fmt: Annotated[str, typer.Option("--format", help="output format where the capability has several")] = "",
    seed: Annotated[int, typer.Option(min=0, help="random seed")] = 0,
    overwrite: Overwrite = False,
):
    """Generate data in the capability's real format, with its ground truth beside it.

    Both are written whole or not at all.

    Example: jobaware data synth failure --jobs 1000 --output jobs.csv
    """
    from jobaware.outputs import staged

    capability = capabilities.get(key)
    with progress("generating") as bar, staged(output, overwrite=overwrite) as staging:
        task = bar.add_task("records", total=jobs)
        try:
            truth = capability.synth(staging, jobs, seed=seed, fmt=fmt or None,
                                     progress=lambda n: bar.advance(task, n))
        except InputError as exc:  # a generator refuses only its arguments (--jobs, --format): a usage error
            raise UsageError(str(exc)) from None
    truth = output.parent / Path(truth).relative_to(staging.parent)  # where the staged truth file went
    out.print(f"wrote {jobs:,} to {output}; ground truth in {truth}")


# ---------------------------------------------------------------- pipelines
def _default_data(key: str) -> str:
    data_dir = config.home() / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    with progress(f"preparing the default data of {key}") as bar:
        task = bar.add_task("records", total=None)
        return capabilities.get(key).default_data(data_dir, progress=lambda n: bar.advance(task, n))


def _arguments(name: str, data: list[str], params: list[str], budget: float, remote: bool) -> dict:
    from jobaware import sources

    keys = capabilities.keys() if name == "all" else [name]
    if not remote:  # the steps will track there: a server that does not answer is said now, in seconds
        config.reach(config.tracking_uri(create=False))
    if name == "all" and (data or params):
        raise UsageError("pipeline all runs every capability on its default data; run one capability for --input "
                         "or --param")
    if name != "all":
        capability = capabilities.get(name)
        checked = json.dumps(_parse_params(capability, params))  # before the default data is prepared
        if remote:  # a KFP host resolves its own paths
            chosen = sources.encode(data)
        elif data:
            paths = [path for source in data for path in sources.expand(source)]
            _check_data(name, paths, budget)
            chosen = sources.encode(paths)
        else:
            chosen = _default_data(name)
        tracking = "" if remote else config.tracking_uri()  # JOBAWARE_HOME made only once the data is good
        return {"data": chosen, "params": checked, "tracking_uri": tracking, "bad_record_budget": budget}
    arguments = {"tracking_uri": "" if remote else config.tracking_uri(), "bad_record_budget": budget}
    for key in keys:
        arguments[f"{key}_data"] = _default_data(key)
    return arguments


def _check_data(key: str, paths: list[str], budget: float) -> None:
    """Read a person's data once before the pipeline starts (its ingest reads it again): a file with nothing usable,
    or more bad records than the budget, is refused here in one line, not at the pipeline's first steps."""
    from jobaware import sources, steps

    local = [path for path in paths if not sources.is_remote(path) and not path.startswith(sources.STORE_SCHEMES)]
    if not local:
        return
    with tempfile.TemporaryDirectory() as tmp, progress(f"reading the data of {key}") as bar:
        task = bar.add_task("records", total=None)
        report = steps.ingest(key, local, Path(tmp), progress=lambda n: bar.advance(task, n))
    nothing_read(report, local)
    share = report.bad_rows / (report.rows + report.bad_rows)
    if share > budget:
        raise InputError(f"{', '.join(local)}: {report.bad_rows:,} bad record(s) of {report.rows + report.bad_rows:,} "
                         f"({share:.2%}, over --budget {budget:.2%}); first: {report.problems[0]}")


@pipeline_app.command("run")
def pipeline_run(
    name: Annotated[Literal[(*capabilities.keys(), "all")], argument(metavar="NAME", help="a capability, or all")],
    inputs: Inputs = None,
    param: Annotated[list[str], typer.Option(help="training parameter key=value (repeatable)")] = [],  # noqa: B006
    budget: Annotated[float, typer.Option(min=0, max=1, help="largest share of bad records the run goes past")] = 0.01,
    kfp_host: Annotated[str, option("--kfp-host", envvar="KFP_HOST", role=SERVICE, help="submit to this Kubeflow "
                                    "Pipelines host (env KFP_HOST)")] = "",
    _host: Annotated[str | None, moved("--host", "--kfp-host", "the Kubeflow Pipelines host")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="show the steps' own logs live")] = False,
    runner_name: Annotated[Literal["subprocess", "docker"], typer.Option(
        "--runner", help="kfp.local runner: subprocess (fast), or docker: every step in the project image "
                         "through podman")] = "subprocess",
    as_json: JsonFlag = False,
):
    """Run a capability's pipeline (or all of them) with kfp.local, or submit it to a KFP host.

    Data given with --input is read once before the pipeline starts: nothing usable, or more bad records than
    --budget, is refused right away. With --kfp-host (or KFP_HOST) the run is submitted there instead.

    Example: jobaware pipeline run failure --input jobs.csv --param max_iter=100
    """
    extras.require("train")
    arguments = _arguments(name, inputs or [], param, budget, remote=bool(kfp_host))
    if kfp_host:
        from jobaware.pipelines import runner

        run_id = runner.submit(name, arguments, kfp_host, f"jobaware-{name}")
        show({"submitted": name, "host": kfp_host, "run_id": run_id}, as_json)
        return
    outputs = _run_pipelines({name: arguments}, verbose, runner_name)[name]
    keys = capabilities.keys() if name == "all" else [name]
    versions = {key: outputs.get(key if name == "all" else "Output") for key in keys}
    _training_summary(versions, as_json)


@pipeline_app.command("submit")
def pipeline_submit(
    name: Key,
    kfp_host: Annotated[str, option("--kfp-host", envvar="KFP_HOST", role=SERVICE, help="the Kubeflow Pipelines host "
                                    "(env KFP_HOST)")],
    inputs: Annotated[list[str], typer.Option("--input", "-i", metavar="PATH",
                                              help="source path or URI as the host's steps see it (repeatable)")],
    param: Annotated[list[str], typer.Option(help="training parameter key=value (repeatable)")] = [],  # noqa: B006
    budget: Annotated[float, typer.Option(min=0, max=1, help="largest share of bad records the run goes past")] = 0.01,
    recurring: Annotated[str, typer.Option(help="retrain on this cron schedule ('0 3 * * *') instead of once")] = "",
    as_json: JsonFlag = False,
    _host: Annotated[str | None, moved("--host", "--kfp-host", "the Kubeflow Pipelines host")] = None,
):
    """Submit a run, or a recurring run, of a capability's pipeline to a Kubeflow Pipelines host.

    Its steps read the MLflow tracking URI from the Secret `jobaware-mlflow` there.

    Example: jobaware pipeline submit failure --kfp-host https://kfp.example.org --input s3://bucket/jobs.parquet
    """
    extras.require("train")
    from kfp_server_api import ApiException
    from urllib3.exceptions import HTTPError

    from jobaware.pipelines import runner

    arguments = _arguments(name, inputs, param, budget, remote=True)
    try:  # kfp.Client prints links and warns on stdout and stderr: its chatter goes to the log file
        with open(config.logs_dir() / "kfp-client.log", "a") as chatter, contextlib.redirect_stdout(chatter), \
                contextlib.redirect_stderr(chatter):
            if recurring:
                result = runner.schedule(name, arguments, kfp_host, f"jobaware-{name}", recurring)
            else:
                run_id = runner.submit(name, arguments, kfp_host, f"jobaware-{name}")
                result = {"run_id": run_id, "details": f"{kfp_host.rstrip('/')}/#/runs/details/{run_id}"}
    except ValueError as exc:
        raise JobawareError(f"pipeline submit {name}: {exc}") from None
    except (ApiException, HTTPError) as exc:
        reason = f"answered {exc.status} {exc.reason}" if isinstance(exc, ApiException) else f"unreachable ({exc})"
        raise JobawareError(f"pipeline submit {name}: the KFP host {kfp_host} {reason}") from None
    show({"submitted": name, "host": kfp_host, **result}, as_json)


def _run_pipelines(runs: dict[str, dict], verbose: bool, runner_name: str = "subprocess", lanes: int = 1,
                   on_done=None) -> dict:
    """Run the pipelines `runs` names (name -> arguments), `lanes` at a time, each in its own process logging to a
    file: one line per finished step with its status, seconds and CPU; a live line per running step with its
    progress and the time it has left, where the step says; `on_done(name, outputs)` as each one ends well.
    Returns each pipeline's outputs; a failed pipeline raises once every one has ended."""
    import threading
    from concurrent.futures import ThreadPoolExecutor, wait

    from rich.live import Live
    from rich.spinner import Spinner
    from rich.table import Table
    from rich.text import Text

    from jobaware.pipelines import runner

    running: dict[str, dict] = {}  # "pipeline step" -> since, progress
    lock = threading.Lock()
    # pipelines side by side share the cores: each step's thread pools (OpenMP, BLAS, torch) get their share
    threads = str(max(1, (os.cpu_count() or 1) // max(1, min(lanes, len(runs)))))
    env = {**{name: threads for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
           **config.patient(dict(os.environ))}  # the steps keep MLflow's own waits

    def view():
        grid = Table.grid(padding=(0, 1))
        with lock:
            for step, state in running.items():
                grid.add_row(Spinner("dots"), step, f"{time.monotonic() - state['since']:.0f} s", _left(state))
        return grid

    def watch(name: str, arguments: dict, live) -> dict:
        log = config.logs_dir() / f"pipeline-{name}-{time.strftime('%Y%m%d-%H%M%S')}.log"
        err.print(f"pipeline {name}: steps' logs in {log}", soft_wrap=True)
        prefix = f"{name} " if len(runs) > 1 else ""

        def on_event(event) -> None:
            label = prefix + event.step
            with lock:
                if event.kind == "start":
                    running[label] = {"since": time.monotonic(), "progress": None}
                elif event.kind == "progress" and label in running:
                    state = running[label]
                    if not state["progress"] or state["progress"][2] != event.progress[2]:
                        state["unit_since"] = time.monotonic()  # the estimate counts from this unit's first line
                    state["progress"] = event.progress
                else:
                    running.pop(label, None)
            if event.kind in ("SUCCESS", "FAILURE"):
                mark = ("✓", "green") if event.kind == "SUCCESS" else ("✗", "red")
                cpu = f"  CPU {event.cpu:6.1f} s" if event.cpu is not None else ""
                live.console.print(Text.assemble(mark, f" {label:<28} {event.kind.lower():<8} {event.seconds:6.1f} s"
                                                       f"{cpu}"))

        try:
            outputs = runner.run_watched(name, arguments, config.home() / "kfp", log, on_event, echo=verbose,
                                         runner=runner_name, env=env, stopped=stop.is_set)
        except RuntimeError as exc:
            raise JobawareError(f"pipeline {name}: {exc}{_failure_reason(log)}") from None
        if on_done is not None:
            on_done(name, outputs)
        return outputs

    stop = threading.Event()  # set when this thread is stopped (Ctrl-C, SIGTERM): every lane kills its pipeline
    with Live(view(), console=err, transient=True, refresh_per_second=4, get_renderable=view) as live:
        pool = ThreadPoolExecutor(max(1, lanes))
        try:
            futures = {name: pool.submit(watch, name, arguments, live) for name, arguments in runs.items()}
            wait(list(futures.values()))
        except BaseException:
            stop.set()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=stop.is_set())
        failed = [future.exception() for future in futures.values() if future.exception() is not None]
    if failed:
        raise failed[0] if len(failed) == 1 else JobawareError(
            f"{len(failed)} pipelines failed: " + "; ".join(str(exc).splitlines()[0] for exc in failed))
    return {name: future.result() for name, future in futures.items()}


def _left(state: dict) -> str:
    """`120/300 iterations, about 30 s left` for a step that said how far it is."""
    if not state.get("progress"):
        return ""
    done, total, unit = state["progress"]
    text = f"{done:,}/{total:,} {unit}"
    if 0 < done < total:
        left = (time.monotonic() - state["unit_since"]) * (total - done) / done
        text += f", about {left:.0f} s left"
    return text


def _failure_reason(log: Path) -> str:
    """The message of the jobaware error that stopped a step, from the steps' log."""
    lines = log.read_text(errors="replace").splitlines()
    for i in range(len(lines) - 1, -1, -1):
        text = lines[i].strip()
        if text.startswith("jobaware.errors.") and ": " in text:
            message = [text.split(": ", 1)[1]]
            for follow in lines[i + 1:]:
                if not follow.strip() or "finished with status" in follow or follow.strip().startswith("["):
                    break
                message.append(follow.strip())
            return "\n" + "\n".join(message[:30])
    return ""


def _training_summary(versions: dict[str, str | None], as_json: bool) -> None:
    """The metrics of the versions this run registered (the model beside its baselines, a note where it does not
    beat a trivial one), and where to look at them."""
    from jobaware import registry_read
    from jobaware.results import metrics_rows

    summary = {}
    for key, version in versions.items():
        capability = capabilities.get(key)
        metrics = registry_read.version_metrics(key, version) if version else {}
        champion = registry_read.champion_version(key)
        decision = (registry_read.last_promotion(key, version) or {}) if version else {}
        summary[key] = {"version": version, "champion": champion, "gate": decision.get("reason"), "metrics": metrics}
        if as_json:
            continue
        rows, notes = metrics_rows(capability, metrics)
        state = "champion" if champion == version else \
            f"not promoted: {decision.get('reason', 'the gate did not run')}; champion is {champion or 'none'}"
        show(summary[key], False, rows, title=f"{capability.model_name} version {version} ({state})")
        if "gap_to_bayes" in metrics.get("model", {}):
            m = metrics["model"]
            out.print(f"Bayes-optimal {capability.primary_metric} {m['bayes_roc_auc']:.4f}; "
                      f"gap to the model {m['gap_to_bayes']:.4f}")
        for note in notes:
            out.print(f"note: {note}", soft_wrap=True)
    if as_json:
        show(summary, True)
    else:
        tracking = redacted(config.tracking_uri())
        out.print(f"MLflow: {tracking}  (browse: mlflow ui --backend-store-uri {tracking})",
                  soft_wrap=True)


@pipeline_app.command("compile")
def pipeline_compile(
    output: Annotated[Path, option("--output", "-o", role=FOLDER, help="folder for the IR YAML files")],
    overwrite: Overwrite = False,
):
    """Compile every pipeline to KFP IR YAML, one file per pipeline, each written whole.

    Example: jobaware pipeline compile --output pipelines/golden --overwrite
    """
    extras.require("train")
    from jobaware.pipelines.runner import compile_all

    for path in compile_all(output, overwrite=overwrite):
        out.print(f"wrote {path}")


# ---------------------------------------------------------------- models
@models_app.command("list")
def models_list(as_json: JsonFlag = False):
    """Registered model versions with their aliases and primary metric.

    Example: jobaware models list --json
    """
    from jobaware import registry_read

    rows = registry_read.list_models()
    if not rows and not as_json:
        out.print("no registered models yet; run `jobaware pipeline run <capability>`")
        return
    show(rows, as_json, rows)


@models_app.command("promote")
def models_promote(
    key: Key,
    version: Annotated[str, typer.Argument(metavar="VERSION", help="model version to promote")],
    force: Annotated[bool, typer.Option("--force", help="promote even if the gate says no (logged as forced)")] = False,
    as_json: JsonFlag = False,
):
    """Run the promotion gate for VERSION; exit 0 when it became champion, 1 when the gate refused.

    Example: jobaware models promote failure 3
    """
    from jobaware import gate

    decision = gate.promote(key, version, force)
    show(decision, as_json, [{k: v for k, v in decision.items() if k != "checks"}])
    raise typer.Exit(0 if decision["promoted"] else 1)


@models_app.command("verify")
def models_verify(
    key: Key,
    version: Annotated[str, typer.Argument(metavar="VERSION", help="model version to check")],
    record: Annotated[bool, typer.Option("--record", help="record the digest of its files as they are now, on a "
                                         "version that has none (after you checked them)")] = False,
    as_json: JsonFlag = False,
):
    """Check that VERSION's files are the ones recorded when it was registered.

    A model is loaded only then. With --record, record them on a version registered before jobaware recorded
    digests. Exit 1 when they do not match.

    Example: jobaware models verify failure 3
    """
    from jobaware import tracking

    show(tracking.verify(key, version, record), as_json)


@models_app.command("rollback")
def models_rollback(key: Key, as_json: JsonFlag = False):
    """Point champion back at the previous champion.

    Example: jobaware models rollback failure
    """
    from jobaware import gate

    show(gate.rollback(key), as_json)


# ---------------------------------------------------------------- deployment files
DeployOutput = Annotated[Path, option("--output", "-o", role=FOLDER, help="folder to write them into")]
DeployOverwrite = Annotated[bool, typer.Option("--overwrite", help="replace existing files")]


def _write_deployment(kind: str, output: Path, overwrite: bool) -> None:
    from jobaware.packaged import write_deployment

    for path in write_deployment(kind, output, overwrite):
        err.print(f"wrote {path}", highlight=False, soft_wrap=True)


@deploy_app.command("systemd")
def deploy_systemd(output: DeployOutput, overwrite: DeployOverwrite = False):
    """Write the systemd units, timers, environment files and tmpfiles this version carries.

    The environment files are jobaware.env, one per service and credentials.env; a site installs them under /etc.

    Example: jobaware deploy systemd --output /tmp/jobaware-systemd
    """
    _write_deployment("systemd", output, overwrite)


@deploy_app.command("k8s")
def deploy_k8s(output: DeployOutput, overwrite: DeployOverwrite = False):
    """Write the Kubernetes manifests this version carries.

    They are the kustomize base, the local and production overlays, site.yaml and README.md, for `kubectl kustomize
    k8s/overlays/production` or `kubectl apply -k`.

    Example: jobaware deploy k8s --output k8s
    """
    _write_deployment("k8s", output, overwrite)


# ---------------------------------------------------------------- reports
@report_app.command("live")
def report_live(
    store: Annotated[str, option("--store", role=STORE, envvar="JOBAWARE_STORE", help="the site's job store (env "
                                 "JOBAWARE_STORE): a folder, sqlite:PATH or redis://host:port/db")],
    as_json: JsonFlag = False,
):
    """How each capability did on live jobs, by week and model version.

    One table per card part that declares it.

    What each part said of the store's finished jobs while they waited (the cards the Slurm adapter kept, refreshes
    included) against what happened to them, in the part's own table (`CardPart.accuracy` in its registration).

    Example: jobaware report live --store /var/lib/jobaware/store
    """
    from jobaware.live import reports
    from jobaware.store import open_store

    extras.require("reports")  # failure's part scores with scikit-learn's metrics
    with open_store(store) as opened:
        found = reports(opened)
    if as_json:
        show(found, True)
        return
    for key, rows in found.items():
        if rows:
            show(rows, False, rows, title=f"{key} on live jobs")
        else:
            out.print(f"{key}: no finished job with a verdict yet", highlight=False)
    if not any(found.values()):
        out.print("verdicts come from `jobaware slurm adapt` beside `jobaware slurm collect`, on the same store")


# ---------------------------------------------------------------- predictions and services
@app.command("predict")
def predict(
    key: Key,
    inputs: Annotated[list[str], option("--input", "-i", role=SOURCE, help="file, folder or glob to read "
                                        "(repeatable)")],
    output: Annotated[str, option("--output", "-o", role=OUTPUT, stdout=True,
                                  help="JSON Lines file, one object per record; - for standard output")],
    model_version: Annotated[str, typer.Option("--model-version", metavar="VERSION", help="the model version to "
                                               "predict with (default: the champion)")] = "",
    overwrite: Overwrite = False,
    _version: Annotated[str | None, moved("--version", "--model-version", "the model version to predict with")] = None,
):
    """Predict every record of the input with the champion (or --model-version).

    The input is read before the model is loaded; the output is written whole or not at all.

    Example: jobaware predict failure --input jobs.csv --output predictions.jsonl
    """
    from jobaware import cli_contract, fit, registry_read, sources
    from jobaware.reading import quarantine_path

    if (quarantine := quarantine_path(output)) is not None:  # written beside the output, by the same rules
        cli_contract.check_output(str(quarantine), overwrite, False, "--output")

    def model():  # MLflow is imported only once the input held something to predict
        from jobaware import tracking

        return tracking.load_bundle(key, model_version or None)

    capability = capabilities.get(key)
    inputs = [path for source in inputs for path in sources.expand(source)]
    with progress(f"predicting with {capability.model_name}") as bar:
        task = bar.add_task("records", total=None)
        summary = capability.predict_file(inputs, output, model, progress=lambda n: bar.advance(task, n))
    used = summary.model_version
    model = f"model version {used}" if used else "no model loaded: nothing to predict"
    used = used or model_version or registry_read.champion_version(key)  # the input still meets the model it would meet
    if used:
        summary.fit = fit.notes(registry_read.training_profile(key, used), summary.input_profile, used)
    where = "standard output" if output == "-" else output
    (err if output == "-" else out).print(f"wrote {summary.predictions:,} predictions to {where} ({model})"
                                          + "".join(f"; {name} {value:,}" for name, value in summary.counts.items()),
                                          soft_wrap=True)
    if summary.reason:
        warning(summary.reason)
    for note in summary.fit:
        warning(note)
    if summary.bad_records:
        first = f"; first: {summary.problems[0]}" if summary.problems else ""
        warning(f"{summary.bad_records:,} bad record(s) not predicted, listed in {summary.quarantine}{first}")


GATEWAY = "card"  # `jobaware serve card`: the card gateway, beside the capabilities' services
ServedName = Literal[(*capabilities.keys(), GATEWAY)]
Served = Annotated[ServedName, argument(metavar="KEY", help=f"capability: {', '.join(capabilities.keys())}; or "
                                        f"{GATEWAY}, the card gateway (it asks the services JOBAWARE_<KEY>_URL name)")]


def service_command(key: str, port: int, host: str) -> list[str]:
    bentoml = Path(sys.executable).with_name("bentoml")
    served = "jobaware.serving.card:CardService" if key == GATEWAY else capabilities.get(key).service
    # BentoML imports the service with its working folder first on sys.path: never the current folder (a user's, where
    # a planted `jobaware/` would be imported as root), always the home (trusted, the caller's or root's)
    return [str(bentoml), "serve", served, "--port", str(port), "--host", host, "--working-dir", str(config.home())]


def service_env(key: str, port: int) -> dict:
    """The environment of a service: BentoML's home is the service's own (`JOBAWARE_HOME/bentoml/<key>-<port>`), so
    that each keeps its own Prometheus folder (BentoML empties that folder when a service starts)."""
    home = config.home(create=False)
    return {**config.patient(dict(os.environ)), "MLFLOW_TRACKING_URI": config.tracking_uri(create=False),
            "JOBAWARE_HOME": str(home),
            "BENTOML_HOME": str(home / "bentoml" / f"{key}-{port}")}


@app.command("serve")
def serve(
    key: Served,
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port")] = FIRST_PORT,
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
):
    """Serve the champion over HTTP with BentoML (or, as `card`, the card gateway).

    Stopping this command, however, stops the server. With JOBAWARE_SERVICE_TOKEN_FILE, every answer proves it is
    the deployment's service.

    Example: jobaware serve failure --port 3000
    """
    from jobaware import supervise

    extras.require("serve")
    config.service_token()  # a token named but unsound is refused here, in one line, before anything starts
    code = supervise.serve(service_command(key, port, host), service_env(key, port), host, port,
                           say=_say_to_a_person)
    if code:
        raise typer.Exit(code)


@app.command("demo")
def demo(
    first_port: Annotated[int, typer.Option(min=1, max=65535 - 16, help="port of the first service; the others "
                                            "follow")] = FIRST_PORT,
    parallel: Annotated[int, typer.Option(min=1, max=16, help="pipelines run at the same time (default: the "
                                          "cores, at most 2)")] = min(2, os.cpu_count() or 1),
):
    """What `make run` does: every pipeline on its default data, each champion then served on localhost.

    The pipelines run PARALLEL at a time, and each champion is served as soon as its pipeline is done; it says when
    each service is ready and how long the whole took, and prints the services' URLs and the service token it made
    in JOBAWARE_HOME (what `jobaware card` and the adapters need in another shell: no service has a default URL).

    Example: jobaware demo --first-port 3000
    """
    import threading

    from jobaware import supervise

    extras.require("train", "serve")
    started_at = time.monotonic()
    keys = capabilities.keys()
    ports = {key: first_port + offset for offset, key in enumerate(keys)}
    for port in ports.values():
        supervise.wait_for_port("127.0.0.1", port, say=_say_to_a_person)
    deployment = {**{f"JOBAWARE_{key.upper()}_URL": f"http://127.0.0.1:{port}" for key, port in ports.items()},
                  config.TOKEN_FILE_ENV: str(config.make_service_token(config.home() / "service.token"))}
    os.environ.update(deployment)  # what the services (the card gateway among them) and this command are given
    config.service_token()
    runs = {key: _arguments(key, [], [], 0.01, remote=False) for key in keys}  # the default data, made once
    started: dict[str, supervise.Guarded] = {}
    lock = threading.Lock()

    def serve_it(key: str, _outputs: dict) -> None:  # a capability is served as soon as its pipeline is done
        log = open(config.logs_dir() / f"serve-{key}.log", "wb")
        with lock:
            started[key] = supervise.Guarded(service_command(key, ports[key], "127.0.0.1"),
                                             service_env(key, ports[key]), stdout=log, stderr=subprocess.STDOUT)

    try:  # from the first service started: a Ctrl-C at any point stops every one started
        outputs = _run_pipelines(runs, False, "subprocess", lanes=parallel, on_done=serve_it)
        _training_summary({key: outputs[key].get("Output") for key in keys}, False)
        _wait_ready(ports, [started[key] for key in keys])
        out.print(f"every capability serving {time.monotonic() - started_at:.0f} s after `jobaware demo` began")
        _print_examples(ports, deployment)
        while all(p.poll() is None for p in started.values()):
            time.sleep(1)
        raise JobawareError("a service stopped; see its log under " + str(config.logs_dir()))
    finally:
        stop_services(list(started.values()))


def _wait_ready(ports: dict[str, int], processes: list, limit: float = 300.0) -> None:
    """A line per service once its /readyz answers 200 (its champion loaded), with the seconds it took."""
    import urllib.error
    import urllib.request

    since, waiting = time.monotonic(), dict(zip(ports, processes, strict=True))
    with err.status("starting the services"):
        while waiting:
            for key, process in list(waiting.items()):
                if process.poll() is not None:
                    raise JobawareError(f"the {key} service stopped while starting; its log: "
                                        f"{config.logs_dir() / f'serve-{key}.log'}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{ports[key]}/readyz", timeout=2) as answer:
                        ready = answer.status == 200
                except (urllib.error.URLError, OSError):
                    ready = False
                if ready:
                    del waiting[key]
                    err.print(f"✓ serve {key:<22} ready    {time.monotonic() - since:6.1f} s", style="green")
            if time.monotonic() - since > limit:
                raise JobawareError(f"not ready after {limit:.0f} s: {', '.join(waiting)}; logs under "
                                    f"{config.logs_dir()}")
            time.sleep(0.5)


def stop_services(processes: list, grace: float = 20.0) -> None:
    """SIGTERM every service's process group (a guard: `jobaware.supervise` stops the service's whole tree), wait up
    to `grace` seconds for all of them together, then SIGKILL what is left. Ctrl-C is ignored meanwhile: a second
    one (or a signal forwarded by `make` or `timeout`) would otherwise cut the loop short and leave services
    holding their ports."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for process in processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in processes:
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
    finally:
        signal.signal(signal.SIGINT, previous)


def _say_to_a_person(line: str) -> None:
    """A notice while waiting: on a terminal it is shown; in a script it goes to the log only, so that a
    refusal stays one line."""
    logging.getLogger("jobaware").info(line)
    if sys.stderr.isatty():
        err.print(line, highlight=False, soft_wrap=True)


def _print_examples(ports: dict[str, int], deployment: dict[str, str]) -> None:
    for key, port in ports.items():
        path, body = capabilities.get(key).example
        out.print(f"\n{key}: http://127.0.0.1:{port} (OpenAPI: http://127.0.0.1:{port}/docs)", highlight=False)
        out.print(f"  curl -s -X POST http://127.0.0.1:{port}{path} -H 'content-type: application/json' "
                  f"-d '{json.dumps(body)}'", soft_wrap=True, highlight=False)
    out.print("\nWhere these services answer, and the token they prove themselves with (for `jobaware card`, "
              "`jobaware slurm adapt` and the card gateway in another shell):", highlight=False, soft_wrap=True)
    for name, value in deployment.items():
        out.print(f"  export {name}={value}", highlight=False, soft_wrap=True)
    out.print("\nCtrl-C stops every service.")


JOB = "job"  # the hidden name of a capability group's command for one job: `jobaware failure 4242`


class _JobContext(typer.Context):
    @property
    def command_path(self) -> str:  # `jobaware failure 4242` runs the `job` command with no name of its own
        return super().command_path.rstrip()


class _JobCommand(TyperCommand):
    context_class = _JobContext


class JobGroup(TyperGroup):
    """The command group of a capability with a card part and commands of its own: a first argument that starts with
    a digit (or an option the group lacks) is for its hidden `job` command, the capability's part of a job's card
    (`jobaware failure 4242 --json`, `jobaware failure --gateway URL 4242`); any other names a subcommand
    (`jobaware failure export ...`)."""

    def _for_the_job(self, ctx, args: list[str]) -> bool:
        first = args[0] if args else ""
        return first not in self.commands and (ascii_digits(first[:1]) or (
            first.startswith("-") and first not in self.get_help_option_names(ctx)))

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        if self._for_the_job(ctx, args):  # the options are the job command's
            ctx._protected_args, ctx.args = args[:1], args[1:]
            return ctx.args
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx, args: list[str]):
        if self._for_the_job(ctx, args):
            return None, self.commands[JOB], args
        return super().resolve_command(ctx, args)


def _capability_commands(capability: capabilities.Capability) -> None:
    """`jobaware <key> ...`: the capability's own commands (`Capability.commands`), and with a card part
    (`Capability.card`) `jobaware <key> JOBID`, its part of a job's card in one line (`jobaware card JOBID --part
    <key>`): a command of its own, or beside the group's commands."""
    question = capability.question[0].upper() + capability.question[1:]
    one_job = _part_command(capability.key, capability.question) if capability.card is not None else None
    if capability.commands is None:
        if one_job is not None:
            app.command(capability.key)(one_job)
        return
    if one_job is None:
        group = typer.Typer(help=question, no_args_is_help=True)
    else:
        group = typer.Typer(cls=JobGroup, no_args_is_help=True, subcommand_metavar="JOBID | COMMAND [ARGS]...",
                            help=f"{question}\n\n`jobaware {capability.key} JOBID`: the {capability.key} part of a "
                                 f"job's card, in one line (see `jobaware {capability.key} JOBID --help`).")
        group.command(JOB, hidden=True, cls=_JobCommand)(one_job)
    app.add_typer(group, name=capability.key)
    capability.commands(group, app)


cli_registry.register(app, models_app)
cli_registry.runs_app.callback()(reach_registry)
_register_slurm(app)  # before the capabilities' commands, which may keep an old spelling under `slurm`
for _capability in capabilities.registry().values():
    _capability_commands(_capability)
_register_htcondor(app)
_register_store(app)
_register_usage(app, report_app)
_register_mail(app)


def main() -> None:
    """Entry point: the command contract's exit codes and one-line errors (jobaware.cli_contract.run)."""
    from jobaware import cli_contract

    # kill, systemd and harnesses stop with SIGTERM: unwind like Ctrl-C, so every `finally` stops what it started
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sys.exit(cli_contract.run(command(), sys.argv[1:]))


_command = None


def command():
    """The click command of the whole CLI, with the command contract installed (once)."""
    global _command
    if _command is None:
        from jobaware import cli_contract

        _command = cli_contract.installed(app)
    return _command
