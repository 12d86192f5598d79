"""`jobaware slurm ...`: the Slurm side of jobaware."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adapters.slurm.plugins import DEFAULT_CACHE

slurm_app = typer.Typer(help="The Slurm side: plugins that read the verdict cache.", no_args_is_help=True)


@slurm_app.command("plugins")
def plugins(
    out: Annotated[Path, typer.Option("--out", help="folder for job_submit.lua and cli_filter.lua")],
    cache: Annotated[str, typer.Option(help="absolute path of the verdict cache the adapter writes")] = DEFAULT_CACHE,
    field: Annotated[str, typer.Option(help="where the verdict goes: comment or admin_comment")] = "comment",
    stale_after: Annotated[int, typer.Option(help="seconds after which the plugins ignore the cache")] = 3600,
    advise_above: Annotated[float, typer.Option(help="failure risk from which cli_filter advises")] = 0.5,
    force: Annotated[bool, typer.Option(help="replace existing files")] = False,
):
    """Write job_submit.lua and cli_filter.lua (put them beside slurm.conf; see the README)."""
    from adapters.slurm.plugins import write_plugins
    from jobaware.console import err

    for path in write_plugins(out, force=force, cache=cache, field=field, stale_after=stale_after,
                              advise_above=advise_above):
        err.print(f"wrote {path}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the `slurm` commands to the jobaware CLI."""
    app.add_typer(slurm_app, name="slurm")
