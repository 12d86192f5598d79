"""The command contract every `jobaware` command keeps (README, "The command contract"), in one place.

- Roles: every file, folder, job store or service a command takes is declared with `option(..., role=ROLE)` or
  `argument(..., role=ROLE)`. Before a command's body runs, `install` checks each value by its role (a missing,
  unreadable, empty, binary or one-huge-line input; an output that exists or is a folder; a store that is not
  one; a URL that is not one), so that a wrong path is refused in one line before anything is read, loaded or
  written.
- Reading nothing is not success, at the depth of what a command reads: a path that is not there is refused, but of
  the files a SOURCE names (several values, a glob, a folder) the command is refused only when none can be read; the
  others it reads, and it says what became of each (an empty or binary script among 500 is one line of its
  answer). A FILE is one file, checked alone. A LOG is a log a daemon follows: not written yet (missing or empty)
  it is waited for, not refused.
- Exit codes: 0 done; 1 bad input (files, data, services, registry: `JobawareError`); 2 a wrong command line
  (click's own usage errors and `UsageError`: an unknown option, a value of the wrong type, out of its range or
  not among its choices). One line on stderr (`jobaware.console.error`), or with `--json` one JSON object on stdout.
- One spelling: `--input`, `--output`/`-o`, `--service`, `--overwrite`; old spellings (`--out`, `--data`,
  `--force` where it meant overwrite) are read as the new ones, with a notice.
- One meaning per option name across commands: `--since`/`--until` are moments in one form (`when_option`: a time
  ago 7d, 12h, 30m, 2w, a date, a local time, now, all; a bare number is refused: its unit is not known); `--host` is
  an address to bind (`--kfp-host` the Kubeflow Pipelines URL); `--version` is jobaware's (`--model-version` a
  model's). An old spelling that meant something else is a one-line usage error naming the new one (`moved`), never
  a silent alias.
- Plain flags show as flags in `--help` (typer shows `--json <bool>`).
- Help reads whole: a docstring's paragraphs are joined into lines before typer shows them (it keeps a docstring's
  line breaks, so that a sentence broke where the source line did); the first paragraph is the command's summary.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import typer
from typer.core import TyperOption

from jobaware import console
from jobaware.errors import InputError, JobawareError, UsageError
from jobaware.reading import BINARY_SUFFIXES, binary_reason

SOURCE, FILE, LOG, OUTPUT, FOLDER, APPEND, STORE, SERVICE = ("source", "file", "log", "output", "folder", "append",
                                                          "store", "service")
METAVARS = {SOURCE: "SOURCE", FILE: "FILE", LOG: "LOG", OUTPUT: "OUTPUT", FOLDER: "DIR", APPEND: "FILE",
            STORE: "STORE", SERVICE: "URL"}
OLD_SPELLINGS = {"out": "output", "data": "input", "force": "overwrite"}  # read as the new one where it exists
WHOLE_SUFFIXES = (".json",)  # one record may fill the file: no limit on a line
HEAD = 64 << 10  # bytes of a file looked at for binary content
LINE = 1 << 20  # the longest first line a line-based text file may have
REMOTE = ("s3://", "gs://", "gcs://", "hdfs://", "abfs://", "abfss://", "file://", "redis://", "rediss://", "unix://",
          "sqlite:", "folder:")  # URIs, and job stores named by their backend (checked where they are read)


# ---------------------------------------------------------------- declaring parameters
def option(*decls: str, role: str | None = None, stdout: bool = False, **kwargs):
    """`typer.Option` with a role (see the module): the contract checks its value before the command runs, and the
    contract test feeds it wrong values of that kind. `stdout`: an OUTPUT that may be `-` (standard output)."""
    kwargs.setdefault("metavar", METAVARS.get(role))
    if role is not None:
        kwargs.setdefault("readable", False)  # `check` reads it and says why, in one line, exit 1
    info = typer.Option(*decls, **kwargs)
    info.role, info.stdout = role, stdout
    return info


def argument(role: str | None = None, **kwargs):
    """`typer.Argument` with a role, as `option`."""
    kwargs.setdefault("metavar", METAVARS.get(role))
    if role is not None:
        kwargs.setdefault("readable", False)
    info = typer.Argument(**kwargs)
    info.role, info.stdout = role, False
    return info


WHEN = "WHEN"  # the metavar of a moment option (`when_option`)


def when_option(*decls: str, **kwargs):
    """A moment (`--since`, `--until`): a time ago (7d, 12h, 30m, 2w), a date (2026-01-31), a local time
    (2026-01-31T08:00), now or all, checked as the command line is read (exit 2), the same on every command."""
    kwargs.setdefault("metavar", WHEN)
    return typer.Option(*decls, callback=_checked_moment, **kwargs)


def _checked_moment(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    from jobaware.usage.jobs import moment

    if value is not None:
        moment(value, 0.0, param.opts[0])
    return value


def moved(old: str, new: str, meaning: str):
    """A hidden option `old` that a command no longer takes, because it meant something else elsewhere: given, it is a
    one-line usage error naming `new` (what it meant here: `meaning`), never a silent alias."""
    elsewhere = f"; {old} is only {MEANINGS[old]}" if old in MEANINGS else ""

    def refuse(value):
        if value is not None:
            raise UsageError(f"{old} is now {new} ({meaning}){elsewhere}")
        return value

    info = typer.Option(old, hidden=True, callback=refuse, help=f"moved to {new}")
    info.moved_to = new
    return info


MEANINGS = {"--host": "the address a server binds (jobaware serve)", "--version": "jobaware's own version (jobaware "
            "--version)", "--cluster": "a Slurm cluster's name"}  # what an option moved away from a command means


def moved_to(param) -> str | None:
    """The new spelling of a hidden option left to name it (`moved`), else None."""
    return getattr(getattr(getattr(param, "type_descriptor", None), "parameter_info", None), "moved_to", None)


def role_of(param) -> str | None:
    """The role a click parameter was declared with (None: a plain value)."""
    return getattr(getattr(getattr(param, "type_descriptor", None), "parameter_info", None), "role", None)


def stdout_allowed(param) -> bool:
    return getattr(param.type_descriptor.parameter_info, "stdout", False)


def given(option_values: list[str] | None, positional: list[str] | None, name: str = "--input") -> list[str]:
    """The values of an option and of its old positional spelling (kept hidden, with a notice), at least one."""
    values = [*(option_values or []), *(positional or [])]
    if not values:
        raise UsageError(f"missing option '{name}'")
    if positional:
        console.notice(f"give what is read with {name}; as an argument it goes in the next release")
    return values


# ---------------------------------------------------------------- checks by role
def check_source(value: str, single: bool = False) -> None:
    """One path to read checked alone (a FILE; `single`: a file, never a folder or a glob): there, and every file it
    names readable (see `check_sources`)."""
    _, problems = _readable(str(value), single)
    if problems:
        raise problems[0]


def check_sources(values: list[str]) -> None:
    """The paths one SOURCE parameter names (files, folders, globs): each must be there (a missing path, a pattern
    matching no file, an empty or unlistable folder are refused); each file must be readable, text unless its format
    is binary, and not one huge line, but the rule 'reading nothing is not success' holds for them together: refused,
    with the first file's reason, only when none of them can be read. The others the command reads, and it says what
    became of each. URIs are left to their readers."""
    readable, problems = 0, []
    for value in values:
        good, bad = _readable(str(value), single=False)
        readable, problems = readable + good, problems + bad
    if problems and not readable:
        raise problems[0]


def check_log(value: str) -> None:
    """A log a daemon follows: its folder there; the log itself may not be written yet (missing or empty: the daemon
    waits for it); when there, a file of text."""
    path = Path(str(value))
    if not path.parent.is_dir():
        raise InputError(f"{value}: no such folder ({path.parent}); the log's folder must be there")
    if path.is_dir():
        raise InputError(f"{value}: is a folder; give the log file")
    if path.exists():
        try:
            with open(path, "rb") as handle:
                head = handle.read(HEAD)
        except OSError as exc:
            raise InputError(f"{value}: cannot read ({exc.strerror})") from None
        _check_text(head, str(value))


def _readable(text: str, single: bool) -> tuple[int, list[InputError]]:
    """How many of the files `text` names can be read, and the problems of the others; a path that names nothing
    there raises."""
    if text.startswith(REMOTE) or (not single and text == "-"):
        return 1, []
    path = Path(text)
    if not path.exists() and not path.is_symlink() and not single and any(c in text for c in "*?["):
        import glob

        matches = sorted(glob.glob(text, recursive=True))
        if not matches:
            raise InputError(f"{text}: the pattern matches no file")
        found = [_readable(match, single=False) for match in matches]
        return sum(good for good, _ in found), [problem for _, bad in found for problem in bad]
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{text}: no such file or folder") from None
    except OSError as exc:
        raise InputError(f"{text}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        if single:
            raise InputError(f"{text}: is a folder; give a file")
        _check_folder(path, text)
    elif stat.S_ISREG(mode):
        try:
            _check_file(path, text)
        except InputError as problem:
            return 0, [problem]
    return 1, []


def _check_folder(path: Path, text: str) -> None:
    try:
        with os.scandir(path) as entries:
            if not any(not entry.name.startswith(".") for entry in entries):
                raise InputError(f"{text}: an empty folder")
    except PermissionError:
        raise InputError(f"{text}: permission denied (cannot list the folder)") from None


def _check_file(path: Path, text: str) -> None:
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEAD)
            if not head:
                raise InputError(f"{text}: empty file")
            if path.name.lower().endswith(BINARY_SUFFIXES):
                return
            _check_text(head, text)
            if not path.name.lower().endswith(WHOLE_SUFFIXES) and b"\n" not in head:
                head += handle.read(LINE - len(head) + 1)
                if len(head) > LINE and b"\n" not in head:
                    raise InputError(f"{text}:1: a line longer than {LINE:,} bytes; not a line-based text file")
    except PermissionError:
        raise InputError(f"{text}: permission denied (cannot read it)") from None
    except IsADirectoryError:
        raise InputError(f"{text}: is a folder; give a file") from None
    except OSError as exc:
        raise InputError(f"{text}: cannot read ({exc.strerror})") from None


def _check_text(head: bytes, text: str) -> None:
    if reason := binary_reason(head):
        raise InputError(f"{text}: {reason}")


def check_output(value: str, overwrite: bool, stdout: bool, name: str) -> None:
    """A file to write whole: `-` only where standard output is allowed; never a folder or a symbolic link; an existing
    file only with --overwrite; its folder creatable (no file in the way)."""
    text = str(value)
    if text == "-":
        if not stdout:
            raise UsageError(f"{name}: this command writes files; give a path, not -")
        return
    path = Path(text)
    if path.is_symlink():
        raise InputError(f"{text}: a symbolic link is there; it is never followed nor replaced")
    if path.is_dir():
        raise InputError(f"{text}: a folder is there; give a new path (a folder is never replaced)")
    if path.exists():
        if not overwrite:
            raise InputError(f"{text}: exists; give --overwrite to replace it")
        if not path.is_file():
            raise InputError(f"{text}: not a regular file; it is never replaced")
    _check_parents(path, text)


def check_folder(value: str, name: str) -> None:
    """A folder to write into: not a file; its parents creatable."""
    path = Path(str(value))
    if path.exists() and not path.is_dir():
        raise InputError(f"{value}: is a file; give a folder")
    _check_parents(path, str(value))


def check_append(value: str, name: str) -> None:
    """A file to append to (created when missing): not a folder; its parents creatable."""
    path = Path(str(value))
    if path.is_dir():
        raise InputError(f"{value}: is a folder; give a file")
    if path.exists() and not path.is_file():
        raise InputError(f"{value}: not a regular file")
    _check_parents(path, str(value))


def _check_parents(path: Path, text: str) -> None:
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{text}: {parent} is a file, not a folder")
            return


def check_store(value: str, name: str) -> None:
    """An existing job store: a URI (its scheme checked where it is opened), or a local store."""
    from jobaware.store import is_store

    text = str(value)
    if "://" in text or is_store(text):
        return
    raise InputError(f"{text}: not a job store ({'no such folder' if not Path(text).exists() else 'no store in it'})")


def check_service(value: str, name: str) -> None:
    text = str(value)
    for url in [text.partition("=")[2] if "=" in text.split("://")[0] else text]:
        if url and not url.startswith(("http://", "https://")):
            raise UsageError(f"{name}: expected an http:// or https:// URL, got {console.one_line(repr(url), 80)}")


def check(params: list, values: dict) -> None:
    """Every value of a command's parameters checked by its role: usage first, then inputs, then outputs."""
    overwrite = bool(values.get("overwrite"))
    by_role: dict[str, list] = {}
    for param in params:
        if (role := role_of(param)) is not None and values.get(param.name) not in (None, "", [], ()):
            given_values = values[param.name]
            for value in given_values if isinstance(given_values, list | tuple) else [given_values]:
                by_role.setdefault(role, []).append((param, value))
    name = lambda param: param.opts[0] if param.opts else param.name.upper()  # noqa: E731
    for param, value in by_role.get(SERVICE, []):
        check_service(value, name(param))
    check_sources([value for _, value in by_role.get(SOURCE, [])])  # what the command reads, together
    for _, value in by_role.get(FILE, []):
        check_source(value, single=True)
    for _, value in by_role.get(LOG, []):
        check_log(value)
    for param, value in by_role.get(STORE, []):
        check_store(value, name(param))
    for param, value in by_role.get(OUTPUT, []):
        check_output(value, overwrite, stdout_allowed(param), name(param))
    for param, value in by_role.get(FOLDER, []):
        check_folder(value, name(param))
    for param, value in by_role.get(APPEND, []):
        check_append(value, name(param))


# ---------------------------------------------------------------- the command tree
def commands(group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    """Every leaf command of the tree (hidden ones included) with its path."""
    for name, sub in getattr(group, "commands", {}).items():
        if hasattr(sub, "commands"):
            yield from commands(sub, (*path, name))
        else:
            yield (*path, name), sub


def _checked(callback: Callable, params: list) -> Callable:
    def run(*args, **kwargs):
        check(params, kwargs)
        return callback(*args, **kwargs)

    return run


def _spelling(params: list) -> Callable[[str], str]:
    """Old option names read as the new ones, with a notice (once)."""
    names = {opt.lstrip("-") for param in params for opt in (*param.opts, *param.secondary_opts)}
    aliases = {old: new for old, new in OLD_SPELLINGS.items() if new in names and old not in names}
    told: set[str] = set()

    def normalize(token: str) -> str:
        new = aliases.get(token)
        if new is None:
            return token
        if token not in told:
            told.add(token)
            console.notice(f"--{token} is now --{new}; the old spelling goes in the next release")
        return new

    return normalize


def installed(app: typer.Typer):
    """The click command of a Typer app, with the contract installed (the other entry points use it too:
    `python -m jobaware.adapters.htcondor|slurm`)."""
    root = typer.main.get_command(app)
    install(root)
    return root


def install(root) -> None:
    """Wrap every command of the click tree `root` with the role checks and the old spellings; every help made whole
    (`whole`)."""
    for _, command in commands(root):
        command.callback = _checked(command.callback, command.params)
        command.context_settings = {**command.context_settings, "token_normalize_func": _spelling(command.params)}
    for node in _nodes(root):
        node.help = whole(node.help)


def _nodes(group) -> Iterator:
    """`group` and every group and command below it."""
    yield group
    for sub in getattr(group, "commands", {}).values():
        yield from _nodes(sub)


def whole(text: str | None) -> str | None:
    """A docstring as help: each paragraph on one line, so that it is wrapped to the terminal and never breaks where
    the source line did (typer keeps a paragraph's line breaks); a paragraph that starts with `\b` is kept as it is."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(part if part.startswith("\b") else " ".join(part.split()) for part in paragraphs)


_typed = TyperOption.display_type_rich


def _display_type(self, ctx):
    """A flag takes no value: show none (typer shows `<bool>`)."""
    return None if self.is_flag else _typed(self, ctx)


TyperOption.display_type_rich = _display_type


# ---------------------------------------------------------------- running
def run(root, args: list[str], prog_name: str = "jobaware") -> int:
    """Run the click command `root` on `args`: the exit code by the kind of mistake, and one error line (or a JSON
    object on stdout with `--json`). JOBAWARE_DEBUG=1 shows a traceback instead of the one line."""
    as_json = "--json" in args[: args.index("--")] if "--" in args else "--json" in args
    stdout = sys.stdout = _Stdout(sys.stdout)
    try:
        return _run(root, args, prog_name, as_json, stdout)
    finally:
        sys.stdout = stdout.stream


def _run(root, args: list[str], prog_name: str, as_json: bool, stdout: _Stdout) -> int:
    from typer._click import exceptions as click_errors

    try:
        code = root.main(args, prog_name=prog_name, standalone_mode=False)
        stdout.flush()  # here, where a full disk or a closed pipe is one line: not at exit, as a traceback
        return code if isinstance(code, int) else 0
    except typer.Exit as exc:
        stdout.flush()
        return exc.exit_code
    except click_errors.NoArgsIsHelpError as exc:
        exc.show()
        return exc.exit_code
    except click_errors.UsageError as exc:
        return _fail(_usage_line(exc), 2, as_json, stdout)
    except click_errors.ClickException as exc:
        return _fail(exc.format_message(), exc.exit_code, as_json, stdout)
    except UsageError as exc:
        return _fail(str(exc), 2, as_json, stdout)
    except JobawareError as exc:  # ContractError included: its message is the readable report
        return _fail(str(exc), 1, as_json, stdout, whole=True)
    except (typer.Abort, KeyboardInterrupt):
        return 130
    except OSError as exc:  # a disk full, a pipe closed, a file gone meanwhile: the file and the reason
        if os.environ.get("JOBAWARE_DEBUG"):
            raise
        if stdout.lost:  # standard output itself: said on stderr, where it can be read
            console.error(f"standard output: {exc.strerror or exc}")
            return 1
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", 1, as_json, stdout)
    except Exception as exc:  # noqa: BLE001 - the last line of defence for a one-line error
        if os.environ.get("JOBAWARE_DEBUG"):
            raise
        if isinstance(exc, ModuleNotFoundError):  # a package of an extra this install lacks: the extra, in one line
            from jobaware import extras

            if (extra := extras.for_module(exc.name)) is not None:
                return _fail(extras.message([extra]), 1, as_json, stdout)
        return _fail(f"unexpected {type(exc).__name__}: {exc} (set JOBAWARE_DEBUG=1 for the traceback)", 1, as_json,
                     stdout)


class _Stdout:
    """Standard output, remembering whether it refused a write (a full disk, a closed pipe): then it is pointed at
    /dev/null, so that what is left in its buffer does not fail again, with a traceback, when Python exits."""

    def __init__(self, stream):
        self.stream, self.lost = stream, False

    def write(self, text: str) -> int:
        return self._guarded(self.stream.write, text)

    def flush(self) -> None:
        self._guarded(self.stream.flush)

    def _guarded(self, call, *args):
        try:
            return call(*args)
        except OSError:
            self.lost = True
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.stream.fileno())
                os.close(devnull)
            raise

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _usage_line(exc) -> str:
    """click's message on one line, the command's help named."""
    text = " ".join(exc.format_message().split()).replace("Value error, ", "").replace("Assertion failed, ", "")
    where = f" (see `{exc.ctx.command_path} --help`)" if getattr(exc, "ctx", None) is not None else ""
    return text + where


def _fail(message: str, code: int, as_json: bool, stdout: _Stdout, whole: bool = False) -> int:
    """The error: one JSON object on stdout with --json (on stderr, one line, where stdout refuses it); else one line
    on stderr (a contract report, whose lines are the point, keeps them); a URI's password never shows."""
    message = console.redacted(message)
    if as_json and not stdout.lost:
        try:
            print(json.dumps({"error": console.escaped(message), "exit_code": code}), flush=True)
            return code
        except OSError as exc:
            message = f"{message} (standard output: {exc.strerror or exc})"
    if whole and "\n" in message:
        lines = message.splitlines()
        console.error(lines[0])
        for line in lines[1:]:
            console.err.print(console.one_line(line), soft_wrap=True)
    else:
        console.error(message)
    return code
