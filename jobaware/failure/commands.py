"""`failure`'s own commands: `jobaware failure export` (a job store's finished jobs as training data) and
`jobaware failure accuracy` (how the model does on the live jobs it judged; also in `jobaware report live`). The
old spelling `jobaware slurm export` stays for one release, hidden."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jobaware.cli_contract import OUTPUT, STORE, option
from jobaware.console import out, renamed, show

StoreOption = Annotated[str, option("--store", role=STORE, help="job store: a folder or redis://host:port/db")]


def export(
    store: StoreOption,
    out_path: Annotated[Path, option("--output", "-o", role=OUTPUT, help="NREL-format CSV to write")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing output")] = False,
):
    """Every finished job of the store, once, as an NREL-format CSV (what the failure readers take).

    A store with no finished job writes nothing and says so.

    Example: jobaware failure export --store /var/lib/jobaware/store --output jobs.csv
    """
    from jobaware.errors import InputError
    from jobaware.failure.export import export as export_jobs
    from jobaware.store import open_store

    with open_store(store) as opened:
        if not any(record["final"] for record in opened.records()):
            raise InputError(f"{store}: no finished job in this store yet; nothing to export")
        count = export_jobs(opened, out_path)
    out.print(f"wrote {count} finished job(s) to {out_path}")


def accuracy(store: StoreOption,
             as_json: Annotated[bool, typer.Option("--json", help="print JSON (errors too)")] = False):
    """How the failure model does on live jobs: its verdicts against the jobs' real ends.

    By week and model version.

    Example: jobaware failure accuracy --store /var/lib/jobaware/store
    """
    from jobaware.failure.accuracy import accuracy_report
    from jobaware.store import open_store

    with open_store(store) as opened:
        rows = accuracy_report(opened)
    if not rows and not as_json:
        out.print("no finished job with a verdict yet: run `jobaware slurm adapt` beside `jobaware slurm collect`")
        return
    show(rows, as_json, rows, title="failure on live jobs")


def register(group: typer.Typer, root: typer.Typer) -> None:
    """`jobaware failure export|accuracy`; `jobaware slurm export` stays, hidden. (`jobaware report live`, once an
    old spelling of `failure accuracy`, is every card part's live accuracy: this report among them.)"""
    group.command("export")(export)
    group.command("accuracy")(accuracy)
    slurm = next((info.typer_instance for info in root.registered_groups if info.name == "slurm"), None)
    if slurm is not None:
        slurm.command("export", hidden=True)(renamed(export, "jobaware failure export"))
