"""The command contract (README, "The command contract"), generated from the CLI itself.

Every command of the click tree (hidden aliases included; a new command is covered without editing this file) is run
against a matrix of wrong inputs built from its parameters' declared roles (`jobaware.cli_contract`) and from the
example in its `--help`: for each input (SOURCE, FILE, and a LOG read once as its example does) a missing, empty, binary, wrong-columns, truncated,
unreadable and one-10-MB-line file and a folder where a file goes; for each output an existing file and an
existing folder; a file for an output folder, a folder for an appended file, a missing and a not-a-store store, a
URL that is none; for each numeric option a value of the wrong type and values below and above its declared range;
for each choice a value not among them; each required parameter left out; an unknown option; and once per command
with `--json`, an error as JSON.

Each case must: exit 1 (bad input) or 2 (usage) as the contract says; print exactly one `error: ...` line on
stderr, at most `LINE` characters, with no control character, naming the file or the option; print nothing on
stdout (with --json: one JSON object holding the error); leave the case's folders exactly as they were (every
path, mode, size, time and small file's checksum); import none of torch, scikit-learn, MLflow, BentoML, KFP and
Great Expectations; and end within `SECONDS` (a refusal comes before any model, index or pipeline).

How it runs: a fork server that has imported `jobaware.cli` (what a `jobaware` process has before it parses its
arguments) forks one child per case; the child sets the case's folder, JOBAWARE_HOME and file descriptors, runs the
console script's own `jobaware.cli_contract.run` and reports its exit code, its time and the modules it imported.
The unreadable file has mode 000; as root (who reads anything) the child drops to user `nobody` first, so that
the kernel refuses the read as it would for any user.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import shlex
import stat
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REAL

LINE = 320  # characters of the error line, "error: " included
SECONDS = 15.0  # a refusal's time, at most (the child's own; a loaded 2-core machine included)
HEAVY = ("torch", "sklearn", "mlflow", "bentoml", "kfp", "great_expectations")
SCRIPT_SUFFIXES = (".sh", ".py", ".bash", ".slurm")  # any text is a script: the model judges it
NOBODY = 65534
LOST = 255  # the exit code multiprocessing gives a child whose end the fork server could not report
READ = ("source", "file", "log")  # the roles of what a command reads (a LOG's example reads it once: `--once`)

SAMPLES = {  # a real sample per capability, cut to make the truncated file
    "failure": REAL / "nrel" / "eagle_sample_jobs.csv",
    "hold": REAL / "condor" / "mldag_standalone" / "metl_12634379.log",
    "resource": REAL / "scripts" / "labels.csv",
    "similarity": REAL / "mistral" / "dkrz_mistral_job_codings_binary.csv",
}


# ---------------------------------------------------------------- the tree and its examples
def _tree():
    from jobaware import cli, cli_contract

    return cli.command(), cli_contract


def _commands() -> list[tuple[tuple[str, ...], object]]:
    root, contract = _tree()
    return sorted(contract.commands(root), key=lambda item: item[0])


def _hidden(path: tuple[str, ...]) -> bool:
    """Whether the command or a group above it is hidden (an old spelling)."""
    node, _ = _tree()
    for name in path:
        node = node.commands[name]
        if node.hidden:
            return True
    return False


def example(command) -> tuple[list[str], object, list[str]]:
    """The example in a command's help (`Example: jobaware <path> ARGS`): its path as typed, the command it runs (as
    the CLI resolves it: a capability's group takes a job id for its hidden `job` command) and its ARGS."""
    from typer import Context
    from typer._click.exceptions import UsageError

    root, _ = _tree()
    lines = [line.strip() for line in (command.help or "").splitlines() if line.strip().startswith("Example:")]
    assert len(lines) == 1, f"{command.name}: one `Example: jobaware ...` line in its help, found {len(lines)}"
    tokens = shlex.split(lines[0].removeprefix("Example:").strip())
    assert tokens[0] == "jobaware", lines[0]
    tokens, node, typed = tokens[1:], root, []
    while hasattr(node, "commands"):
        try:
            _, node, rest = node.resolve_command(Context(node, resilient_parsing=True), tokens)
        except UsageError:
            node = None
        if node is None:
            raise KeyError(tokens[0])
        typed += tokens[: len(tokens) - len(rest)]
        tokens = rest
    return typed, node, tokens


def example_args(command) -> list[str]:
    """The arguments of the example in a command's help, after its path."""
    return example(command)[2]


@dataclass
class Item:
    param: object
    opt: str | None  # the option spelling; None for an argument
    value: str | None  # None for a flag


def parse(command, args: list[str]) -> list[Item]:
    """The example's arguments as (parameter, spelling, value) items, in order."""
    by_opt = {opt: p for p in command.params for opt in (*p.opts, *p.secondary_opts) if p.param_type_name == "option"}
    arguments = [p for p in command.params if p.param_type_name == "argument" and not p.hidden]
    items, tokens = [], list(args)
    while tokens:
        token = tokens.pop(0)
        if token.startswith("-") and token != "-":
            param = by_opt[token]
            items.append(Item(param, token, None if param.is_flag else tokens.pop(0)))
        else:
            param = arguments[0] if arguments[0].nargs == -1 else arguments.pop(0)
            items.append(Item(param, None, token))
    return items


def argv(items: list[Item]) -> list[str]:
    out = []
    for item in items:
        out += [item.opt] if item.value is None else [item.opt, item.value] if item.opt else [item.value]
    return out


def role(param) -> str | None:
    from jobaware.cli_contract import role_of

    return role_of(param)


def spelling(param) -> str:
    return param.opts[0] if param.param_type_name == "option" else (param.metavar or param.name).strip("[]")


def numeric(param) -> bool:
    return param.type_descriptor.annotation in (int, float) and not getattr(param, "is_flag", False)


def choices(param) -> tuple:
    return tuple(str(c) for c in param.type_descriptor.choices or ())


# ---------------------------------------------------------------- the cases
@dataclass
class Case:
    command: tuple[str, ...]
    name: str
    args: list[str]
    exit: int
    names: str  # what the error line must name
    files: dict[str, bytes | None] = field(default_factory=dict)  # relative path -> content (None: a folder)
    unreadable: str | None = None
    json: bool = False
    hidden: bool = False  # an old spelling: its notice may come before the error

    @property
    def id(self) -> str:
        return f"{' '.join(self.command)}: {self.name}"


def _sample_key(path: tuple[str, ...], items: list[Item]) -> str | None:
    from jobaware import capabilities

    for item in items:
        if item.opt is None and item.value in capabilities.keys():
            return item.value
    return path[0] if path[0] in capabilities.keys() else None


def _truncated(key: str | None, name: str) -> bytes:
    if key in SAMPLES and (Path(name).suffix or ".log") == (SAMPLES[key].suffix or ".log"):
        first, second = SAMPLES[key].read_bytes().split(b"\n")[:2]
        return first + b"\n" + second[: len(second) // 2] if key != "hold" else first[: len(first) // 2]
    return {".json": b'[{"job_id": 1, "us', ".jsonl": b'{"kind": "ho'}.get(Path(name).suffix, b"alpha,beta\n1,")


def _wrong_columns(name: str) -> bytes:
    suffix = Path(name).suffix
    if suffix == ".json":
        return b'[{"alpha": 1, "beta": "\\u001b[31m:100:"}]\n'
    if suffix == ".jsonl":
        return b'{"alpha": 1}\n{"beta": ":100:"}\n'
    return b"alpha,\x1b[31mbeta,:100:,[bold]gamma\n1,2,3,4\n5,6,7,8\n"


def _store_files(name: str) -> dict[str, bytes]:
    """The files of a job store holding nothing but a checkpoint, made by the store's own code."""
    from jobaware.store import open_store

    with tempfile.TemporaryDirectory() as folder:
        with open_store(str(Path(folder) / name)) as store:
            store.put_checkpoint("contract", {"polled": 0})
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def _binary() -> bytes:
    return random.Random(36).randbytes(4096)


LONG = b"a" * (10 << 20) + b"\n"


def cases_of(path: tuple[str, ...], command) -> list[Case]:
    typed, resolved, args = example(command)
    items = parse(command, args)
    # run as a person types it: the example's path where it runs this very command (an old spelling's example
    # names the new one: its own path then)
    spelled = typed if resolved is command else list(path)
    key = _sample_key(path, items)
    given = {id(item.param) for item in items}
    visible = [p for p in command.params if not p.hidden and p.name not in ("help",)]
    found: list[Case] = []
    # every path-like token of the example becomes a file of the case folder: inputs a small text file, outputs new
    base, files = [], {}
    for item in items:
        if role(item.param) in READ:
            name = f"in/{Path(item.value).name}"
            files[name] = b"alpha,beta\n1,2\n" if role(item.param) == "file" or Path(name).suffix else b"x\n"
            base.append(Item(item.param, item.opt, name))
        elif role(item.param) in ("output", "folder", "append") and item.value != "-":
            base.append(Item(item.param, item.opt, f"new/sub/{Path(item.value).name}"))
        elif role(item.param) == "store":
            files |= _store_files("store")
            base.append(Item(item.param, item.opt, "store"))
        else:
            base.append(item)

    def case(name, items_, exit_, names, extra=None, **kw):
        args = [*spelled, *argv(items_)]
        kw.setdefault("json", "--json" in args)
        found.append(Case(path, name, args, exit_, names, {**files, **(extra or {})}, hidden=_hidden(path), **kw))

    def swapped(param, value):
        return [Item(i.param, i.opt, value) if i.param is param else i for i in base]

    for item in base:
        kind, param = role(item.param), item.param
        if kind in READ:
            name = item.value
            case("missing input", swapped(param, f"gone/{Path(name).name}"), 1, Path(name).name)
            matrix = {"empty": b"", "binary": _binary(), "10 MB line": LONG}
            if Path(name).suffix.lower() not in SCRIPT_SUFFIXES:
                matrix |= {"wrong columns": _wrong_columns(name), "truncated": _truncated(key, name)}
            for label, content in matrix.items():
                case(f"{label} input", base, 1, Path(name).name, {name: content})
            case("unreadable input", base, 1, Path(name).name, {name: b"alpha,beta\n1,2\n"}, unreadable=name)
            if kind == "file":
                case("a folder for an input file", base, 1, Path(name).name, {name: None, f"{name}/x": b"x\n"})
            else:
                case("an empty folder for the input", base, 1, Path(name).name, {name: None})
        elif kind == "output":
            case("existing output file", base, 1, Path(item.value).name, {item.value: b"precious\n"})
            case("existing output folder", base, 1, Path(item.value).name, {item.value: None,
                                                                             f"{item.value}/keep": b"precious\n"})
        elif kind == "folder":
            case("a file for the output folder", base, 1, Path(item.value).name, {item.value: b"precious\n"})
        elif kind == "append":
            case("a folder for the appended file", base, 1, Path(item.value).name,
                 {item.value: None, f"{item.value}/keep": b"precious\n"})
        elif kind == "store":
            case("missing store", swapped(param, "nostore"), 1, "nostore")
            case("a file for the store", swapped(param, "in/store.txt"), 1, "store.txt",
                 {"in/store.txt": b"not a store\n"})
        elif kind == "service":
            case("a service that is no URL", swapped(param, "localhost:9"), 2, spelling(param))
    for param in visible:
        present = id(param) in given
        items_ = base if present else [*base, Item(param, param.opts[0] if param.opts else None, "")]
        if param.param_type_name == "option" and numeric(param):
            def with_value(value, p=param, its=items_):
                return [Item(i.param, i.opt, value) if i.param is p else i for i in its]
            case(f"{spelling(param)} of the wrong type", with_value("x1"), 2, spelling(param))
            low, high = param.type_descriptor.parameter_info.min, param.type_descriptor.parameter_info.max
            assert low is not None or high is not None, f"{' '.join(path)} {spelling(param)}: declare its range"
            if low is not None:
                case(f"{spelling(param)} below its range", with_value(str(low - 1)), 2, spelling(param))
            if high is not None:
                case(f"{spelling(param)} above its range", with_value(str(high + 1)), 2, spelling(param))
        if choices(param) and (present or param.param_type_name == "option"):
            wrong = [Item(i.param, i.opt, "nonesuch") if i.param is param else i for i in items_]
            case(f"{spelling(param)} not among its choices", wrong, 2, spelling(param))
        if param.required and present:
            case(f"{spelling(param)} left out", [i for i in base if i.param is not param], 2, spelling(param))
    case("an unknown option", [*base, Item(None, "--no-such-option", None)], 2, "--no-such-option")
    inputs = [i for i in base if role(i.param) in READ]
    if inputs and any("--json" in p.opts for p in visible):
        name = inputs[0].value
        case("an error as JSON", [*base, Item(None, "--json", None)], 1, Path(name).name, {name: _binary()}, json=True)
    return found


def all_cases() -> list[Case]:
    """Every case of every command that has an example (a command without one fails the example test)."""
    found = []
    for path, command in _commands():
        try:
            example_args(command)
        except (AssertionError, KeyError, IndexError):
            continue
        found += cases_of(path, command)
    return found


# ---------------------------------------------------------------- running a case
def _snapshot(folder: Path) -> dict:
    """Every path under `folder`: its kind, mode, size and mtime, and a small file's checksum."""
    seen = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        digest = ""
        if stat.S_ISREG(info.st_mode) and info.st_size <= 1 << 16 and info.st_mode & 0o444:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        seen[str(path.relative_to(folder))] = (stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), info.st_size,
                                               info.st_mtime_ns, digest)
    return seen


def _child(args: list[str], cwd: str, home: str, report: str, drop: bool) -> None:
    """One case in a forked child: its folder, home and descriptors; `cli_contract.run`; what it imported."""
    from jobaware import cli, cli_contract

    before = set(sys.modules)
    os.chdir(cwd)
    os.environ["JOBAWARE_HOME"] = home
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    os.environ["COLUMNS"] = "200"
    sink = {name: open(Path(report).with_suffix(f".{name}"), "wb") for name in ("out", "err", "json")}
    os.dup2(sink["out"].fileno(), 1)
    os.dup2(sink["err"].fileno(), 2)
    if drop:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    started = time.monotonic()
    code = cli_contract.run(cli.command(), args)
    seconds = time.monotonic() - started
    sys.stdout.flush()
    sys.stderr.flush()
    heavy = sorted({m.split(".")[0] for m in set(sys.modules) - before} & set(HEAVY))
    sink["json"].write(json.dumps({"exit": code, "seconds": seconds, "heavy": heavy}).encode())
    sink["json"].close()
    os.rename(Path(report).with_suffix(".json"), Path(report).with_suffix(".done"))  # whole, or absent
    os._exit(0)


@pytest.fixture(scope="module")
def forks():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["jobaware.cli"])
    return context


def run_case(case: Case, forks) -> tuple[dict, str, str]:
    """Make the case's files in a fresh folder (world-traversable, for the unprivileged child), run it, and check
    that the folder is as it was."""
    top = Path(tempfile.mkdtemp(prefix="jobaware-contract-"))
    try:
        top.chmod(0o755)
        work, home, reports = top / "work", top / "home", top / "reports"
        for folder in (work, home, reports):
            folder.mkdir()
            folder.chmod(0o777 if folder == reports else 0o755)
        for name, content in sorted(case.files.items()):
            path = work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if content is None:
                path.mkdir(exist_ok=True)
            else:
                path.write_bytes(content)
        if case.unreadable:
            (work / case.unreadable).chmod(0)
        for folder in [work, *[p for p in work.rglob("*") if p.is_dir()]]:
            folder.chmod(0o755)
        before = {"work": _snapshot(work), "home": _snapshot(home)}
        drop = bool(case.unreadable) and os.geteuid() == 0
        # JOBAWARE_HOME names a folder not made yet: a refusal that makes it changes the disk
        for attempt in (1, 2):
            process = forks.Process(target=_child, args=(case.args, str(work), str(home / "jobaware"),
                                                         str(reports / "case"), drop))
            process.start()
            process.join(120)
            if (reports / "case.done").exists():
                break
            # 255: the fork server could not say how its child ended (it died; the next start makes a new one).
            # A child that never reported is run once more; any other end is the case's failure.
            assert attempt == 1 and process.exitcode == LOST, f"{case.id}: the child ended with {process.exitcode}"
            print(f"{case.id}: the fork server lost its child (exit {process.exitcode}); running it again",
                  file=sys.stderr)
        after = {"work": _snapshot(work), "home": _snapshot(home)}
        assert after == before, f"{case.id}: the disk changed: {_changes(before, after)}"
        result = json.loads((reports / "case.done").read_text())
        return result, (reports / "case.out").read_text(errors="replace"), (reports / "case.err").read_text(
            errors="replace")
    finally:
        for path in [top, *top.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)
        import shutil

        shutil.rmtree(top, ignore_errors=True)


def _changes(before: dict, after: dict) -> list[str]:
    changed = []
    for part in before:
        for name in sorted(set(before[part]) | set(after[part])):
            if before[part].get(name) != after[part].get(name):
                changed.append(f"{part}/{name}: {before[part].get(name)} -> {after[part].get(name)}")
    return changed[:10]


def check(case: Case, result: dict, out: str, err: str) -> None:
    where = f"{case.id} (jobaware {' '.join(case.args)})"
    assert result["exit"] == case.exit, f"{where}: exit {result['exit']}, expected {case.exit}; stderr {err[-600:]!r}"
    assert not result["heavy"], f"{where}: the refusal imported {result['heavy']}"
    assert result["seconds"] < SECONDS, f"{where}: the refusal took {result['seconds']:.1f} s"
    if case.json:
        answer = json.loads(out)
        assert answer["exit_code"] == case.exit and case.names in answer["error"], f"{where}: {out!r}"
        assert err == "", f"{where}: with --json, stderr should be empty: {err!r}"
        return
    assert out == "", f"{where}: a refusal printed on stdout: {out[-300:]!r}"
    lines = [line for line in err.splitlines() if not (case.hidden and line.startswith("notice: "))]
    assert len(lines) == 1 and err.endswith("\n"), f"{where}: not one line on stderr: {err[-600:]!r}"
    line = lines[0]
    assert line.startswith("error: "), f"{where}: {line[:300]!r}"
    assert len(line) <= LINE, f"{where}: {len(line):,} characters: {line[:200]!r}..."
    assert line.isprintable() and "\U0001f4af" not in line, f"{where}: raw control characters or emoji: {line!r}"
    assert case.names in line, f"{where}: the error does not name {case.names!r}: {line!r}"


# ---------------------------------------------------------------- the tests
def test_every_command_has_one_example_that_names_it_and_parses():
    """The example in each `--help` is what the matrix starts from: it must parse as the command's arguments; a
    follower's (a LOG input) reads once, as the matrix assumes (following, it waits for a log not written yet)."""
    for path, command in _commands():
        items = parse(command, example_args(command))
        assert items or not [p for p in command.params if p.required], f"{' '.join(path)}: an empty example"
        if any(role(item.param) == "log" for item in items):
            assert "--once" in example_args(command), f"{' '.join(path)}: a LOG's example reads once (--once)"


def test_what_a_command_reads_is_refused_only_when_none_of_it_can_be_read(tmp_path):
    """Reading nothing is not success, at the depth of what a command reads (issue 51): a path that is not there is
    refused, but of the files a SOURCE names the command is refused only when none can be read. A LOG (a follower's)
    may not be written yet."""
    from jobaware.cli_contract import check_log, check_source, check_sources
    from jobaware.errors import InputError

    good, empty, noise, folder = tmp_path / "good.csv", tmp_path / "empty.csv", tmp_path / "noise.csv", tmp_path / "f"
    good.write_text("job_id,state\n1,COMPLETED\n")
    empty.write_bytes(b"")
    noise.write_bytes(_binary())
    folder.mkdir()
    check_sources([str(good), str(empty), str(noise)])
    check_sources([str(tmp_path / "*.csv")])
    for values, refusal in (([empty, noise], "empty.csv: empty file"), ([str(tmp_path / "e*.csv")], "empty file"),
                            ([good, tmp_path / "gone.csv"], "gone.csv: no such file or folder"),
                            ([good, folder], "f: an empty folder"),
                            ([good, str(tmp_path / "x*.csv")], "the pattern matches no file")):
        with pytest.raises(InputError, match=refusal):
            check_sources([str(value) for value in values])
    with pytest.raises(InputError, match="empty.csv: empty file"):
        check_source(str(empty), single=True)
    check_log(str(tmp_path / "EventLog"))  # not written yet: waited for
    check_log(str(empty))
    for log, refusal in ((tmp_path / "nowhere" / "EventLog", r"no such folder"), (noise, "binary data"),
                         (folder, "is a folder")):
        with pytest.raises(InputError, match=refusal):
            check_log(str(log))


def test_every_numeric_option_states_its_range():
    for path, command in _commands():
        for param in command.params:
            if param.param_type_name == "option" and numeric(param):
                info = param.type_descriptor.parameter_info
                assert info.min is not None or info.max is not None, f"{' '.join(path)} {param.opts[0]}: no range"


def test_flags_show_no_value_in_help():
    import subprocess

    shown = subprocess.run([str(Path(sys.executable).with_name("jobaware")), "data", "validate", "--help"],
                           capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"}, check=True).stdout
    assert "--json " in shown and "--strict " in shown and "<bool>" not in shown, shown


CASES = all_cases()


@pytest.mark.timeout(600)
def test_every_command_refuses_every_wrong_input_in_one_line_touching_nothing(forks):
    """The whole matrix (see the module's docstring), two cases at a time."""
    from concurrent.futures import ThreadPoolExecutor

    seconds = {}

    def broken(case: Case) -> str | None:
        try:
            began = time.monotonic()
            result = run_case(case, forks)
            seconds[case.id] = (time.monotonic() - began, result[0]["seconds"])
            check(case, *result)
        except AssertionError as exc:
            return str(exc).splitlines()[0][:700]
        return None

    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        failures = [failure for failure in pool.map(broken, CASES) if failure]
    commands = {case.command for case in CASES}
    print(f"{len(CASES)} cases over {len(commands)} commands in {time.monotonic() - started:.0f} s; the slowest "
          "(case seconds, the command's own):")
    for name, (whole, own) in sorted(seconds.items(), key=lambda item: -item[1][0])[:15]:
        print(f"  {whole:5.1f} {own:5.1f}  {name}")
    assert not failures, f"{len(failures)} of {len(CASES)} cases broke the contract:\n" + "\n".join(failures[:60])


def _every_node():
    """Every group and command of the tree, hidden ones left out, with its path."""
    root, _ = _tree()

    def walk(node, path):
        if node.hidden:
            return
        yield path, node
        for name, sub in getattr(node, "commands", {}).items():
            yield from walk(sub, (*path, name))

    yield from walk(root, ())


@pytest.mark.parametrize("width", [80, 200])
def test_help_reads_whole_at_any_width(width, monkeypatch):
    """typer keeps a docstring's line breaks, so that help broke mid-sentence where the source line did, in a command's
    own help and in the command lists (issue 51). Every help's description (and every command's summary in its group's
    list) is wrapped by the terminal alone: a line ends early only where a paragraph does."""
    import contextlib
    import io

    root, _ = _tree()
    monkeypatch.setenv("COLUMNS", str(width))
    broken = []
    for path, _ in _every_node():
        with contextlib.redirect_stdout(io.StringIO()) as shown:
            assert root.main([*path, "--help"], prog_name="jobaware", standalone_mode=False) in (0, None), path
        lines = shown.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:")) + 1
        end = next((i for i, line in enumerate(lines) if line.startswith("╭")), len(lines))
        pairs = [(before, after) for before, after in zip(lines[start:end], lines[start + 1:end], strict=False)
                 if before.strip() and after.strip()]  # a paragraph's lines
        listed = _commands_box(lines)
        for before, after in zip(listed, listed[1:], strict=False):  # a summary's lines: the name column blank
            column = len(before) - len(before.lstrip()) + len(before.split()[0]) if before.strip() else 0
            continued = after[:column].strip() == "" and after.strip() and after[column:column + 2].strip()
            if before.strip() and continued:
                pairs.append((before, after))
        for before, after in pairs:
            if len(before.rstrip()) + 1 + len(after.split()[0]) <= width - 3:  # the next word fitted: a hard break
                broken.append(f"jobaware {' '.join(path)} --help at {width}: {before.strip()!r} / {after.strip()!r}")
    assert not broken, "\n".join(broken[:20])


def _commands_box(lines: list[str]) -> list[str]:
    """The rows of the Commands panel of a help, without the box's sides."""
    inside, rows = False, []
    for line in lines:
        if line.startswith("╭─ Commands"):
            inside = True
        elif line.startswith("╰"):
            inside = False
        elif inside and line.startswith("│"):
            rows.append(line[1:-1])
    return rows


def test_every_command_has_a_one_line_summary():
    """The first paragraph of a command's help is its summary (the command lists show it; the README's command list is
    made from it): one sentence of at most 100 characters."""
    import re

    for path, node in _every_node():
        if not path:
            continue
        summary = (node.help or "").split("\n\n")[0]
        assert summary and len(summary) <= 100, f"jobaware {' '.join(path)}: summary of {len(summary)}: {summary!r}"
        assert not re.search(r"[.;] [A-Z]", summary.rstrip(".?")), f"jobaware {' '.join(path)}: {summary!r}"


def _kind(param) -> tuple[str, str]:
    """What an option's value is: a flag, a number or text; and whether it is a URL to ask (a SERVICE)."""
    import typing

    annotation = param.type_descriptor.annotation
    values = {a for a in typing.get_args(annotation) if a is not type(None)} or {annotation}
    base = "flag" if param.is_flag else "number" if values <= {int, float} else "text"
    return base, "url" if role(param) == "service" else ""


def test_one_meaning_per_option_name():
    """An option's name means one thing on every command (issue 51 found `--since` integer days on `card` and `7d` on
    `report`, `--host` a bind address on `serve` and a KFP URL on `pipeline run`, `predict --version` a model version
    beside jobaware's `--version`, `--cluster` a Slurm cluster's name and an HTCondor job's number): every option
    spelled alike takes the same kind of value (a flag, a number, text, a URL), and `--since`/`--until` are moments in
    one form (WHEN). An old spelling moved off a command (`moved`) is a usage error naming its new one."""
    from jobaware.cli_contract import WHEN, moved_to

    kinds: dict[str, dict[tuple, list[str]]] = {}
    for path, node in _every_node():
        for param in node.params:
            if param.param_type_name != "option" or moved_to(param):
                continue
            for spelled in param.opts:
                kinds.setdefault(spelled, {}).setdefault(_kind(param), []).append(" ".join(path) or "(jobaware)")
                if spelled in ("--since", "--until"):
                    assert param.metavar == WHEN and param.callback is not None, f"{' '.join(path)} {spelled}"
    two = {name: found for name, found in kinds.items() if len(found) > 1}
    assert not two, f"options meaning two things: {two}"
    assert set(kinds["--host"]) == {("text", "")} and kinds["--host"][("text", "")] == ["serve"]
    assert "--kfp-host" in kinds and "--model-version" in kinds and len(kinds["--since"][("text", "")]) >= 4


@pytest.mark.parametrize(("args", "named"), [
    (["pipeline", "run", "failure", "--host", "http://kfp:8080"], "--host is now --kfp-host"),
    (["pipeline", "submit", "failure", "--host", "http://kfp:8080", "--input", "s3://b/j.csv"], "--host is now --kfp-host"),
    (["predict", "failure", "--input", "jobs.csv", "--output", "p.jsonl", "--version", "3"],
     "--version is now --model-version"),
    (["hold", "decide", "--input", "EventLog", "--cluster", "4242"], "--cluster is now --job"),
    (["card", "4242", "--since", "30"], "--since '30': a time ago needs its unit: 30d (days)"),
    (["report", "jobs", "--store", "store", "--since", "7"], "--since '7': a time ago needs its unit: 7d (days)"),
])
def test_an_old_meaning_is_a_usage_error_naming_the_new_spelling(args, named, tmp_path, monkeypatch, capsys):
    from jobaware import cli, cli_contract

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "300")
    assert cli_contract.run(cli.command(), args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {named}") and len(err.splitlines()) == 1, err


def test_where_the_code_lists_commands_it_lists_every_one():
    """`slurm doctor` was missing where commands were listed (issue 51): the light entry points' docstrings (their
    `--help` is generated, their docstring is what a reader of the code sees) name every command of their app, and
    the `slurm` group's summary names its doctor."""
    import re

    import jobaware.adapters.htcondor.__main__ as htcondor
    import jobaware.adapters.slurm.__main__ as slurm
    from jobaware.adapters.slurm.commands import slurm_app

    for module, app in ((slurm, slurm_app), (htcondor, htcondor.app)):
        listed = re.search(r"`python -m jobaware\.adapters\.\w+ ([\w|]+)`", module.__doc__).group(1).split("|")
        assert sorted(listed) == sorted(info.name for info in app.registered_commands if not info.hidden), module.__name__
    root, _ = _tree()
    assert "doctor" in root.commands["slurm"].help and "submit" in root.commands["pipeline"].help
