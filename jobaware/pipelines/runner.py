"""Run a pipeline locally with kfp.local (SubprocessRunner, no venv; or DockerRunner: every step in the project
image through podman's Docker-compatible API), submit it to a KFP host, or compile it.

`run_watched` runs a pipeline in a child process whose whole output (kfp.local's executor logs and the
steps' own) goes to a log file, and reports each step's start, progress (jobaware.progress lines) and end, with
the seconds and the CPU it took, as events, for a short display.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jobaware import capabilities
from jobaware.errors import InputError
from jobaware.progress import parse as parse_progress

ALL = "jobaware.pipelines.all:all_pipeline"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STARTED = re.compile(r"Executing task '([^']+)'")
_FINISHED = re.compile(r"Task '([^']+)' finished with status (\w+)")


def names() -> list[str]:
    return [*capabilities.keys(), "all"]


def pipeline(name: str):
    """The KFP pipeline function of a capability (or of `all`)."""
    target = ALL if name == "all" else capabilities.get(name).pipeline
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def compile_all(out_dir: str | Path, overwrite: bool = False) -> list[Path]:
    """Every pipeline as `<out_dir>/<name>.yaml`, each written whole; existing files replaced only with `overwrite`
    (refused before any is written)."""
    from kfp import compiler

    from jobaware.outputs import atomic_path

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: is a file; give a folder for the YAML files")
    existing = [out_dir / f"{name}.yaml" for name in names() if (out_dir / f"{name}.yaml").exists()]
    if existing and not overwrite:
        raise InputError(f"{existing[0]}: exists ({len(existing)} of the files); give --overwrite to replace them")
    written = []
    for name in names():
        path = out_dir / f"{name}.yaml"
        with atomic_path(path, ".yaml") as temporary:  # each file whole or not at all
            compiler.Compiler().compile(pipeline(name), str(temporary))
        written.append(path)
    return written


RUNNERS = ("subprocess", "docker")


def run_local(name: str, arguments: dict, pipeline_root: str | Path, runner: str = "subprocess") -> dict:
    """Run in this process; return the pipeline's outputs (`{"Output": version}` for one capability).
    `docker`: every step in the image `JOBAWARE_IMAGE` (default the one `make image` builds) through the Docker
    API at DOCKER_HOST, else through `podman system service` on a private socket for this run."""
    from kfp import local

    if runner == "subprocess":
        init_subprocess(pipeline_root)
        return _outputs(name, arguments)
    from jobaware import containers

    os.environ.setdefault("JOBAWARE_IMAGE", containers.IMAGE)  # read by components/ when they are imported
    with contextlib.ExitStack() as stack:
        if not os.environ.get("DOCKER_HOST"):
            import tempfile

            socket_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="jobaware-podman-"))
            os.environ["DOCKER_HOST"] = stack.enter_context(containers.docker_api(Path(socket_dir)))
        local.init(runner=local.DockerRunner(**_container_args(arguments, pipeline_root)),
                   pipeline_root=str(pipeline_root), raise_on_error=True)
        return _outputs(name, arguments)


def init_subprocess(pipeline_root: str | Path) -> None:
    """kfp.local with its SubprocessRunner in this Python (no venv). kfp 2.17 puts this Python in place of every
    `python3` of a step's command line, its arguments included, so that a path holding `python3` reached the step
    broken (every input under a venv's `lib/python3.11/site-packages`: an installed jobaware's bundled data, found by
    installing the wheel outside the checkout). Here the replacement stops at the component's source, as upstream's
    fix does (kubeflow/pipelines#14459, open on the day this was written)."""
    from kfp import local
    from kfp.local import subprocess_task_handler

    def in_commands_only(full_command: list[str], new_executable: str) -> list[str]:
        source = next((i for i, part in enumerate(full_command)
                       if '"$program_path/ephemeral_component.py"' in part and '"$@"' in part), len(full_command))
        return [part.replace("python3", new_executable) for part in full_command[: source + 1]] + \
            full_command[source + 1:]

    subprocess_task_handler.replace_python_executable = in_commands_only
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(pipeline_root), raise_on_error=True)


def _outputs(name: str, arguments: dict) -> dict:
    import builtins

    printing = builtins.print  # kfp.local indents its tasks' logs by replacing print, and tasks run side by side
    try:  # (a ParallelFor) can restore it out of order: a later import of numba then fails on the stray function
        task = pipeline(name)(**arguments)
    finally:
        builtins.print = printing
    return {key: value for key, value in task.outputs.items()}


def _container_args(arguments: dict, pipeline_root: str | Path) -> dict:
    """How each step's container runs: on the host's network (an MLflow server on loopback answers), the
    JOBAWARE_HOME (where artifacts go) and a SQLite tracking store mounted at their own paths (read-write) and
    named by the same JOBAWARE_HOME inside, local data read-only, as the caller's own uid and gid
    (`containers.caller_user`: nothing on the host changes owner or mode)."""
    from docker.types import Mount

    from jobaware import config, containers, sources

    writable = {config.home()}
    if store := config.local_store(str(arguments.get("tracking_uri") or "")):
        writable.add(store.parent)
    Path(pipeline_root).mkdir(parents=True, exist_ok=True)
    readable = set()
    for key, value in arguments.items():
        if key == "data" or key.endswith("_data"):
            readable |= {Path(p) for p in sources.parse(value) if not sources.is_remote(p) and Path(p).exists()}
    mounts = [Mount(str(p), str(p), type="bind") for p in sorted(writable)]
    mounts += [Mount(str(p), str(p), type="bind", read_only=True) for p in sorted(readable)
               if not any(p.is_relative_to(w) for w in writable)]
    environment = {"JOBAWARE_HOME": str(config.home())}
    if pipeline_run := os.environ.get(config.PIPELINE_RUN_ENV):  # the steps tag their MLflow runs with it
        environment[config.PIPELINE_RUN_ENV] = pipeline_run
    return {"network_mode": "host", "user": containers.caller_user(), "environment": environment,
            "mounts": [m for m in mounts if m["Target"] != str(pipeline_root)]}  # kfp mounts the root itself


@dataclass
class Event:
    """What a step did: `kind` "start", "progress" (`progress` = (done, total, unit)), "SUCCESS" or "FAILURE" (with
    the `seconds` it ran and, where /proc tells, the `cpu` seconds its processes used)."""

    kind: str
    step: str
    seconds: float = 0.0
    cpu: float | None = None
    progress: tuple[int, int, str] | None = None


class StepEvents:
    """Turns kfp.local's log lines into `on_event(Event)` calls: "start", "progress" lines of the step
    (jobaware.progress), then "SUCCESS" or "FAILURE". A step a ParallelFor runs many times is numbered: trial,
    trial #2, ... `cpu()`, when given, is the CPU seconds of the runner's finished children so far: a step's CPU is
    what it grew by since the step before finished (its processes are reaped when it finishes)."""

    def __init__(self, on_event: Callable[[Event], None], cpu: Callable[[], float | None] = lambda: None):
        self.on_event, self.cpu = on_event, cpu
        self.running: dict[str, list[tuple[str, float]]] = {}  # step -> its instances still running (label, since)
        self.starts: dict[str, int] = {}
        self.failed: list[str] = []
        self.reaped = cpu()

    def feed(self, line: str) -> None:
        if match := _STARTED.search(line):
            step = match.group(1)
            self._ended_before(step)
            self.starts[step] = self.starts.get(step, 0) + 1
            label = step if self.starts[step] == 1 else f"{step} #{self.starts[step]}"
            self.running.setdefault(step, []).append((label, time.monotonic()))
            self.on_event(Event("start", label))
        elif match := _FINISHED.search(line):
            step, status = match.groups()
            label, since = (self.running.get(step) or [(step, time.monotonic())]).pop(0)
            if status != "SUCCESS":
                self.failed.append(label)
            self.on_event(Event(status, label, time.monotonic() - since, self._spent()))
        elif (said := parse_progress(line)) is not None:
            running = [label for instances in self.running.values() for label, _ in instances]
            if len(running) == 1:  # a line of the one step running (parallel iterations are not told apart)
                self.on_event(Event("progress", running[0], progress=said))


    def _spent(self, share: int = 1) -> float | None:
        reaped = self.cpu()
        spent = (reaped - self.reaped) / share if reaped is not None and self.reaped is not None else None
        self.reaped = reaped
        return spent

    def _ended_before(self, step: str) -> None:
        """kfp.local runs one task at a time but a ParallelFor's iterations, and logs the end of only one of
        these: when another task starts, the ones still listed have ended well (else the run would have stopped),
        sharing the CPU reaped since."""
        left = [(label, since) for other, instances in self.running.items() if other != step
                for label, since in instances]
        for other in [other for other in self.running if other != step]:
            del self.running[other]
        share = self._spent(len(left)) if left else None
        for label, since in left:
            self.on_event(Event("SUCCESS", label, time.monotonic() - since, share))


def children_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of the finished children of process `pid` (Linux /proc), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")  # cutime, cstime


def run_watched(name: str, arguments: dict, pipeline_root: Path, log: Path, on_event: Callable[[Event], None],
                echo: bool = False, runner: str = "subprocess", env: dict | None = None,
                stopped: Callable[[], bool] = lambda: False) -> dict:
    """Run in a child process (with `env`, default this one's) logging to `log`; call `on_event(Event)` for each
    step's start, progress and end; return the outputs, or raise RuntimeError naming the failed step. The child
    and every step it started are killed when this returns or raises, or as soon as `stopped()` is true; the MLflow
    runs its steps left RUNNING are then marked KILLED (stopped, interrupted) or FAILED (a step failed)."""
    from jobaware.config import PIPELINE_RUN_ENV

    result = log.with_suffix(".result.json")
    spec = json.dumps({"name": name, "arguments": arguments, "root": str(pipeline_root), "result": str(result),
                       "runner": runner})
    pipeline_run = uuid.uuid4().hex
    Path(pipeline_root).mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as sink:
        child = subprocess.Popen([sys.executable, "-P", "-m", "jobaware.pipelines.runner", spec], stdout=sink,
                                 stderr=subprocess.STDOUT, cwd=pipeline_root,  # `-m` puts its folder on sys.path:
                                 # the pipeline's own (in the trusted home), never the caller's (a planted package)
                                 env={**(os.environ if env is None else env), PIPELINE_RUN_ENV: pipeline_run},
                                 start_new_session=True)  # its own group: stopping it stops the steps too
    steps = StepEvents(on_event, lambda: children_cpu(child.pid))
    ended = False
    try:
        with open(log, "rb") as source:
            pending = b""
            while True:
                chunk = source.read()
                if stopped():
                    break
                if not chunk:
                    if child.poll() is not None:
                        break
                    time.sleep(0.2)
                    continue
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for raw in lines:
                    line = _ANSI.sub("", raw.decode("utf-8", "replace"))
                    if echo:
                        print(line, file=sys.stderr)
                    steps.feed(line)
        ended = not stopped()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # the runner and any step it left running
        child.wait()
        if not ended or child.returncode != 0:
            _end_unfinished(pipeline_run, "FAILED" if ended else "KILLED", log)
    if child.returncode != 0 or not result.is_file():
        where = f"step {steps.failed[0]}" if steps.failed else "the pipeline"
        raise RuntimeError(f"{where} failed; its log: {log}")
    return json.loads(result.read_text())


def _end_unfinished(pipeline_run: str, status: str, log: Path) -> None:
    """Mark the MLflow runs of a pipeline run that were left RUNNING; a registry that does not answer is noted in
    the log (this runs on the way out: it never raises)."""
    from jobaware import tracking

    try:
        marked = tracking.end_unfinished(pipeline_run, status)
    except Exception as exc:  # noqa: BLE001 - on the way out of a failed or stopped run, whatever the registry says
        marked = f"none ({type(exc).__name__}: {str(exc)[:300]})"
    with contextlib.suppress(OSError), open(log, "a") as sink:
        sink.write(f"jobaware: MLflow runs left RUNNING, now {status}: {marked}\n")


def submit(name: str, arguments: dict, host: str, experiment: str) -> str:
    import kfp

    client = kfp.Client(host=host)
    run = client.create_run_from_pipeline_func(pipeline(name), arguments=arguments, experiment_name=experiment)
    return run.run_id


_CRON_FIELD = re.compile(r"^[0-9A-Za-z*?/,\-]+$")
_CRON_DESCRIPTOR = re.compile(r"^@(yearly|annually|monthly|weekly|daily|midnight|hourly|every \d+[smh](\d+[smh])*)$")


def kfp_cron(expression: str) -> str:
    """A cron expression as KFP's scheduler reads it (robfig/cron, seconds first): five fields get a leading `0`,
    six are kept, a `@daily`-style descriptor is kept; anything else raises ValueError saying why."""
    expression = " ".join(expression.split())
    if _CRON_DESCRIPTOR.match(expression):
        return expression
    fields = expression.split(" ")
    if len(fields) not in (5, 6) or not all(_CRON_FIELD.match(f) for f in fields):
        raise ValueError(f"'{expression}' is not a cron expression (5 fields 'min hour day month weekday', "
                         "6 with seconds first, or @hourly/@daily/@weekly/@monthly/@every 6h)")
    return expression if len(fields) == 6 else "0 " + expression


def schedule(name: str, arguments: dict, host: str, experiment: str, cron: str) -> dict:
    """A recurring run of the pipeline on a KFP host, once: an enabled recurring run of the same name and
    schedule in the experiment is kept and returned (`created` False); one with another schedule is an error."""
    import tempfile

    import kfp
    from kfp import compiler

    cron = kfp_cron(cron)
    client = kfp.Client(host=host)
    experiment_id = client.create_experiment(experiment).experiment_id  # returns the existing one by name
    title = f"jobaware-{name} retraining"
    existing = client.list_recurring_runs(experiment_id=experiment_id, page_size=100,
                                          filter=json.dumps({"predicates": [{"key": "display_name",
                                                                             "operation": "EQUALS",
                                                                             "stringValue": title}]}))
    for recurring in existing.recurring_runs or []:
        if recurring.display_name != title:
            continue
        current = recurring.trigger.cron_schedule.cron if recurring.trigger and recurring.trigger.cron_schedule else ""
        if current != cron:
            raise ValueError(f"'{title}' already runs on '{current}' (recurring run {recurring.recurring_run_id}); "
                             "delete it on the host to change its schedule")
        return {"recurring_run_id": recurring.recurring_run_id, "cron": cron, "created": False}
    with tempfile.TemporaryDirectory() as folder:
        package = Path(folder) / f"{name}.yaml"
        compiler.Compiler().compile(pipeline(name), str(package))
        recurring = client.create_recurring_run(experiment_id, title, cron_expression=cron, params=arguments,
                                                pipeline_package_path=str(package), no_catchup=True)
    return {"recurring_run_id": recurring.recurring_run_id, "cron": cron, "created": True}


def _child(spec: str) -> None:
    """Entry of the child process started by `run_watched`."""
    spec = json.loads(spec)
    from jobaware.outputs import atomic_text

    outputs = run_local(spec["name"], spec["arguments"], spec["root"], spec.get("runner", "subprocess"))
    with atomic_text(spec["result"]) as result:
        result.write(json.dumps(outputs, default=str))


if __name__ == "__main__":
    _child(sys.argv[1])
