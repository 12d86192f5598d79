"""`jobaware slurm collect|export`, and the old `jobaware collect slurm` as a hidden alias."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jobaware.console import err, out
from jobaware.errors import JobawareError

slurm_app = typer.Typer(no_args_is_help=True, help="Keep a Slurm cluster's jobs in a job store, and export them.")

StoreOption = Annotated[str, typer.Option("--store", help="job store: a folder (created when missing) or redis://host:port/db")]


def _logging(name: str) -> Path:
    """Library and collector logs into a file under JOBAWARE_HOME/logs; returns its path."""
    import logging

    from jobaware import config

    path = config.logs_dir() / f"{name}.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    return path


def run_collector(store_uri: str, interval: float, polls: int | None, notices_uri: str | None, cluster: str | None,
                  max_calls: int, timeout: float) -> int:
    """Collect into the store; a line per poll on stderr. Returns the number of polls."""
    import signal
    import threading

    from adapters.slurm.collector import Collector, Slurm, cluster_name
    from adapters.slurm.notices import open_notices
    from jobaware.store import open_store

    if interval <= 0 or (polls is not None and polls < 1) or max_calls < 0 or timeout <= 0:
        raise JobawareError("expected --interval > 0, --polls >= 1, --max-calls >= 0 and --timeout > 0")
    log = _logging("slurm-collect")
    slurm = Slurm(timeout=timeout)
    cluster = cluster or cluster_name(slurm)
    if not cluster:
        raise JobawareError(f"scontrol show config gave no ClusterName; is Slurm reachable? pass --cluster (log: {log})")
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGTERM, signal.SIGINT)}

    def shown(number: int, result, seconds: float) -> None:
        status = "ok" if not result.failed else "retry next: " + ", ".join(result.failed[:3])
        err.print(f"poll {number}: {result.seen} listed, {result.new} new, {result.finished} finished, "
                  f"{result.scripts} scripts, {result.calls} calls, {status} ({seconds:.1f} s)", highlight=False)

    with open_store(store_uri) as store:
        notices = open_notices(notices_uri) if notices_uri else None
        try:
            return Collector(store, cluster, slurm, max_calls).run(polls, interval, notices, stop, shown)
        finally:
            if notices is not None:
                notices.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)


@slurm_app.command("collect")
def collect(
    store: StoreOption,
    interval: Annotated[float, typer.Option(help="seconds between polls")] = 60.0,
    polls: Annotated[int, typer.Option(help="how many polls (bounded)")] = 1,
    forever: Annotated[bool, typer.Option("--forever", help="poll until stopped (SIGTERM / Ctrl-C)")] = False,
    notices: Annotated[str, typer.Option(help="new-job notices: redis://host:port/db?stream=NAME or kafka://host:port/TOPIC")] = "",
    cluster: Annotated[str, typer.Option(help="cluster name in the store (default: Slurm's ClusterName)")] = "",
    max_calls: Annotated[int, typer.Option(help="scontrol calls per interval at most (beside one squeue and two sacct)")] = 20,
    timeout: Annotated[float, typer.Option(help="seconds each Slurm command may take")] = 30.0,
):
    """Poll Slurm (squeue, sacct, scontrol) into the job store: each job once, with its states, script and end."""
    done = run_collector(store, interval, None if forever else polls, notices or None, cluster or None, max_calls, timeout)
    out.print(f"{done} poll(s) into {store}", highlight=False)


@slurm_app.command("export")
def export(
    store: StoreOption,
    out_path: Annotated[Path, typer.Option("--out", help="NREL-format CSV to write (replaced)")],
):
    """Every finished job of the store, once, as an NREL-format CSV (the format the failure readers take)."""
    from jobaware.failure.from_store import export as export_jobs
    from jobaware.store import open_store

    with open_store(store) as opened:
        count = export_jobs(opened, out_path)
    out.print(f"wrote {count} finished job(s) to {out_path}", highlight=False)


def collect_alias(
    source: Annotated[str, typer.Argument(help="slurm")],
    out_path: Annotated[Path, typer.Option("--out", help="NREL-format CSV of the finished jobs (rewritten)")],
    polls: Annotated[int, typer.Option(help="how many polls (bounded)")] = 1,
    interval: Annotated[float, typer.Option(help="seconds between polls")] = 60.0,
):
    """Deprecated: `jobaware slurm collect` into a local store beside --out, then `jobaware slurm export`."""
    if source != "slurm":
        raise JobawareError(f"unknown source '{source}'; available: slurm")
    store = str(out_path.with_name(out_path.name + ".store"))
    err.print(f"`jobaware collect slurm` is deprecated: use `jobaware slurm collect --store {store}` and "
              f"`jobaware slurm export`", highlight=False)
    run_collector(store, interval, polls, None, None, 20, 30.0)
    export(store, out_path)


def register(app: typer.Typer) -> None:
    app.add_typer(slurm_app, name="slurm")
    app.command("collect", hidden=True)(collect_alias)
