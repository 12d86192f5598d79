"""`failure`'s own commands: `jobaware failure export` (a job store's finished jobs as training data) and
`jobaware failure accuracy` (how the model does on the live jobs it judged). The old spellings `jobaware slurm
export` and `jobaware report live` stay for one release, hidden."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jobaware.console import out, renamed, show

StoreOption = Annotated[str, typer.Option("--store", help="job store: a folder or redis://host:port/db")]


def export(
    store: StoreOption,
    out_path: Annotated[Path, typer.Option("--out", help="NREL-format CSV to write (replaced)")],
):
    """Every finished job of the store, once, as an NREL-format CSV (the format the failure readers take)."""
    from jobaware.failure.export import export as export_jobs
    from jobaware.store import open_store

    with open_store(store) as opened:
        count = export_jobs(opened, out_path)
    out.print(f"wrote {count} finished job(s) to {out_path}", highlight=False)


def accuracy(store: StoreOption, as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False):
    """How the failure model does on live jobs: its verdicts joined with the jobs' real ends, by week and version."""
    from jobaware.failure.accuracy import accuracy_report
    from jobaware.store import open_store

    with open_store(store) as opened:
        rows = accuracy_report(opened)
    if not rows and not as_json:
        out.print("no finished job with a verdict yet: run `jobaware slurm adapt` beside `jobaware slurm collect`")
        return
    show(rows, as_json, rows, title="failure on live jobs")


def register(group: typer.Typer, root: typer.Typer) -> None:
    """`jobaware failure export|accuracy`; `jobaware slurm export` and `jobaware report live` stay, hidden."""
    group.command("export")(export)
    group.command("accuracy")(accuracy)
    for parent, old, command, new in (("slurm", "export", export, "jobaware failure export"),
                                      ("report", "live", accuracy, "jobaware failure accuracy")):
        found = next((info.typer_instance for info in root.registered_groups if info.name == parent), None)
        if found is not None:
            found.command(old, hidden=True)(renamed(command, new))
