"""`jobaware store copy --input SRC --output DST`: move a site's job store between backends."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from jobaware.cli_contract import STORE, option
from jobaware.console import err, out, progress
from jobaware.errors import JobawareError
from jobaware.text import redacted

store_app = typer.Typer(no_args_is_help=True, help="The job store: move it between backends.")

Uri = "a store: a folder (SQLite, or the folder log it holds), sqlite:PATH, folder:PATH or redis://host:port/db"


@store_app.command("copy")
def copy_command(
    source: Annotated[str, option("--input", "-i", role=STORE, help=f"the store to copy: {Uri}")],
    destination: Annotated[str, typer.Option("--output", "-o", metavar="STORE", help=f"where to (created when "
                                             f"missing): {Uri}")],
    merge: Annotated[bool, typer.Option("--merge", help="copy into a store that holds something already (its jobs "
                                        "that the source also holds are replaced whole): finishes an interrupted "
                                        "copy, or brings a copy up to date")] = False,
):
    """Copy every job (row, states, script, final state), prediction, checkpoint and event from the --input store
    to the --output one; stop the daemons that write the input first.

    Example: jobaware store copy --input /var/lib/jobaware/store.old --output /var/lib/jobaware/store
    """
    from jobaware.store import backend, open_store
    from jobaware.store.copy import copy, is_empty

    if backend(source) == backend(destination):
        raise JobawareError(f"store copy: {redacted(source)} and {redacted(destination)} are the same store")
    source_shown, destination_shown = redacted(source), redacted(destination)
    started = time.monotonic()
    with open_store(source) as src, open_store(destination) as dst:
        if not merge and not is_empty(dst):
            raise JobawareError(f"store copy: {destination_shown} is not empty ({dst.count():,} jobs); give --merge "
                                "to copy into it anyway")
        total = src.count()
        err.print(f"copying {total:,} jobs from {source_shown} to {destination_shown}", highlight=False, soft_wrap=True)
        with progress("copying") as bar:
            task = bar.add_task("items", total=None)
            copied = copy(src, dst, lambda n: bar.advance(task, n))
        if dst.count() < total:
            raise JobawareError(f"store copy: {destination_shown} holds {dst.count():,} jobs after the copy, "
                                f"{source_shown} {total:,}")
    out.print(f"copied {copied.jobs:,} jobs, {copied.predictions:,} predictions, {copied.checkpoints:,} "
              f"checkpoints and {copied.events:,} events from {source_shown} to {destination_shown} in "
              f"{time.monotonic() - started:.1f} s", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
