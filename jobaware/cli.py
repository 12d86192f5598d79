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
from typing import Annotated

import typer

from adapters.htcondor.commands import register as _register_htcondor
from adapters.slurm.commands import register as _register_slurm
from adapters.slurm.mail_commands import register as _register_mail
from jobaware import capabilities, cli_registry, config
from jobaware.console import err, out, progress, show
from jobaware.errors import JobawareError
from jobaware.store.commands import register as _register_store
from jobaware.usage.commands import register as _register_usage

app = typer.Typer(help="Job awareness for HPC schedulers.", no_args_is_help=True, pretty_exceptions_enable=False)
data_app = typer.Typer(help="Read, validate and generate data.", no_args_is_help=True)
pipeline_app = typer.Typer(help="Run, submit and compile the KFP pipelines.", no_args_is_help=True)
models_app = typer.Typer(help="The MLflow model registry: list, show, promote, roll back.", no_args_is_help=True)
report_app = typer.Typer(help="Reports on what the adapters saw and did.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(models_app, name="models")
app.add_typer(report_app, name="report")

Key = Annotated[str, typer.Argument(help=f"capability: {', '.join(capabilities.keys())}")]
JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON instead of tables")]
FIRST_PORT = 3000


def _parse_params(capability: capabilities.Capability, items: list[str]) -> dict:
    """`--param k=v` items (values read as JSON where they parse) checked by the capability's parameter model."""
    raw = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise JobawareError(f"--param {item!r}: expected key=value")
        try:
            raw[key] = json.loads(value)
        except json.JSONDecodeError:
            raw[key] = value
    return capability.check_params(raw)


# ---------------------------------------------------------------- data
@data_app.command("validate")
def data_validate(
    key: Key,
    paths: Annotated[list[str], typer.Argument(help="source file(s), folder or object-store URI")],
    as_json: JsonFlag = False,
    strict: Annotated[bool, typer.Option(help="stop at the first bad record")] = False,
):
    """Check source data against its contracts: exit 0 when every record is good and every expectation met,
    1 with the bad records (file:line, field, value, reason) and the failed expectations otherwise."""
    from jobaware import sources, steps
    from jobaware.reading import QUARANTINE

    capabilities.get(key)
    paths = [path for source in paths for path in sources.expand(source)]
    with tempfile.TemporaryDirectory() as tmp:
        with progress("reading") as bar:
            task = bar.add_task("records", total=None)
            steps.ingest(key, paths, Path(tmp), strict=strict, progress=lambda n: bar.advance(task, n))
        with err.status("checking the data contracts"):
            report = steps.validate(Path(tmp), budget=0.0)
        text = steps.format_validation(report).replace(str(Path(tmp) / QUARANTINE), "the quarantine")
    if as_json:
        show(report, True)
    else:
        (out if report["success"] else err).print(text, highlight=False, soft_wrap=True)
    raise typer.Exit(0 if report["success"] else 1)


@data_app.command("synth")
def data_synth(
    key: Key,
    jobs: Annotated[int, typer.Option(help="how many jobs (or records) to generate")],
    out_path: Annotated[Path, typer.Option("--out", help="output file or folder")],
    fmt: Annotated[str, typer.Option("--format", help="output format where the capability has several")] = "",
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
):
    """Generate data in the capability's real format, with its ground truth beside it (both written whole or
    not at all: an existing file is replaced only once the new one is complete)."""
    from jobaware.outputs import staged

    capability = capabilities.get(key)
    with progress("generating") as bar, staged(out_path) as staging:
        task = bar.add_task("records", total=jobs)
        truth = capability.synth(staging, jobs, seed=seed, fmt=fmt or None, progress=lambda n: bar.advance(task, n))
    truth = out_path.parent / Path(truth).relative_to(staging.parent)  # where the staged truth file went
    out.print(f"wrote {jobs:,} to {out_path}; ground truth in {truth}", highlight=False)


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
    if name == "all" and (data or params):
        raise JobawareError("pipeline all runs every capability on its default data; run one capability for --data or --param")
    tracking = "" if remote else config.tracking_uri()
    if name != "all":
        capability = capabilities.get(name)
        checked = json.dumps(_parse_params(capability, params))  # before the default data is prepared
        local = (lambda s: [s]) if remote else sources.expand  # a KFP host resolves its own paths
        chosen = sources.encode([path for source in data for path in local(source)]) if data else _default_data(name)
        return {"data": chosen, "params": checked, "tracking_uri": tracking, "bad_record_budget": budget}
    arguments = {"tracking_uri": tracking, "bad_record_budget": budget}
    for key in keys:
        arguments[f"{key}_data"] = _default_data(key)
    return arguments


@pipeline_app.command("run")
def pipeline_run(
    name: Annotated[str, typer.Argument(help="a capability, or all")],
    data: Annotated[list[str], typer.Option(help="source file, folder, glob or object-store URI (repeatable)")] = [],  # noqa: B006
    param: Annotated[list[str], typer.Option(help="training parameter key=value (repeatable)")] = [],  # noqa: B006
    budget: Annotated[float, typer.Option(help="largest share of bad records the run goes past")] = 0.01,
    host: Annotated[str, typer.Option(envvar="KFP_HOST", help="submit to this Kubeflow Pipelines host")] = "",
    verbose: Annotated[bool, typer.Option(help="show the steps' own logs live")] = False,
    runner_name: Annotated[str, typer.Option("--runner", help="kfp.local runner: subprocess (fast), or docker: "
                                             "every step in the project image through podman")] = "subprocess",
    as_json: JsonFlag = False,
):
    """Run a pipeline with kfp.local (default) or submit it to a KFP host."""
    from pipelines import runner

    if name not in runner.names():
        raise JobawareError(f"unknown pipeline '{name}'; available: {', '.join(runner.names())}")
    if runner_name not in runner.RUNNERS:
        raise JobawareError(f"--runner {runner_name}: expected one of {', '.join(runner.RUNNERS)}")
    if not 0 <= budget <= 1:  # every option is checked before any work starts
        raise JobawareError(f"--budget: expected a share of bad records in [0, 1], got {budget:g}")
    arguments = _arguments(name, data, param, budget, remote=bool(host))
    if host:
        run_id = runner.submit(name, arguments, host, f"jobaware-{name}")
        show({"submitted": name, "host": host, "run_id": run_id}, as_json)
        return
    outputs = _run_with_progress(name, arguments, verbose, runner_name)
    keys = capabilities.keys() if name == "all" else [name]
    versions = {key: outputs.get(key if name == "all" else "Output") for key in keys}
    _training_summary(versions, as_json)


@pipeline_app.command("submit")
def pipeline_submit(
    name: Annotated[str, typer.Argument(help="a capability")],
    host: Annotated[str, typer.Option(envvar="KFP_HOST", help="the Kubeflow Pipelines host (KFP_HOST)")],
    data: Annotated[list[str], typer.Option(help="source path or URI as the host's steps see it (repeatable)")],
    param: Annotated[list[str], typer.Option(help="training parameter key=value (repeatable)")] = [],  # noqa: B006
    budget: Annotated[float, typer.Option(help="largest share of bad records the run goes past")] = 0.01,
    recurring: Annotated[str, typer.Option(help="retrain on this cron schedule ('0 3 * * *') instead of once")] = "",
    as_json: JsonFlag = False,
):
    """Submit a run, or a recurring run, of a capability's pipeline to a Kubeflow Pipelines host; its steps read
    the MLflow tracking URI from the Secret `jobaware-mlflow` there."""
    from kfp_server_api import ApiException
    from urllib3.exceptions import HTTPError

    from pipelines import runner

    if name not in capabilities.keys():
        raise JobawareError(f"unknown capability '{name}'; available: {', '.join(capabilities.keys())}")
    arguments = _arguments(name, data, param, budget, remote=True)
    try:  # kfp.Client prints links and warns on stdout and stderr: its chatter goes to the log file
        with open(config.logs_dir() / "kfp-client.log", "a") as chatter, contextlib.redirect_stdout(chatter), \
                contextlib.redirect_stderr(chatter):
            if recurring:
                result = runner.schedule(name, arguments, host, f"jobaware-{name}", recurring)
            else:
                run_id = runner.submit(name, arguments, host, f"jobaware-{name}")
                result = {"run_id": run_id, "details": f"{host.rstrip('/')}/#/runs/details/{run_id}"}
    except ValueError as exc:
        raise JobawareError(f"pipeline submit {name}: {exc}") from None
    except (ApiException, HTTPError) as exc:
        reason = f"answered {exc.status} {exc.reason}" if isinstance(exc, ApiException) else f"unreachable ({exc})"
        raise JobawareError(f"pipeline submit {name}: the KFP host {host} {reason}") from None
    show({"submitted": name, "host": host, **result}, as_json)


def _run_with_progress(name: str, arguments: dict, verbose: bool, runner_name: str = "subprocess") -> dict:
    """One line per step with its status and seconds, a spinner for the running steps, logs to a file."""
    from rich.live import Live
    from rich.spinner import Spinner
    from rich.table import Table
    from rich.text import Text

    from pipelines import runner

    log = config.logs_dir() / f"pipeline-{name}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    err.print(f"pipeline {name}: steps' logs in {log}", highlight=False, soft_wrap=True)
    running: dict[str, float] = {}

    def view():
        grid = Table.grid(padding=(0, 1))
        for step, since in running.items():
            grid.add_row(Spinner("dots"), step, f"{time.monotonic() - since:.0f} s")
        return grid

    with Live(view(), console=err, transient=True, refresh_per_second=4, get_renderable=view) as live:
        def on_event(kind: str, step: str, seconds: float) -> None:
            if kind == "start":
                running[step] = time.monotonic()
                return
            running.pop(step, None)
            mark = ("✓", "green") if kind == "SUCCESS" else ("✗", "red")
            live.console.print(Text.assemble(mark, f" {step:<28} {kind.lower():<8} {seconds:6.1f} s"), highlight=False)

        try:
            return runner.run_watched(name, arguments, config.home() / "kfp", log, on_event, echo=verbose,
                                      runner=runner_name)
        except RuntimeError as exc:
            raise JobawareError(f"pipeline {name}: {exc}{_failure_reason(log)}") from None


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
    """The metrics of the versions this run registered, and where to look at them."""
    from jobaware import gate, tracking

    summary = {}
    for key, version in versions.items():
        capability = capabilities.get(key)
        metrics = tracking.version_metrics(key, version) if version else {}
        champion = tracking.champion_version(key)
        gate = (gate.last_promotion(key, version) or {}) if version else {}
        summary[key] = {"version": version, "champion": champion, "gate": gate.get("reason"), "metrics": metrics}
        if as_json:
            continue
        columns = capability.metrics_table or (capability.primary_metric,)
        rows = [{"model": name, **{m: values.get(m, float("nan")) for m in columns}} for name, values in metrics.items()]
        state = "champion" if champion == version else \
            f"not promoted: {gate.get('reason', 'the gate did not run')}; champion is {champion or 'none'}"
        show(summary[key], False, rows, title=f"{capability.model_name} version {version} ({state})")
        if "gap_to_bayes" in metrics.get("model", {}):
            m = metrics["model"]
            out.print(f"Bayes-optimal {capability.primary_metric} {m['bayes_roc_auc']:.4f}; "
                      f"gap to the model {m['gap_to_bayes']:.4f}", highlight=False)
    if as_json:
        show(summary, True)
    else:
        out.print(f"MLflow: {config.tracking_uri()}  (browse: mlflow ui --backend-store-uri {config.tracking_uri()})",
                  highlight=False, soft_wrap=True)


@pipeline_app.command("compile")
def pipeline_compile(out_dir: Annotated[Path, typer.Option("--out", help="directory for the IR YAML files")]):
    """Compile every pipeline to KFP IR YAML (each file replaced whole)."""
    from pipelines.runner import compile_all

    for path in compile_all(out_dir):
        out.print(f"wrote {path}", highlight=False)


# ---------------------------------------------------------------- models
@models_app.command("list")
def models_list(as_json: JsonFlag = False):
    """Registered model versions with their aliases and primary metric."""
    from jobaware import tracking

    rows = tracking.list_models()
    if not rows and not as_json:
        out.print("no registered models yet; run `jobaware pipeline run <capability>`")
        return
    show(rows, as_json, rows)


@models_app.command("promote")
def models_promote(
    key: Key,
    version: Annotated[str, typer.Argument(help="model version to promote")],
    force: Annotated[bool, typer.Option(help="promote even if the gate says no (logged as forced)")] = False,
    as_json: JsonFlag = False,
):
    """Run the promotion gate for VERSION; exit 0 when it became champion, 1 when the gate refused."""
    from jobaware import gate

    decision = gate.promote(capabilities.get(key).key, version, force)
    show(decision, as_json, [{k: v for k, v in decision.items() if k != "checks"}])
    raise typer.Exit(0 if decision["promoted"] else 1)


@models_app.command("rollback")
def models_rollback(key: Key, as_json: JsonFlag = False):
    """Point champion back at the previous champion."""
    from jobaware import gate

    show(gate.rollback(capabilities.get(key).key), as_json)


# ---------------------------------------------------------------- predictions and services
@app.command("predict")
def predict(
    key: Key,
    input_path: Annotated[list[str], typer.Option("--input", help="input file, folder or glob (repeatable)")],
    output: Annotated[str, typer.Option("--output", help="JSON Lines file, one object per record; - for stdout")],
    version: Annotated[str, typer.Option(help="model version (default: the champion)")] = "",
):
    """Predict every record of the input with the champion (or a given version); the output is written whole
    or not at all."""
    from jobaware import fit, sources, tracking

    capability = capabilities.get(key)
    inputs = [path for source in input_path for path in sources.expand(source)]
    bundle, used = tracking.load_bundle(key, version or None)
    with progress(f"predicting with {capability.model_name} version {used}") as bar:
        task = bar.add_task("records", total=None)
        summary = capability.predict_file(inputs, output, bundle, used, progress=lambda n: bar.advance(task, n))
    summary.fit = fit.notes(tracking.training_profile(key, used), summary.input_profile, used)
    where = "standard output" if output == "-" else output
    (err if output == "-" else out).print(f"wrote {summary.predictions:,} predictions to {where} (model version {used})"
              + "".join(f"; {name} {value:,}" for name, value in summary.counts.items()), highlight=False, soft_wrap=True)
    for note in summary.fit:
        err.print(f"warning: {note}", style="yellow", highlight=False, soft_wrap=True)
    if summary.bad_records:
        first = f"; first: {summary.problems[0]}" if summary.problems else ""
        err.print(f"{summary.bad_records:,} bad record(s) not predicted, listed in {summary.quarantine}{first}",
                  style="yellow", highlight=False, soft_wrap=True)


def service_command(key: str, port: int, host: str) -> list[str]:
    bentoml = Path(sys.executable).with_name("bentoml")
    return [str(bentoml), "serve", capabilities.get(key).service, "--port", str(port), "--host", host]


def service_env(key: str, port: int) -> dict:
    """The environment of a service: BentoML's home is the service's own (`JOBAWARE_HOME/bentoml/<key>-<port>`), so
    that each keeps its own Prometheus folder (BentoML empties that folder when a service starts)."""
    home = config.home(create=False)
    return {**os.environ, "MLFLOW_TRACKING_URI": config.tracking_uri(create=False), "JOBAWARE_HOME": str(home),
            "BENTOML_HOME": str(home / "bentoml" / f"{key}-{port}")}


@app.command("serve")
def serve(
    key: Key,
    port: Annotated[int, typer.Option(help="TCP port")] = FIRST_PORT,
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
):
    """Serve the champion over HTTP with BentoML; stopping this command, however, stops the server."""
    from jobaware import supervise

    code = supervise.serve(service_command(key, port, host), service_env(key, port), host, port,
                           say=_say_to_a_person)
    if code:
        raise typer.Exit(code)


@app.command("demo")
def demo(first_port: Annotated[int, typer.Option(help="port of the first service; the others follow")] = FIRST_PORT):
    """What `make run` does: every pipeline on its default data, then every champion served on localhost."""
    from jobaware import supervise

    started = []
    keys = capabilities.keys()
    for key in keys:
        pipeline_run(key, [], [], 0.01, "", False, "subprocess", False)
    examples = {}
    try:  # from the first service started: a Ctrl-C at any point stops every one started
        for offset, key in enumerate(keys):
            port = first_port + offset
            log = open(config.logs_dir() / f"serve-{key}.log", "wb")
            started.append(supervise.Guarded(service_command(key, port, "127.0.0.1"), service_env(key, port), stdout=log,
                                             stderr=subprocess.STDOUT))
            examples[key] = port
        _print_examples(examples)
        while all(p.poll() is None for p in started):
            time.sleep(1)
        raise JobawareError("a service stopped; see its log under " + str(config.logs_dir()))
    finally:
        stop_services(started)


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


def _print_examples(ports: dict[str, int]) -> None:
    for key, port in ports.items():
        path, body = capabilities.get(key).example
        out.print(f"\n{key}: http://127.0.0.1:{port} (OpenAPI: http://127.0.0.1:{port}/docs)", highlight=False)
        out.print(f"  curl -s -X POST http://127.0.0.1:{port}{path} -H 'content-type: application/json' "
                  f"-d '{json.dumps(body)}'", soft_wrap=True, highlight=False)
    out.print("\nCtrl-C stops every service.")


cli_registry.register(app, models_app)
_register_slurm(app)  # before the capabilities' commands, which may keep an old spelling under `slurm`
for _capability in capabilities.registry().values():
    if _capability.commands is not None:
        _group = typer.Typer(help=_capability.question[0].upper() + _capability.question[1:], no_args_is_help=True)
        app.add_typer(_group, name=_capability.key)
        _capability.commands(_group, app)
_register_htcondor(app)
_register_store(app)
_register_usage(app, report_app)
_register_mail(app)


def _error(message: str) -> None:
    from rich.text import Text

    err.print(Text.assemble(("error:", "red"), " ", message), highlight=False, soft_wrap=True)


def _cli_exceptions() -> tuple[tuple, tuple, tuple]:
    """(exit, usage error, abort) classes of click and of the click that recent typer releases vendor."""
    import click

    exits, usage, aborts = [click.exceptions.Exit, typer.Exit], [click.ClickException], [click.exceptions.Abort, typer.Abort]
    try:
        from typer._click import ClickException as TyperClickException
    except ImportError:
        pass
    else:
        usage.append(TyperClickException)
    return tuple(exits), tuple(usage), tuple(aborts)


def main() -> None:
    """Entry point: user errors are one clear line; JOBAWARE_DEBUG=1 shows the traceback."""
    exits, usage_errors, aborts = _cli_exceptions()
    # kill, systemd and harnesses stop with SIGTERM: unwind like Ctrl-C, so every `finally` stops what it started
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        code = app(standalone_mode=False)  # click returns a typer.Exit's code instead of raising it here
        sys.exit(code if isinstance(code, int) else 0)
    except JobawareError as exc:  # ContractError included: its message is the readable report
        _error(str(exc))
        sys.exit(1)
    except exits as exc:
        sys.exit(exc.exit_code)
    except usage_errors as exc:  # click's own message (usage, the option, what was wrong), exit 2
        exc.show()
        sys.exit(exc.exit_code)
    except (*aborts, KeyboardInterrupt):
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence for a one-line error
        if os.environ.get("JOBAWARE_DEBUG"):
            raise
        _error(f"unexpected {type(exc).__name__}: {exc} (set JOBAWARE_DEBUG=1 for the traceback)")
        sys.exit(1)
