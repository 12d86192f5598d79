"""Batch scripts (shell with `#SBATCH` lines): the directives, the commands they run, the Python they embed.

Rules, as Slurm and the shell apply them:
- `#SBATCH` lines count only before the first command (sbatch stops reading them there); later ones are
  counted as ignored. `#PBS`, `#BSUB` and `#$` lines name the scheduler; PBS `-l` resources are read too.
- Lines ending in a backslash continue on the next line. Commands are split at `;`, `&&`, `||`, `|` and `&`
  (a trailing `&` marks a background command); leading `VAR=value` assignments and wrappers (`time`,
  `nohup`, `exec`, `env`, `nice`, `timeout N`, `numactl ...`) are skipped.
- Launchers (`srun`, `mpirun`, `mpiexec`, `ibrun`, `aprun`, `jsrun`) are recorded with their task count and
  the program they launch is classified as well.
- Python code given with `python -c CODE`, or in a here-document fed to python (`python - <<EOF`) or written
  to a `.py` file (`cat > x.py <<EOF`), is returned for parsing as Python.
- A `while true` / `while :` / `while [ 1 ]` loop whose body has no `break`, `exit` or `return`, a
  `sleep infinity`, a foreground `tail -f`, and a foreground server (`jupyter notebook|lab`, `tensorboard`,
  `code-server`, `mlflow server|ui`, `redis-server`, `python -m http.server`, ...) never end.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import PurePosixPath

SBATCH_SHORT = {"-N": "nodes", "-n": "ntasks", "-c": "cpus-per-task", "-t": "time", "-p": "partition",
                "-J": "job-name", "-o": "output", "-e": "error", "-A": "account", "-G": "gpus",
                "-C": "constraint", "-q": "qos", "-a": "array", "-d": "dependency", "-w": "nodelist",
                "-x": "exclude", "-D": "chdir", "-M": "clusters", "-L": "licenses", "-i": "input",
                "-m": "distribution", "-b": "begin", "-F": "nodefile", "-s": "oversubscribe",
                "-k": "no-kill", "-H": "hold", "-Q": "quiet", "-v": "verbose", "-W": "wait"}
SBATCH_FLAGS = {"exclusive", "oversubscribe", "no-kill", "hold", "quiet", "verbose", "wait", "requeue",
                "no-requeue", "contiguous", "overcommit", "spread-job", "test-only", "use-min-nodes"}

CATEGORIES = {
    "python": {"python", "python2", "python3", "ipython", "pypy", "pypy3"},
    "copy": {"cp", "mv", "dd", "ln", "rm", "mkdir", "cat", "find", "du", "ls", "split", "sort", "sed", "awk",
             "grep", "head", "tail", "touch", "tee", "install", "rmdir", "chmod", "stat", "md5sum", "sha256sum"},
    "archive": {"tar", "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zip", "unzip", "zstd", "pigz", "7z"},
    "download": {"wget", "curl", "scp", "sftp", "ftp", "lftp", "git", "gsutil", "aws", "rclone", "globus",
                 "bbcp", "aria2c", "ssh", "nc", "azcopy", "gdown", "s3cmd", "irsync", "iget", "iput"},
    "hdf_netcdf": {"h5dump", "h5copy", "h5repack", "h5ls", "ncks", "ncrcat", "ncea", "nccopy", "ncdump",
                   "cdo", "ncra", "ncap2"},
    "compile": {"make", "cmake", "gcc", "g++", "gfortran", "mpicc", "mpicxx", "mpif90", "mpifort", "nvcc", "icc",
                "icpc", "ifort", "ifx", "clang", "ninja", "cargo", "go"},
    "module": {"module", "ml"},
    "setup": {"source", ".", "export", "cd", "echo", "printf", "set", "ulimit", "hostname", "date", "conda",
              "mamba", "micromamba", "spack", "unset", "pushd", "popd", "pwd", "which", "env", "nvidia-smi",
              "sleep", "wait", "true", "false", "exit", "return", "break", "continue", "shift", "read", "let",
              "local", "declare", "trap", "scontrol", "sacct", "squeue", "seff", "umask"},
    "compute_app": {"lmp", "lmp_mpi", "gmx", "gmx_mpi", "mdrun", "namd2", "namd3", "cp2k", "cp2k.popt",
                    "pw.x", "vasp", "vasp_std", "vasp_gam", "vasp_ncl", "orca", "g16", "g09", "nwchem",
                    "matlab", "rscript", "r", "julia", "java", "octave", "blastn", "blastp", "bwa", "bowtie2",
                    "samtools", "gatk", "star", "hisat2", "openfoam", "simplefoam", "icofoam", "wrf.exe",
                    "real.exe", "cesm", "abaqus", "ansys", "comsol", "stress", "stress-ng", "hpl", "xhpl"},
}
PROGRAM_CATEGORY = {program: category for category, programs in CATEGORIES.items() for program in programs}
LAUNCHERS = {"srun", "mpirun", "mpiexec", "mpiexec.hydra", "ibrun", "aprun", "jsrun", "orterun", "charmrun"}
LAUNCHER_VALUE_OPTIONS = {"-n", "-np", "-N", "-c", "-p", "-t", "-J", "-o", "-e", "-G", "-w", "-x", "-C", "-m",
                          "-d", "-D", "-r", "-a", "-g", "-host", "-hosts", "-f", "-hostfile",
                          "-machinefile", "-ppn", "-npernode", "--map-by", "--bind-to", "--rank-by", "--mca", "-mca", "--hostfile", "-genv", "-env", "--ntasks", "--nodes", "--mpi",
                          "--cpu-bind", "--gres", "--mem", "--partition", "--time", "--cpus-per-task"}
SERVERS = {"tensorboard", "code-server", "redis-server", "mongod", "postgres", "nginx", "httpd", "sshd", "rserver"}
WRAPPERS = {"time", "nohup", "exec", "env", "nice", "stdbuf", "command", "builtin", "xargs", "parallel"}
NETWORK_GIT = {"clone", "pull", "fetch", "push", "lfs"}
_DIRECTIVE = re.compile(r"^#(SBATCH|PBS|BSUB|\$)\s+(.*)$")
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_SIZE = re.compile(r"^\s*(\d{1,15}(?:\.\d{1,15})?)\s*([KMGTP]?)B?\s*$", re.IGNORECASE)
_PART = re.compile(r"^\d{1,9}$")
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", ";;", "|&", "{", "}"}


@dataclass
class Command:
    line: int
    program: str
    category: str
    args: list[str]
    launcher: str | None = None
    launcher_tasks: int | None = None
    background: bool = False


@dataclass
class ShellScript:
    scheduler: str | None = None
    directives: dict[str, str] = field(default_factory=dict)
    ignored_directives: int = 0
    commands: list[Command] = field(default_factory=list)
    loops: int = 0
    max_loop_depth: int = 0
    never_ends: str | None = None  # why the script never ends, if it never does
    embedded_python: list[tuple[int, str]] = field(default_factory=list)
    python_scripts: list[str] = field(default_factory=list)
    python_modules: list[str] = field(default_factory=list)
    unreadable_lines: int = 0
    complete: bool = True


def looks_like_batch(text: str) -> bool:
    """A shell shebang, or a scheduler directive line anywhere."""
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    if first.startswith("#!"):
        interpreter = first[2:].strip().split()
        words = [PurePosixPath(w).name for w in interpreter[:2]]
        if any(w.startswith("python") or w.startswith("pypy") for w in words):
            return False
        if any(w in ("sh", "bash", "zsh", "ksh", "csh", "tcsh", "dash") for w in words):
            return True
    return re.search(r"^#(SBATCH|PBS|BSUB)\s", text, re.MULTILINE) is not None


def size_mb(value: str) -> float | None:
    """A Slurm memory size (`4G`, `4000`, `500M`, `1T`; default unit MB) in MB."""
    match = _SIZE.match(value)
    if not match:
        return None
    unit = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}[match.group(2).upper()]
    return float(match.group(1)) * unit


def duration_minutes(value: str) -> float | None:
    """A Slurm time limit (`MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`) in minutes."""
    value = value.strip()
    if value.lower() in ("infinite", "unlimited"):
        return None
    days = 0
    if "-" in value:
        head, value = value.split("-", 1)
        if not _PART.match(head):
            return None
        days = int(head)
        parts = value.split(":")
        if not all(_PART.match(p) for p in parts) or len(parts) > 3:
            return None
        hours, minutes, seconds = ([int(p) for p in parts] + [0, 0])[:3]
        return days * 1440 + hours * 60 + minutes + seconds / 60
    parts = value.split(":")
    if not all(_PART.match(p) for p in parts) or not 1 <= len(parts) <= 3:
        return None
    numbers = [int(p) for p in parts]
    if len(numbers) == 1:
        return float(numbers[0])
    if len(numbers) == 2:
        return numbers[0] + numbers[1] / 60
    return numbers[0] * 60 + numbers[1] + numbers[2] / 60


def _split_words(text: str) -> list[str] | None:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:
        return None


def _sbatch_options(words: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            if not value and name not in SBATCH_FLAGS and i + 1 < len(words) and not words[i + 1].startswith("-"):
                value, i = words[i + 1], i + 1
            options[name.lower()] = value
        elif word.startswith("-") and len(word) >= 2:
            name = SBATCH_SHORT.get(word[:2], word[1:2])
            value = word[2:].lstrip("=")
            if not value and name not in SBATCH_FLAGS and i + 1 < len(words) and not words[i + 1].startswith("-"):
                value, i = words[i + 1], i + 1
            options[name] = value
        i += 1
    return options


def _pbs_options(words: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for i, word in enumerate(words):
        if word == "-l" and i + 1 < len(words):
            items = []
            for item in words[i + 1].split(","):
                # nodes=4:ppn=16:gpus=2 carries its sub-resources after colons
                items.extend(item.split(":") if item.startswith("nodes=") else [item])
            for item in items:
                key, _, value = item.partition("=")
                if key == "nodes":
                    options["nodes"] = value
                elif key == "ppn":
                    options["ntasks-per-node"] = value
                elif key in ("mem", "pmem", "vmem"):
                    options["mem" if key != "pmem" else "mem-per-cpu"] = value.upper().removesuffix("B")
                elif key == "walltime":
                    options["time"] = value
                elif key in ("ngpus", "gpus"):
                    options["gpus"] = value
        elif word == "-q" and i + 1 < len(words):
            options["partition"] = words[i + 1]
    return options


def _classify(words: list[str], line: int, background: bool, script: ShellScript) -> Command | None:
    i = 0
    while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]):
        i += 1
    launcher, tasks = None, None
    while i < len(words):
        program = PurePosixPath(words[i]).name
        if program in WRAPPERS:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
            continue
        if program in ("timeout", "numactl", "taskset"):
            i += 1
            while i < len(words) and (words[i].startswith("-") or re.match(r"^[\d.,:smhd-]+$", words[i])):
                i += 1
            continue
        if program in LAUNCHERS and launcher is None:
            launcher, i = program, i + 1
            while i < len(words) and words[i].startswith("-"):
                option, _, value = words[i].partition("=")
                if option in ("-n", "-np", "--ntasks") or (option.startswith("-n") and option[2:].isdigit()):
                    value = value or (option[2:] if option[2:].isdigit() else "")
                    if not value and i + 1 < len(words):
                        value = words[i + 1]
                    tasks = int(value) if _PART.match(value) else tasks
                if "=" not in words[i] and option in LAUNCHER_VALUE_OPTIONS:
                    i += 1
                i += 1
            continue
        break
    if i >= len(words):
        if launcher is None:
            return None
        return Command(line, launcher, "launcher", [], launcher, tasks, background)
    program = PurePosixPath(words[i]).name.lower()
    args = words[i + 1 :]
    category = PROGRAM_CATEGORY.get(program)
    if category is None and re.match(r"^python\d(\.\d+)?$", program):
        category = "python"
    if category is None:
        category = "program"
    if program == "rsync" or (program in ("cp", "mv") and any(re.match(r"^[\w.-]+@?[\w.-]*:[^/]", a) for a in args)):
        category = "download" if any(re.match(r"^([\w.-]+@)?[\w.-]+:|^rsync://", a) for a in args) else "copy"
    if program == "git" and not (args and args[0] in NETWORK_GIT):
        category = "setup"
    if category == "python":
        _python_invocation(args, line, script)
    return Command(line, program, category, args, launcher, tasks, background)


def _python_invocation(args: list[str], line: int, script: ShellScript) -> None:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-c" and i + 1 < len(args):
            script.embedded_python.append((line, args[i + 1]))
            return
        if arg == "-m" and i + 1 < len(args):
            script.python_modules.append(args[i + 1])
            return
        if arg.startswith("-"):
            i += 1
            continue
        script.python_scripts.append(arg)
        return


def _logical_lines(lines: list[str]) -> list[tuple[int, str]]:
    out, buffer, start = [], "", 0
    for number, line in enumerate(lines, start=1):
        if not buffer:
            start = number
        if line.rstrip().endswith("\\") and not line.lstrip().startswith("#"):
            buffer += line.rstrip()[:-1] + " "
            continue
        out.append((start, buffer + line))
        buffer = ""
    if buffer:
        out.append((start, buffer))
    return out


def parse_shell(text: str, deadline: float, max_commands: int = 20_000) -> ShellScript:
    """Read a batch script without running it."""
    script = ShellScript()
    lines = text.splitlines()
    heredoc_until: tuple[str, bool] | None = None
    heredoc_python: list[str] | None = None
    heredoc_start = 0
    seen_command = False
    open_loops: list[dict] = []
    for start, line in _logical_lines(lines):
        if time.monotonic() > deadline or len(script.commands) >= max_commands:
            script.complete = False
            break
        if heredoc_until is not None:
            word, strip_tabs = heredoc_until
            if (line.lstrip("\t") if strip_tabs else line).rstrip() == word:
                if heredoc_python is not None:
                    script.embedded_python.append((heredoc_start, "\n".join(heredoc_python) + "\n"))
                heredoc_until, heredoc_python = None, None
            elif heredoc_python is not None:
                heredoc_python.append(line)
            continue
        stripped = line.strip()
        directive = _DIRECTIVE.match(stripped)
        if directive:
            kind = {"SBATCH": "slurm", "PBS": "pbs", "BSUB": "lsf", "$": "sge"}[directive.group(1)]
            script.scheduler = script.scheduler or kind
            if seen_command:
                script.ignored_directives += 1
                continue
            words = _split_words(directive.group(2)) or directive.group(2).split()
            options = _sbatch_options(words) if kind == "slurm" else _pbs_options(words) if kind == "pbs" else {}
            script.directives.update(options)
            continue
        if not stripped or stripped.startswith("#"):
            continue
        seen_command = True
        heredoc = _HEREDOC.search(line)
        words = _split_words(line[: heredoc.start()] if heredoc else line)
        if words is None:
            script.unreadable_lines += 1
            words = line.split()
        commands = _simple_commands(words, start, open_loops, script)
        for command_words, background in commands:
            command = _classify(command_words, start, background, script)
            if command is None:
                continue
            script.commands.append(command)
            if command.program == "sleep" and command.args[:1] == ["infinity"] and not background:
                script.never_ends = script.never_ends or f"line {start}: sleep infinity"
            follows = any(a in ("-f", "-F", "--follow") for a in command.args)
            if command.program == "tail" and follows and not background:
                script.never_ends = script.never_ends or f"line {start}: tail -f in the foreground"
            server = _server(command)
            if server and not background:
                script.never_ends = script.never_ends or f"line {start}: {server} serves until stopped"
        if heredoc:
            heredoc_until = (heredoc.group(3), heredoc.group(1) == "-")
            heredoc_start = start + 1
            last = script.commands[-1] if script.commands else None
            writes_python = re.search(r">\s*\S+\.py\b", line) is not None
            if last is not None and last.line == start and (last.category == "python" or writes_python):
                heredoc_python = []
    while open_loops:
        _close_loop(open_loops, script)
    return script


_OPENERS = {"do", "then", "else", "elif", "if", "while", "until", "!", "time"}
_CLOSERS = {"done", "fi", "esac", "}", "{"}


def _server(command: Command) -> str | None:
    """A foreground program that serves until stopped (notebook, tensorboard, a web or database server)."""
    args = command.args
    if command.program == "jupyter" and args[:1] and args[0] in ("notebook", "lab", "server"):
        return f"jupyter {args[0]}"
    if command.program in SERVERS or (command.program == "mlflow" and args[:1] in (["server"], ["ui"])):
        return command.program
    if command.category == "python" and "-m" in args and args[args.index("-m") + 1 : args.index("-m") + 2] in (
            ["http.server"], ["SimpleHTTPServer"], ["jupyter"], ["notebook"]):
        return f"python -m {args[args.index('-m') + 1]}"
    return None


def _simple_commands(words: list[str], line: int, open_loops: list[dict], script: ShellScript
                     ) -> list[tuple[list[str], bool]]:
    """Split at separators; strip shell keywords; count loops; note endless `while true` loops and exits."""
    commands, current = [], []
    pieces: list[tuple[list[str], str]] = []
    for word in words:
        if word in _SEPARATORS:
            pieces.append((current, word))
            current = []
        else:
            current.append(word)
    pieces.append((current, ""))
    for piece, separator in pieces:
        while piece and piece[0] in _CLOSERS:
            if piece[0] == "done":
                _close_loop(open_loops, script)
            piece = piece[1:]
        if piece and piece[0] in ("for", "select", "case", "function"):
            if piece[0] == "for":
                _open_loop(line, False, open_loops, script)
            continue
        if piece and piece[0] in ("while", "until"):
            infinite = piece[0] == "while" and len(piece) >= 2 and (
                piece[1] in ("true", ":") or piece[1:] in (["[", "1", "]"], ["[[", "1", "]]"], ["((", "1", "))"]))
            _open_loop(line, infinite, open_loops, script)
        while piece and piece[0] in _OPENERS:
            piece = piece[1:]
        if not piece:
            continue
        if piece[0] == "break" and open_loops:
            open_loops[-1]["exits"] = True
        elif piece[0] in ("exit", "return", "exec"):
            for loop in open_loops:
                loop["exits"] = True
        commands.append((piece, separator == "&"))
    return commands


def _open_loop(line: int, infinite: bool, open_loops: list[dict], script: ShellScript) -> None:
    script.loops += 1
    open_loops.append({"line": line, "infinite": infinite, "exits": False})
    script.max_loop_depth = max(script.max_loop_depth, len(open_loops))


def _close_loop(open_loops: list[dict], script: ShellScript) -> None:
    if not open_loops:
        return
    loop = open_loops.pop()
    if loop["infinite"] and not loop["exits"]:
        script.never_ends = script.never_ends or f"line {loop['line']}: endless `while` loop with no break or exit"
