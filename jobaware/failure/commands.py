"""`failure`'s own commands: `jobaware collect slurm`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jobaware.console import err, out
from jobaware.errors import JobawareError


def collect(
    source: Annotated[str, typer.Argument(help="slurm")],
    out_path: Annotated[Path, typer.Option("--out", help="NREL-format CSV to append finished jobs to")],
    polls: Annotated[int, typer.Option(help="how many polls (bounded)")] = 1,
    interval: Annotated[float, typer.Option(help="seconds between polls")] = 60.0,
):
    """Poll `squeue --json` and append each newly finished job to an NREL-format CSV (once)."""
    from jobaware.failure.collector import collect as run_collector

    if source != "slurm":
        raise JobawareError(f"unknown source '{source}'; available: slurm")
    if polls < 1:
        raise JobawareError("--polls must be at least 1")
    added = run_collector(out_path, polls, interval, on_poll=lambda n: err.print(f"{n} new finished job(s) so far"))
    out.print(f"appended {added} finished job(s) to {out_path}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("collect")(collect)
