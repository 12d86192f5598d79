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

from jobaware.errors import JobawareError

NAMES = ("job_submit.lua", "cli_filter.lua")
COMPILED = "cli_filter_jobaware.so"  # Slurm's loader finds CliFilterPlugins=jobaware under this name in a PluginDir
DEFAULT_CACHE = "/var/spool/jobaware/verdicts.tsv"


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
    lua = resources.files("adapters.slurm") / "lua"
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
    `plugin_dir` atomically. Slurm's loader refuses a plugin built for another version: rebuild after an upgrade."""
    render(cache=cache, stale_after=stale_after)  # the same checks of the options as for the Lua plugins
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler or not shutil.which(compiler):
        raise JobawareError(f"no C compiler found ({'$CC=' + compiler if compiler else 'cc, gcc'}): install one "
                            "(apt-get install gcc) to build the compiled cli_filter, or use cli_filter.lua")
    major, minor, micro = slurm_version()
    if not plugin_dir.is_dir():
        raise JobawareError(f"--plugin-dir {plugin_dir}: not a folder (give one of slurm.conf's PluginDir folders)")
    source = resources.files("adapters.slurm") / "c" / "cli_filter_jobaware.c"
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

    _atomically(target, compile_into)
    return target
