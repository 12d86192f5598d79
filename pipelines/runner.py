"""Run a pipeline locally with kfp.local (SubprocessRunner, no venv), submit it to a KFP host, or compile it.

`run_watched` runs a pipeline in a child process whose whole output (kfp.local's executor logs and the
steps' own) goes to a log file, and reports each step's start and end as events, for a short display.
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
from collections.abc import Callable
from pathlib import Path

from jobaware import capabilities
from jobaware.errors import InputError

ALL = "pipelines.all:all_pipeline"
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


def compile_all(out_dir: str | Path) -> list[Path]:
    from kfp import compiler

    from jobaware.outputs import atomic_path

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir}: is a file; give a folder for the YAML files")
    written = []
    for name in names():
        path = out_dir / f"{name}.yaml"
        with atomic_path(path, ".yaml") as temporary:  # each file whole or not at all
            compiler.Compiler().compile(pipeline(name), str(temporary))
        written.append(path)
    return written


def run_local(name: str, arguments: dict, pipeline_root: str | Path) -> dict:
    """Run in this process; return the pipeline's outputs (`{"Output": version}` for one capability)."""
    from kfp import local

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(pipeline_root), raise_on_error=True)
    task = pipeline(name)(**arguments)
    return {key: value for key, value in task.outputs.items()}


class StepEvents:
    """Turns kfp.local's log lines into `on_event(kind, step, seconds)` calls: "start", then "SUCCESS" or
    "FAILURE" with the seconds it ran. A step a ParallelFor runs many times is numbered: trial, trial #2, ..."""

    def __init__(self, on_event: Callable[[str, str, float], None]):
        self.on_event = on_event
        self.running: dict[str, list[tuple[str, float]]] = {}  # step -> its instances still running (label, since)
        self.starts: dict[str, int] = {}
        self.failed: list[str] = []

    def feed(self, line: str) -> None:
        if match := _STARTED.search(line):
            step = match.group(1)
            self.starts[step] = self.starts.get(step, 0) + 1
            label = step if self.starts[step] == 1 else f"{step} #{self.starts[step]}"
            self.running.setdefault(step, []).append((label, time.monotonic()))
            self.on_event("start", label, 0.0)
        elif match := _FINISHED.search(line):
            step, status = match.groups()
            label, since = (self.running.get(step) or [(step, time.monotonic())]).pop(0)
            if status != "SUCCESS":
                self.failed.append(label)
            self.on_event(status, label, time.monotonic() - since)


def run_watched(name: str, arguments: dict, pipeline_root: Path, log: Path,
                on_event: Callable[[str, str, float], None], echo: bool = False) -> dict:
    """Run in a child process logging to `log`; call `on_event(kind, step, seconds)` for each step's
    "start" and "SUCCESS"/"FAILURE"; return the outputs, or raise RuntimeError naming the failed step."""
    result = log.with_suffix(".result.json")
    spec = json.dumps({"name": name, "arguments": arguments, "root": str(pipeline_root), "result": str(result)})
    steps = StepEvents(on_event)
    with open(log, "wb") as sink:
        child = subprocess.Popen([sys.executable, "-m", "pipelines.runner", spec], stdout=sink,
                                 stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[1],
                                 start_new_session=True)  # its own group: stopping it stops the steps too
    try:
        with open(log, "rb") as source:
            pending = b""
            while True:
                chunk = source.read()
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
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # the runner and any step it left running
        child.wait()
    if child.returncode != 0 or not result.is_file():
        where = f"step {steps.failed[0]}" if steps.failed else "the pipeline"
        raise RuntimeError(f"{where} failed; its log: {log}")
    return json.loads(result.read_text())


def submit(name: str, arguments: dict, host: str, experiment: str) -> str:
    import kfp

    client = kfp.Client(host=host)
    run = client.create_run_from_pipeline_func(pipeline(name), arguments=arguments, experiment_name=experiment)
    return run.run_id


def _child(spec: str) -> None:
    """Entry of the child process started by `run_watched`."""
    spec = json.loads(spec)
    outputs = run_local(spec["name"], spec["arguments"], spec["root"])
    Path(spec["result"]).write_text(json.dumps(outputs, default=str))


if __name__ == "__main__":
    _child(sys.argv[1])
