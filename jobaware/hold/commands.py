"""The logic of `hold`'s own commands, as plain functions (the CLI only parses arguments and prints):

  jobaware hold parse --input LOG... --output events.parquet  ->  parse_events(logs, out)
  jobaware hold label --input LOG... --json                   ->  label_holds(logs)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jobaware.cli_contract import OUTPUT, SOURCE, argument, given, option
from jobaware.console import err, progress, renamed, show
from jobaware.errors import InputError
from jobaware.outputs import staged
from jobaware.reading import QUARANTINE


def parse_events(logs: list[str], out: str | Path, *, strict: bool = False, year: int | None = None,
                 progress=None, overwrite: bool = False) -> dict:
    """Read event logs (files, globs, folders) into one canonical Parquet file; bad records go to
    `<out stem>.quarantine.jsonl` beside it. A read that found no event is an error and writes nothing.
    Returns the summary the command prints."""
    from jobaware.hold.reader import ReadOptions, write_events

    out = Path(out)
    quarantine = out.with_name(f"{out.stem}.{QUARANTINE}")
    with staged(out, overwrite=overwrite) as staging:  # both files written only once a read found events
        report, stats = write_events(logs, staging, staging.with_name(quarantine.name), strict=strict,
                                     progress=progress, options=ReadOptions(year=year))
        if not report.rows:
            first = f"; first problem: {report.problems[0]}" if report.problems else ""
            raise InputError(f"{', '.join(map(str, logs))}: no HTCondor event read ({report.bad_rows:,} bad "
                             f"record(s)){first}")
    return {"out": str(out), "events": report.rows, "bad_records": report.bad_rows, "duplicates": stats.duplicates,
            "files": stats.files, "quarantine": str(quarantine), "problems": [str(p) for p in report.problems]}


def label_holds(logs: list[str], *, strict: bool = False, include_unresolved: bool = False, year: int | None = None,
                nonzero_exit_is_failure: bool = False) -> list[dict]:
    """One record per hold: {"cluster", "proc", "hold_time", "hold_code", "hold_subcode", "label"}, in log order
    (holds still unresolved at the end of the logs only with `include_unresolved`, their label null). Logs with
    no event in them are an InputError."""
    from jobaware.hold.labels import decisions, label_records
    from jobaware.hold.reader import ReadOptions, read_events

    events, report = read_events(logs, ReadOptions(year=year), strict=strict)
    if not len(events):
        first = f"; first: {report.problems[0]}" if report.problems else ""
        raise InputError(f"{', '.join(map(str, logs))}: no HTCondor event read ({report.bad_rows:,} bad record(s))"
                         f"{first}")
    return label_records(decisions(events, nonzero_exit_is_failure), include_unresolved)


Logs = Annotated[list[str] | None, option("--input", "-i", role=SOURCE, help="event log files, globs or folders "
                                          "(repeatable)")]
OldLogs = Annotated[list[str] | None, argument(role=SOURCE, hidden=True, help="old spelling of --input")]
Strict = Annotated[bool, typer.Option("--strict", help="stop at the first bad record")]
Year = Annotated[int | None, typer.Option(min=1970, max=2100, help="year of the first event of year-less (MM/DD) logs")]
AsJson = Annotated[bool, typer.Option("--json", help="print JSON (errors too)")]


def parse_command(output: Annotated[Path, option("--output", "-o", role=OUTPUT, help="canonical events table "
                                                 "(Parquet)")],
                  inputs: Logs = None, logs: OldLogs = None, strict: Strict = False, year: Year = None, as_json: AsJson = False,
                  overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing output")] = False):
    """Read event logs (rotated files, overlaps and duplicates sorted out) into one canonical table.

    Example: jobaware hold parse --input EventLog --output events.parquet
    """
    with progress("reading event logs") as bar:
        task = bar.add_task("read", total=None)
        summary = parse_events(given(inputs, logs), output, strict=strict, year=year,
                               progress=lambda n: bar.advance(task, n), overwrite=overwrite)
    problems = summary.pop("problems")
    show(summary, as_json)
    for problem in problems if not as_json else []:
        err.print(f"  - {problem}", soft_wrap=True)


def label_command(inputs: Logs = None, logs: OldLogs = None, strict: Strict = False, year: Year = None,
                  unresolved: Annotated[bool, typer.Option("--unresolved", help="also list holds still standing at "
                                                           "the end")] = False,
                  as_json: AsJson = False):
    """One line per hold: when, its code, and what happened next (release or remove).

    Example: jobaware hold label --input EventLog --json
    """
    rows = label_holds(given(inputs, logs), strict=strict, include_unresolved=unresolved, year=year)
    show(rows, as_json, rows=rows)


def register(group: typer.Typer, root: typer.Typer) -> None:
    """`jobaware hold parse` and `jobaware hold label`; `jobaware events parse` stays for one release."""
    group.command("parse")(parse_command)
    group.command("label")(label_command)
    events_app = typer.Typer(help="Deprecated: `jobaware hold parse`.", no_args_is_help=True, hidden=True)
    events_app.command("parse")(renamed(parse_command, "jobaware hold parse"))
    root.add_typer(events_app, name="events", hidden=True)
