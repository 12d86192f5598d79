"""Render `job_submit.lua` and `cli_filter.lua` with the verdict cache's path and the site's choices filled in, and
build the compiled cli_filter (`cli_filter_jobaware.so`) for the Slurm that runs here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path
from typing import Literal

from jobaware.errors import InputError, JobawareError, shown

NAMES = ("job_submit.lua", "cli_filter.lua")
COMPILED = "cli_filter_jobaware.so"  # Slurm's loader finds CliFilterPlugins=jobaware under this name in a PluginDir
DEFAULT_CACHE = "/var/spool/jobaware/verdicts/verdicts.tsv"  # a folder of its own: the adapter alone writes it
DEFAULT_CONF = "/etc/slurm/slurm.conf"  # where Slurm reads slurm.conf when $SLURM_CONF is unset
# where Slurm's packages put their plugins when slurm.conf names no PluginDir (Debian, RHEL, a source build)
INCLUDE = re.compile(r"^(\s*include\s+)([^/\s#])", re.I | re.M)  # a relative Include in slurm.conf
DEFAULT_PLUGIN_DIRS = ["/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib64/slurm", "/usr/local/lib/slurm"]


def _lua_string(text: str) -> str:
    if any(c in text for c in '"\\\n\r\0'):
        raise JobawareError(f"cache path {text!r}: quotes, backslashes and line breaks are not allowed")
    return text


def render(cache: str = DEFAULT_CACHE, field: Literal["comment", "admin_comment"] = "comment",
           stale_after: int = 3600, timing_level: Literal["info", "debug"] = "debug") -> dict[str, str]:
    """The text of both plugins. `stale_after`: seconds after which a cache is ignored (the stricter of this
    and the file's own limit wins). `timing_level`: the slurmctld log level of the hook's per-call line."""
    if field not in ("comment", "admin_comment"):
        raise JobawareError(f"--field {field!r}: expected comment or admin_comment")
    if stale_after <= 0:
        raise JobawareError(f"--stale-after {stale_after}: expected a positive number of seconds")
    if not os.path.isabs(cache):
        raise JobawareError(f"--cache {cache!r}: expected an absolute path (slurmctld does not run in your folder)")
    lua = resources.files("jobaware.adapters.slurm") / "lua"
    code = (lua / "cache.lua").read_text().replace("@CACHE_PATH@", _lua_string(cache)).replace(
        "@STALE_AFTER@", str(int(stale_after)))
    values = {"@FIELD@": field, "@TIMING_LEVEL@": timing_level}
    rendered = {}
    for name in NAMES:
        text = (lua / name).read_text().replace("--@CACHE_CODE@", code)
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        rendered[name] = text
    return rendered


def write_plugins(out: Path, force: bool = False, plugin_dir: Path | None = None, **options) -> list[Path]:
    """Write both plugins into `out` atomically (mode 0644), and with `plugin_dir` build the compiled cli_filter
    into it (see `build_cli_filter`); existing files are kept unless `force`."""
    rendered = render(**options)
    targets = [out / name for name in NAMES]
    existing = [str(t) for t in [*targets, *([plugin_dir / COMPILED] if plugin_dir else [])] if t.exists()]
    if existing and not force:
        raise JobawareError(f"{', '.join(existing)} already exist; give --overwrite to replace them")
    built = [build_cli_filter(plugin_dir, options.get("cache", DEFAULT_CACHE), options.get("stale_after", 3600))] \
        if plugin_dir else []
    out.mkdir(parents=True, exist_ok=True)
    for target in targets:
        _atomically(target, lambda tmp, name=target.name: Path(tmp).write_text(rendered[name]))
    return targets + built


def _atomically(target: Path, write) -> None:
    """`write(tmp)` to a temporary file beside `target`, made mode 0644 and renamed over it (a process that has the
    old file open or mapped keeps it)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def slurm_version(conf: Path | None = None) -> tuple[int, int, int]:
    """The version of the Slurm installed here, from `scontrol --version` ("slurm-wlm 22.05.8"): the same package
    and library as sbatch, but unlike `sbatch --version` it works while sbatch refuses a filter built for another
    version (after an upgrade, when the filter must be rebuilt). It reads slurm.conf first: `conf`, else
    $SLURM_CONF or its default."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise JobawareError("scontrol not found on PATH: the compiled cli_filter is built for the Slurm installed "
                            "here (slurm-client)")
    try:
        done = subprocess.run([scontrol, "--version"], capture_output=True, text=True, timeout=30,
                              env={**os.environ, "SLURM_CONF": str(conf)} if conf else None)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JobawareError(f"{scontrol} --version: {exc}") from None
    found = re.search(r"\bslurm(?:-wlm)? (\d+)\.(\d+)\.(\d+)", done.stdout)
    if done.returncode != 0 or found is None:
        said = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        raise JobawareError(f"{scontrol} --version did not say a Slurm version (it needs slurm.conf: set SLURM_CONF): "
                            f"{said}")
    major, minor, micro = map(int, found.groups())
    return major, minor, micro


def build_cli_filter(plugin_dir: Path, cache: str = DEFAULT_CACHE, stale_after: int = 3600) -> Path:
    """Compile `cli_filter_jobaware.so` (adapters/slurm/c/) with the system C compiler ($CC, else cc or gcc) for
    the Slurm version `scontrol --version` names, the cache path and stale-after baked in, and put it into
    `plugin_dir` atomically, once this host's sbatch has loaded it (see `_try_in_sbatch`). Slurm's loader refuses a
    plugin built for another version: rebuild after an upgrade."""
    render(cache=cache, stale_after=stale_after)  # the same checks of the options as for the Lua plugins
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler or not shutil.which(compiler):
        raise JobawareError(f"no C compiler found ({'$CC=' + compiler if compiler else 'cc, gcc'}): install one "
                            "(apt-get install gcc) to build the compiled cli_filter, or use cli_filter.lua")
    major, minor, micro = slurm_version()
    if not plugin_dir.is_dir():
        raise JobawareError(f"--plugin-dir {plugin_dir}: not a folder (give one of slurm.conf's PluginDir folders)")
    if shutil.which("sbatch") is None:
        raise JobawareError(f"sbatch not found on PATH: {COMPILED} is installed only once this host's sbatch has "
                            "loaded it (slurm-client)")
    source = resources.files("jobaware.adapters.slurm") / "c" / "cli_filter_jobaware.c"
    target = plugin_dir / COMPILED

    def compile_into(tmp: str) -> None:
        with resources.as_file(source) as path:
            done = subprocess.run(
                [compiler, "-std=gnu11", "-shared", "-fPIC", "-O2", "-Wall", "-Wextra",
                 f'-DJOBAWARE_CACHE_PATH="{cache}"', f"-DJOBAWARE_STALE_AFTER={int(stale_after)}",
                 f"-DJOBAWARE_SLURM_VERSION={(major << 16) | (minor << 8) | micro:#x}", "-o", tmp, str(path), "-lm"],
                capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            said = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[-300:])
            raise JobawareError(f"{compiler} could not build {COMPILED}: {said}")
        _try_in_sbatch(Path(tmp), target)

    _atomically(target, compile_into)
    return target


def _try_in_sbatch(built: Path, target: Path) -> None:
    """Start this host's `sbatch --version` (as the doctor does) on a copy of the site's slurm.conf ($SLURM_CONF, else
    its default) that names `CliFilterPlugins=jobaware` and puts a folder holding only `built` first in PluginDir;
    raise, naming sbatch's first error line, if it fails: installed, the filter would fail every sbatch, salloc and
    srun (a filter built for another Slurm version, or calling a function this Slurm lacks)."""
    conf_path = Path(os.environ.get("SLURM_CONF") or DEFAULT_CONF)
    try:
        text = conf_path.read_text(errors="replace")
    except OSError as exc:
        raise JobawareError(f"{conf_path}: cannot read slurm.conf ({exc.strerror}), so the new {COMPILED} cannot be "
                            f"tried with sbatch; {target} is left as it was (set SLURM_CONF)") from None
    folders = read_slurm_conf(conf_path).get("plugindir") or ":".join(d for d in DEFAULT_PLUGIN_DIRS if Path(d).is_dir())
    text = INCLUDE.sub(lambda m: f"{m.group(1)}{conf_path.parent}/{m.group(2)}", text)  # Slurm reads them from there
    with tempfile.TemporaryDirectory(prefix="jobaware-try-") as tmp:
        (Path(tmp) / "plugins").mkdir()
        shutil.copyfile(built, Path(tmp) / "plugins" / COMPILED)
        conf = Path(tmp) / "slurm.conf"  # the last of a repeated parameter wins
        conf.write_text(f"{text}\nPluginDir={tmp}/plugins:{folders}\nCliFilterPlugins=jobaware\n")
        said = sbatch_refuses(conf)
    if said:
        said = said.replace(f"{tmp}/plugins/", "")  # the folder is gone
        raise JobawareError(f"sbatch here cannot load the new {COMPILED} ({target} kept as it was): {said}")


def read_slurm_conf(path: Path) -> dict[str, str]:
    """slurm.conf's parameters by lower-case name (the last of repeated ones; node and partition lines left out).
    A line that is neither `Name=value`, `Include FILE`, a comment nor blank is refused, naming its line: such a
    file is no slurm.conf, and every check read from it would be wrong."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise JobawareError(f"{path}: cannot read slurm.conf: {exc.strerror}") from None
    conf, held = {}, None  # held: the first line's number and the text of a line continued by a backslash
    for number, part in enumerate(text.splitlines(), 1):
        start, line = held or (number, "")
        if part.endswith("\\"):
            held = (start, line + part[:-1] + " ")
            continue
        held, line = None, (line + part).split("#", 1)[0].strip()
        name, sep, value = line.partition("=")
        if line and not sep and not line.lower().startswith("include"):
            raise InputError(f"{path}:{start}: not a slurm.conf line (Name=value or Include FILE): {shown(line)}")
        if sep and " " not in name.strip() and name.strip().lower() not in ("nodename", "partitionname"):
            conf[name.strip().lower()] = value.strip()
    return conf


def sbatch_refuses(conf_path: Path) -> str | None:
    """What `sbatch --version` says when it fails to start with slurm.conf at `conf_path` (it loads the CLI
    filters), else None. LD_BIND_NOW: a function of Slurm's that the filter needs and this Slurm lacks fails here
    rather than in the middle of a user's submission. None too where there is no sbatch to ask."""
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        return None
    try:
        done = subprocess.run([sbatch, "--version"], capture_output=True, text=True, timeout=30,
                              env={**os.environ, "SLURM_CONF": str(conf_path), "LD_BIND_NOW": "1"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{sbatch} --version: {exc}"
    if done.returncode == 0:
        return None
    return shown((done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0], 400)  # the cause
