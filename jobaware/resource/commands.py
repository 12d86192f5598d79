"""`resource`'s own command: `jobaware resource classify --input FILE...` (scripts are parsed, never run)."""

from __future__ import annotations

from typing import Annotated

import typer

from jobaware.cli_contract import SOURCE, argument, given, option
from jobaware.console import renamed, show, warning


def classify(
    inputs: Annotated[list[str] | None, option("--input", "-i", role=SOURCE, help="job scripts (Python or batch "
                                               "shell): files, folders, globs (repeatable)")] = None,
    files: Annotated[list[str] | None, argument(role=SOURCE, hidden=True, help="old spelling of --input")] = None,
    detail: Annotated[bool, typer.Option("--detail", help="also the parse status and the deciding features")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (errors too)")] = False,
):
    """What binds each script: cpu, mem, network, io, other, or not_a_job, with the champion model.

    Every file gets its line: its class, or why it was not read (binary, unreadable); the command fails only when
    no file is a script. The scripts are read first, and parsed, never run.

    Example: jobaware resource classify --input job.sh
    """
    from jobaware import tracking
    from jobaware.resource.service import CLASSIFIED, classify_files

    rows = classify_files(given(inputs, files), lambda: tracking.load_bundle("resource"), detail=detail)
    unread = sum(row["status"] != CLASSIFIED for row in rows)
    classes = next(row["probabilities"] for row in rows if row["status"] == CLASSIFIED)
    table = [{"file": r["file"], "class": r["class"] or "-", **({"status": r["status"]} if unread else {}),
              **{f"p_{k}": r["probabilities"].get(k) for k in classes},
              **({"parse_status": r.get("parse_status"), "deciding features": _features(r.get("top_features"))}
                 if detail else {})} for r in rows]
    show(rows, as_json, rows=table)
    if unread and not as_json:
        warning(f"{unread:,} of {len(rows):,} files not classified (no script: see their status)")


def _features(top: list | None) -> str:
    """The deciding features of one script, one per line: the feature, its value and (for models that weigh
    them) its push toward the class decided (none for a file not read)."""
    if top is None:
        return ""
    lines = []
    for item in top:
        weight = f" ({item['weight']:+.3f})" if isinstance(item.get("weight"), int | float) else ""
        lines.append(f"{item['feature']}={item['value']:g}{weight}")
    return "\n".join(lines) or "none (this model does not weigh features)"


def register(group: typer.Typer, root: typer.Typer) -> None:
    """`jobaware resource classify`; `jobaware classify` stays for one release."""
    group.command("classify")(classify)
    root.command("classify", hidden=True)(renamed(classify, "jobaware resource classify"))
