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
    """What binds each script: cpu, mem, network, io, other, or not_a_job — with the champion model. The scripts
    are read first; a file that is no script (empty, binary) is left out with a warning.

    Example: jobaware resource classify --input job.sh
    """
    from jobaware import tracking
    from jobaware.resource.service import classify_files

    rows, unread = classify_files(given(inputs, files), lambda: tracking.load_bundle("resource"), detail=detail)
    table = [{"file": r["file"], "class": r["class"],
              **{f"p_{k}": v for k, v in r["probabilities"].items()},
              **({"parse_status": r["parse_status"], "deciding features": _features(r["top_features"])}
                 if detail else {})} for r in rows]
    show(rows, as_json, rows=table)
    for problem in unread:
        warning(f"not classified: {problem}")


def _features(top: list) -> str:
    """The deciding features of one script, one per line: the feature, its value and (for models that weigh
    them) its push toward the class decided."""
    lines = []
    for item in top:
        weight = f" ({item['weight']:+.3f})" if isinstance(item.get("weight"), int | float) else ""
        lines.append(f"{item['feature']}={item['value']:g}{weight}")
    return "\n".join(lines) or "none (this model does not weigh features)"


def register(group: typer.Typer, root: typer.Typer) -> None:
    """`jobaware resource classify`; `jobaware classify` stays for one release."""
    group.command("classify")(classify)
    root.command("classify", hidden=True)(renamed(classify, "jobaware resource classify"))
