"""What a person sees: results on stdout (tables or JSON), progress and messages on stderr.

Neither console reads markup: text holding user data (a job name `[/bold]`) prints as it is; colour is
given as a style or a `rich.text.Text`."""

from __future__ import annotations

import functools
import json
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from jobaware.jsonable import jsonable

# piped output is read by programs: wide enough that no table has to fold an identifier
out = Console(width=None if sys.stdout.isatty() else 250, markup=False)
err = Console(stderr=True, markup=False)


def table(rows: list[dict], title: str | None = None) -> Table:
    """A table whose cells fold instead of being cut: identifiers stay whole, whatever the width."""
    result = Table(title=title)
    for column in rows[0] if rows else {}:
        result.add_column(str(column), overflow="fold")
    for row in rows:
        result.add_row(*[_cell(v) for v in row.values()])
    return result


def _cell(value) -> str:
    if isinstance(value, float):
        return "undefined" if value != value else f"{value:.4f}"
    return "" if value is None else str(value)


def show(data, as_json: bool, rows: list[dict] | None = None, title: str | None = None) -> None:
    """Print `data` as JSON (valid JSON: no NaN) or `rows` (default: `[data]`) as a table."""
    if as_json:
        print(json.dumps(jsonable(data), indent=2, default=str, allow_nan=False))
    else:
        out.print(table(rows if rows is not None else [data], title))


def progress(label: str) -> Progress:
    """A transient progress bar on stderr; `total=None` tasks show a spinner and a count."""
    return Progress(SpinnerColumn(), TextColumn(label, markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err, transient=True)


def renamed(command, new: str):
    """`command` under its old spelling (a hidden alias kept for one release): the same command, with a notice
    naming the new spelling."""
    @functools.wraps(command)
    def old(*args, **kwargs):
        err.print(f"notice: this command is now `{new}`; the old spelling goes in the next release", style="yellow")
        return command(*args, **kwargs)

    old.__doc__ = f"Deprecated: `{new}`."
    return old
