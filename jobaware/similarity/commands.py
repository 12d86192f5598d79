"""`similarity`'s own command: `jobaware similarity rank JOBID` (a ranked table, optionally the HTML report)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, get_args

import typer

from jobaware.cli_contract import OUTPUT, SOURCE, option
from jobaware.console import err, out, renamed, show, warning
from jobaware.errors import UsageError

Algorithm = Literal["b-all", "b-aggz", "q-lev", "q-native", "q-phases", "ks"]


def rank(
    jobid: Annotated[int, typer.Argument(min=1, metavar="JOBID", help="the reference job")],
    inputs: Annotated[list[str], option("--input", "-i", role=SOURCE, help="a pool to index on the fly (coding "
                                        "files); default: the champion's")] = [],  # noqa: B006
    index: Annotated[Path | None, option(role=SOURCE, metavar="DIR", help="a saved index folder")] = None,
    algorithm: Annotated[Algorithm, typer.Option(help="the similarity algorithm")] = "b-aggz",
    top: Annotated[int, typer.Option(min=1, max=1000, help="how many jobs to list")] = 10,
    consensus: Annotated[list[str], typer.Option(help="combine several algorithms (repeatable)")] = [],  # noqa: B006
    report: Annotated[Path | None, option(role=OUTPUT, help="also write the paper's views as an HTML page here "
                                          "(its figures beside it)")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing report")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (errors too)")] = False,
):
    """Rank every job of the pool by I/O similarity to JOBID, most similar first.

    Example: jobaware similarity rank 18035492 --input job_codings_binary.csv --top 5
    """
    from jobaware.similarity.service import open_index, similar

    if unknown := [name for name in consensus if name not in get_args(Algorithm)]:
        raise UsageError(f"--consensus {unknown[0]}: expected one of {', '.join(get_args(Algorithm))}")
    def left_out(report) -> None:
        if report.bad_rows:
            warning(f"{report.bad_rows:,} bad record(s) left out of the pool; first: {report.problems[0]}")

    if inputs or index:
        pool = open_index(inputs or None, index, on_read=left_out)
    else:
        from jobaware import fit, tracking

        bundle, version = tracking.load_bundle("similarity")
        pool = bundle.index
        err.print(f"pool: the index of jobaware-similarity version {version} ({pool.size:,} jobs)")
        for note in fit.answer_flags(tracking.training_profile("similarity", version), version):
            warning(note)
    rows = similar(jobid, index=pool, algorithm=algorithm, top=top, consensus=consensus or None)
    show(rows, as_json, rows=rows)
    if report:
        from jobaware.outputs import staged
        from jobaware.similarity.report import report as write_report

        with staged(report, overwrite=overwrite) as staging:
            write_report(pool, jobid, staging)
        out.print(f"report: {report}")


def register(group: typer.Typer, root: typer.Typer) -> None:
    """`jobaware similarity rank`; `jobaware similar` stays for one release."""
    group.command("rank")(rank)
    root.command("similar", hidden=True)(renamed(rank, "jobaware similarity rank"))
