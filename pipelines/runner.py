"""Run a pipeline locally with kfp.local (SubprocessRunner, no venv), submit it to a KFP host, or compile it."""

from __future__ import annotations

from pathlib import Path

from kfp import compiler

from pipelines.all import all_pipeline
from pipelines.failure import failure_pipeline

PIPELINES = {"failure": failure_pipeline, "all": all_pipeline}


def compile_all(out_dir: str | Path) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, pipeline in PIPELINES.items():
        path = out_dir / f"{name}.yaml"
        compiler.Compiler().compile(pipeline, str(path))
        written.append(path)
    return written


def run_local(name: str, arguments: dict, pipeline_root: str | Path):
    from kfp import local

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(pipeline_root), raise_on_error=True)
    return PIPELINES[name](**arguments)


def submit(name: str, arguments: dict, host: str, experiment: str) -> str:
    import kfp

    client = kfp.Client(host=host)
    run = client.create_run_from_pipeline_func(PIPELINES[name], arguments=arguments, experiment_name=experiment)
    return run.run_id
