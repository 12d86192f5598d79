"""The logs to read: `Source` (a name, a way to open it, its modification time) and `resolve_sources`."""

from __future__ import annotations

import io
import time as _time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from jobaware.errors import InputError
from jobaware.sources import files


@dataclass
class Source:
    """One log to read: its name in reports, how to open it, and when it was last written (epoch seconds)."""

    label: str
    open: Callable[[], BinaryIO]
    written: float

    @classmethod
    def file(cls, path: Path) -> Source:
        return cls(str(path), lambda: open(path, "rb"), path.stat().st_mtime)

    @classmethod
    def text(cls, data: bytes, label: str) -> Source:
        return cls(label, lambda: io.BytesIO(data), _time.time())


NOT_LOGS = (".parquet", ".json", ".jsonl", ".md", ".yaml", ".yml", ".csv")  # skipped in folders (truth, notes, manifests)
NOT_LOG_NAMES = ("notice", "license", "licence", "readme", "provenance")


def _is_log(path: Path) -> bool:
    return path.suffix.lower() not in NOT_LOGS and path.stem.lower() not in NOT_LOG_NAMES


def resolve_sources(sources: list[str] | str) -> list[Path]:
    """Files named, matched by globs, or inside folders (not recursively; truth files and notes left out), by
    the shared expander (`jobaware.sources.files`); each once, symbolic links resolved."""
    if isinstance(sources, str | Path):
        sources = [str(sources)]
    if not sources:
        raise InputError("no event log given")
    found = files([str(source) for source in sources], keep=_is_log)
    for name in found:
        if not Path(name).is_file():  # an object-store or job-store URI: not an event log on this machine
            raise InputError(f"{name}: no such file")
    return list(dict.fromkeys(Path(name).resolve() for name in found))
