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
    """Copy every job, prediction, checkpoint and event from the --input store to the --output one.

    Each job whole: its row, states, script and final state. Stop the daemons that write the input first. A new
    --output store (SQLite or a folder log) is made beside its place and moved there whole when the copy is done: a
    failed copy, a full disk included, leaves nothing. Into a store that exists (Redis, or --merge), each job is
    written whole, and running the same command again with --merge finishes a copy that stopped.

    Example: jobaware store copy --input /var/lib/jobaware/store.old --output /var/lib/jobaware/store
    """
    from pathlib import Path

    from jobaware.outputs import new_folder
    from jobaware.store import backend, open_store

    if backend(source) == backend(destination):
        raise JobawareError(f"store copy: {redacted(source)} and {redacted(destination)} are the same store")
    source_shown, destination_shown = redacted(source), redacted(destination)
    kind, where = backend(destination)
    started = time.monotonic()
    with open_store(source) as src:
        if kind == "redis" or Path(where).exists():
            copied = _copy_into(src, destination, source_shown, destination_shown, merge)
        else:
            with new_folder(where) as staging:
                copied = _copy_into(src, f"{kind}:{staging}", source_shown, destination_shown, merge, new=True)
    out.print(f"copied {copied.jobs:,} jobs, {copied.predictions:,} predictions, {copied.checkpoints:,} "
              f"checkpoints and {copied.events:,} events from {source_shown} to {destination_shown} in "
              f"{time.monotonic() - started:.1f} s", highlight=False, soft_wrap=True)


def _copy_into(src, into: str, source: str, destination: str, merge: bool, new: bool = False):
    """Copy the open store `src` into the store at `into` (the destination, or the `new` folder it is made in);
    `source` and `destination` as messages name them. A failure on the way is one line that says what is left."""
    import sqlite3

    from jobaware.store import open_store
    from jobaware.store.copy import Copied, copy, is_empty

    total, copied = src.count(), Copied()
    try:
        with open_store(into) as dst:
            if not merge and not is_empty(dst):
                raise JobawareError(f"store copy: {destination} is not empty ({dst.count():,} jobs); give --merge to "
                                    "copy into it anyway")
            err.print(f"copying {total:,} jobs from {source} to {destination}", highlight=False, soft_wrap=True)
            with progress("copying") as bar:
                task = bar.add_task("items", total=None)
                copied = copy(src, dst, lambda n: bar.advance(task, n), copied)
            if dst.count() < total:
                raise JobawareError(f"store copy: {destination} holds {dst.count():,} jobs after the copy, {source} "
                                    f"{total:,}")
    except (OSError, sqlite3.Error, ValueError) as exc:  # a full disk, a store gone, a log closed by a failed write
        reason = f"{exc.strerror or exc}" if isinstance(exc, OSError) else f"{exc}"
        left = ("nothing was left of it" if new else
                f"it holds the {copied.jobs:,} of {total:,} jobs copied before, each whole: run the same command with "
                "--merge to finish")
        raise JobawareError(f"store copy: {destination}: the copy stopped ({reason}); {left}") from None
    return copied


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
