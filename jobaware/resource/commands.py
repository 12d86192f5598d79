"""`resource`'s own command: `jobaware resource classify FILE...` (scripts are parsed, never run)."""

from __future__ import annotations

from typing import Annotated

import typer

from jobaware.console import renamed, show


def classify(
    files: Annotated[list[str], typer.Argument(help="job scripts (Python or batch shell): files, folders, globs")],
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
              **({"parse_status": r["parse_status"], "deciding features": _features(r["top_features"])}
                 if detail else {})} for r in rows]
    show(rows, as_json, rows=table)


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
