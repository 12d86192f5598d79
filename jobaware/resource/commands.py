"""`resource`'s own command: `jobaware classify FILE...` (scripts are parsed, never run)."""

from __future__ import annotations

from typing import Annotated

import typer

from jobaware.console import show


def classify(
    files: Annotated[list[str], typer.Argument(help="job scripts (Python or batch shell)")],
    detail: Annotated[bool, typer.Option(help="also the parse status and the deciding features")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
):
    """What binds each script: cpu, mem, network, io, other, or not_a_job — with the champion model."""
    from jobaware import tracking
    from jobaware.resource.service import classify_files

    bundle, _ = tracking.load_bundle("resource")
    rows = classify_files(files, bundle, detail=detail)
    table = [{"file": r["file"], "class": r["class"],
              **{f"p_{k}": v for k, v in r["probabilities"].items()},
              **({"parse_status": r["parse_status"]} if detail else {})} for r in rows]
    show(rows, as_json, rows=table)


def register(app: typer.Typer) -> None:
    app.command("classify")(classify)
