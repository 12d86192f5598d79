"""Where a pipeline's data comes from: local paths, or object-store URIs read through pyarrow's filesystems."""

from __future__ import annotations

import glob
import json
from collections.abc import Callable
from pathlib import Path

from jobaware.errors import InputError

SCHEMES = ("s3://", "gs://", "gcs://", "hdfs://", "abfs://", "abfss://", "file://")
# a job store (jobaware.store: its URIs, and sqlite:PATH, folder:PATH), read by the capability's from_store
REDIS = ("redis://", "rediss://", "unix://")
STORE_SCHEMES = (*REDIS, "sqlite:", "folder:")


def parse(data: str | list[str]) -> list[str]:
    """A pipeline's `data` argument as a list: one path or URI, or a JSON list of them."""
    if isinstance(data, list):
        sources = data
    elif data.strip().startswith("["):
        try:
            sources = json.loads(data)
        except json.JSONDecodeError as exc:
            raise InputError(f"data: not a JSON list of paths ({exc.msg})") from None
    else:
        sources = [data]
    if not sources or not all(isinstance(s, str) and s.strip() for s in sources):
        raise InputError(f"data: expected one or more paths or URIs, got {data!r}")
    return sources


def encode(sources: list[str]) -> str:
    """The inverse of `parse`: one source as itself, several as a JSON list."""
    return sources[0] if len(sources) == 1 else json.dumps(sources)


def is_remote(source: str) -> bool:
    return source.startswith(SCHEMES)


def expand(source: str) -> list[str]:
    """A local path as absolute paths: a glob (`*`, `?`, `[...]`, `**`) that names no existing path becomes
    the sorted files it matches; a URI stays as it is. Raises InputError when nothing is there."""
    if is_remote(source) or source.startswith(REDIS):
        return [source]
    if source.startswith(STORE_SCHEMES):
        return [_local_store(source)]
    if Path(source).exists():
        return [str(Path(source).resolve())]
    if any(c in source for c in "*?["):
        matches = sorted(str(Path(m).resolve()) for m in glob.glob(source, recursive=True))
        if matches:
            return matches
        raise InputError(f"{source}: the pattern matches no file")
    raise InputError(f"{source}: no such file or folder")


def _local_store(uri: str) -> str:
    """A store named by sqlite:PATH or folder:PATH, its path made absolute; InputError when it holds no store."""
    from jobaware.store import is_store

    scheme = "sqlite:" if uri.startswith("sqlite:") else "folder:"
    path = uri[len(scheme):].removeprefix("//")
    absolute = f"{scheme}{Path(path).resolve()}"
    if not is_store(absolute):
        raise InputError(f"{uri}: no job store there")
    return absolute


def files(names: list[str] | str, suffixes: tuple[str, ...] = (), *, recursive: bool = False,
          keep: Callable[[Path], bool] | None = None) -> list[str]:
    """The files named by paths, globs and folders (a folder: the files inside it, with one of `suffixes` when
    given and those `keep` accepts when given, hidden ones left out; below it too with `recursive`), in order,
    each once. Raises InputError naming the source that holds no file."""
    found: list[str] = []
    for name in [names] if isinstance(names, str | Path) else names:
        for match in expand(str(name)):
            path = Path(match)
            if not path.is_dir():
                found.append(match)
                continue
            inside = sorted(p for p in (path.rglob("*") if recursive else path.iterdir())
                            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
                            and (not suffixes or p.name.lower().endswith(suffixes)) and (keep is None or keep(p)))
            if not inside:
                wanted = f" ({', '.join(suffixes)})" if suffixes else ""
                raise InputError(f"{name}: no files{wanted} in this folder")
            found += [str(p) for p in inside]
    return list(dict.fromkeys(found))


def localize(sources: list[str], workdir: Path) -> list[str]:
    """Local paths for `sources`: object-store URIs are copied into `workdir` first (files or folders)."""
    import pyarrow.fs as pafs

    local = []
    for i, source in enumerate(sources):
        if not is_remote(source):
            local.append(source)
            continue
        try:
            filesystem, path = pafs.FileSystem.from_uri(source)
            info = filesystem.get_file_info(path)
            if info.type == pafs.FileType.NotFound:
                raise InputError(f"{source}: no such object")
            target = workdir / f"source{i}" / Path(path).name
            target.parent.mkdir(parents=True, exist_ok=True)
            pafs.copy_files(path, str(target), source_filesystem=filesystem, destination_filesystem=pafs.LocalFileSystem())
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - any filesystem failure is the user's URI or access
            raise InputError(f"{source}: could not read ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from None
        local.append(str(target))
    return local
