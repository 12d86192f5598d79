"""The logs to read: `Source` (a name, a way to open it, its modification time) and `resolve_sources`."""

from __future__ import annotations

import glob
import io
import time as _time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from jobaware.errors import InputError


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


NOT_LOGS = (".parquet", ".json", ".jsonl", ".md", ".yaml", ".yml")  # skipped inside folders (truth files, notes)
NOT_LOG_NAMES = ("notice", "license", "licence", "readme", "provenance")


def resolve_sources(sources: list[str] | str) -> list[Path]:
    """Files named, matched by globs, or inside folders (not recursively); each once."""
    if isinstance(sources, str | Path):
        sources = [str(sources)]
    if not sources:
        raise InputError("no event log given")
    found: list[Path] = []
    for source in sources:
        source = str(source)
        if any(ch in source for ch in "*?["):
            matches = sorted(Path(p) for p in glob.glob(source, recursive=True) if Path(p).is_file())
            if not matches:
                raise InputError(f"{source}: no file matches this pattern")
            found += matches
        elif Path(source).is_dir():
            inside = sorted(p for p in Path(source).iterdir()
                            if p.is_file() and not p.name.startswith(".") and p.suffix.lower() not in NOT_LOGS
                            and p.stem.lower() not in NOT_LOG_NAMES)
            if not inside:
                raise InputError(f"{source}: folder holds no file")
            found += inside
        elif Path(source).is_file():
            found.append(Path(source))
        else:
            raise InputError(f"{source}: no such file")
    unique: dict[Path, None] = {}
    for path in found:
        unique.setdefault(path.resolve(), None)
    return list(unique)
