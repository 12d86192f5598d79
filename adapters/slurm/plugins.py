"""Render `job_submit.lua` and `cli_filter.lua` with the verdict cache's path and the site's choices filled in."""

from __future__ import annotations

import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Literal

from jobaware.errors import JobawareError

NAMES = ("job_submit.lua", "cli_filter.lua")
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


def write_plugins(out: Path, force: bool = False, **options) -> list[Path]:
    """Write both plugins into `out` atomically (mode 0644); existing files are kept unless `force`."""
    rendered = render(**options)
    targets = [out / name for name in NAMES]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not force:
        raise JobawareError(f"{', '.join(existing)} already exist; give --overwrite to replace them")
    out.mkdir(parents=True, exist_ok=True)
    for target in targets:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=out)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(rendered[target.name])
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return targets
