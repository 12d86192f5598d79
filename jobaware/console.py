"""What a person sees: results on stdout (tables or JSON), progress and messages on stderr.

Neither console reads markup or emoji codes: text holding user data (a job name `[/bold]`, a place `file.csv:100:`)
prints as it is; colour is given as a style or a `rich.text.Text`. A message line (`error`, `warning`, `notice`) is
one line: control characters escaped, URI passwords hidden, cut at `LINE_LIMIT` characters."""

from __future__ import annotations

import functools
import json
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from jobaware.jsonable import jsonable
from jobaware.text import escaped, redacted

LINE_LIMIT = 300  # characters of one message line; the rest is cut, its length said

# piped output is read by programs: wide enough that no table has to fold an identifier
out = Console(width=None if sys.stdout.isatty() else 250, markup=False, emoji=False, highlight=False)
err = Console(stderr=True, markup=False, emoji=False, highlight=False)


def one_line(text: str, limit: int = LINE_LIMIT) -> str:
    """`text` escaped onto one line of at most `limit` characters: a longer one keeps its start (where) and its end
    (what was found), its middle cut and its length said."""
    text = escaped(redacted(str(text)))
    if len(text) <= limit:
        return text
    cut = f" ...({len(text):,} characters)... "
    tail = (limit - len(cut)) // 3
    return text[: limit - len(cut) - tail] + cut + text[len(text) - tail:]


def message(kind: str, text: str, style: str) -> None:
    """One line on stderr: `kind: text`, the kind coloured."""
    err.print(Text.assemble((f"{kind}:", style), " ", one_line(text)), soft_wrap=True)


def error(text: str) -> None:
    message("error", text, "red")


def warning(text: str) -> None:
    message("warning", text, "yellow")


def notice(text: str) -> None:
    message("notice", text, "yellow")


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
    """A transient progress bar on stderr when it is a terminal (nothing at all when it is a pipe or a file);
    `total=None` tasks show a spinner and a count."""
    return Progress(SpinnerColumn(), TextColumn(label, markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err, transient=True, disable=not err.is_terminal)


def renamed(command, new: str):
    """`command` under its old spelling (a hidden alias kept for one release): the same command, with a notice
    naming the new spelling."""
    @functools.wraps(command)
    def old(*args, **kwargs):
        notice(f"this command is now `{new}`; the old spelling goes in the next release")
        return command(*args, **kwargs)

    example = [line.strip() for line in (command.__doc__ or "").splitlines() if line.strip().startswith("Example:")]
    old.__doc__ = f"Deprecated: `{new}`.\n\n" + "\n".join(example)
    return old
