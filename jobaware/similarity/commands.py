"""`similarity`'s own command: `jobaware similarity rank JOBID` (a ranked table, optionally the HTML report)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jobaware.console import err, out, renamed, show


def rank(
    jobid: Annotated[int, typer.Argument(help="the reference job")],
    data: Annotated[list[str], typer.Option(help="a pool to index on the fly (coding files); default: the champion's")] = [],  # noqa: B006
    index: Annotated[Path | None, typer.Option(help="a saved index folder")] = None,
    algorithm: Annotated[str, typer.Option(help="b-all, b-aggz, q-lev, q-native, q-phases or ks")] = "b-aggz",
    top: Annotated[int, typer.Option(help="how many jobs to list")] = 10,
    consensus: Annotated[list[str], typer.Option(help="combine several algorithms (repeatable)")] = [],  # noqa: B006
    report: Annotated[Path | None, typer.Option(help="also write the paper's views as an HTML page here")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
):
    """Rank every job of the pool by I/O similarity to JOBID, most similar first."""
    from jobaware.similarity.service import open_index, similar

    if data or index:
        pool = open_index(data or None, index)
    else:
        from jobaware import fit, tracking

        bundle, version = tracking.load_bundle("similarity")
        pool = bundle.index
        err.print(f"pool: the index of jobaware-similarity version {version} ({pool.size:,} jobs)", highlight=False)
        for note in fit.answer_flags(tracking.training_profile("similarity", version), version):
            err.print(f"warning: {note}", style="yellow", highlight=False, soft_wrap=True, markup=False)
    rows = similar(jobid, index=pool, algorithm=algorithm, top=top, consensus=consensus or None)
    show(rows, as_json, rows=rows)
    if report:
        from jobaware.similarity.report import report as write_report

        page, _ = write_report(pool, jobid, report)
        out.print(f"report: {page}", highlight=False)


def register(group: typer.Typer, root: typer.Typer) -> None:
    """`jobaware similarity rank`; `jobaware similar` stays for one release."""
    group.command("rank")(rank)
    root.command("similar", hidden=True)(renamed(rank, "jobaware similarity rank"))
