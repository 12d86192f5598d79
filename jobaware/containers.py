"""The project image and podman: build the image (on a public Python base, or on a Debian base built from Debian's
packages where no registry can be reached), and serve podman's Docker-compatible API on a private socket.

Every podman call gets `podman/containers.conf` (runc, rlimits a root without CAP_SYS_RESOURCE may set).
`python -m jobaware.containers` is what `make image` runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from jobaware import __version__
from jobaware.errors import JobawareError

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "podman" / "containers.conf"
IMAGE = f"localhost/jobaware:{__version__}"
PUBLIC_BASE = "docker.io/library/python:3.11-slim-bookworm"
DEBIAN_BASE = "localhost/jobaware-base:bookworm"
DEBIAN_PACKAGES = "python3,python3-venv,python3-pip,ca-certificates"
USER_ID = 10001  # the image's user (see Dockerfile)
# what the Dockerfile copies from the project: the image is stale when any of it changed since the build
SOURCES = ("constraints.txt", "pyproject.toml", "Dockerfile", "jobaware", "components", "pipelines",
           "serving", "adapters", "data_contracts", "data/real/scripts")
SOURCE_LABEL = "org.jobaware.source-digest"


def podman_env() -> dict:
    return {**os.environ, "CONTAINERS_CONF": str(CONF)}


def podman(*args: str, check: bool = True, capture: bool = True) -> subprocess.CompletedProcess:
    if not shutil.which("podman"):
        raise JobawareError("podman is not installed (Debian: apt-get install podman runc)")
    result = subprocess.run(["podman", *args], env=podman_env(), text=True,
                            capture_output=capture, stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        raise JobawareError(f"podman {args[0]} failed: {(result.stderr or '').strip().splitlines()[-1:]}")
    return result


def image_exists(name: str) -> bool:
    return podman("image", "exists", name, check=False).returncode == 0


def source_digest(root: Path = ROOT) -> str:
    """SHA-256 over the paths and contents of the files the image is built from (caches left out)."""
    digest = hashlib.sha256()
    for name in SOURCES:
        top = root / name
        for path in sorted([top] if top.is_file() else top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = base / "jobaware" / "image"
    path.mkdir(parents=True, exist_ok=True)
    return path


def debian_base(log) -> str:
    """The Debian bookworm base (python3 3.11, venv, pip, CA certificates) from Debian's packages, built once:
    the root file system tar is kept in the cache folder and imported when the image is missing."""
    if image_exists(DEBIAN_BASE):
        return DEBIAN_BASE
    tar = cache_dir() / "debian-bookworm-python3.tar"
    if not tar.is_file():
        if not shutil.which("mmdebstrap"):
            raise JobawareError("no registry reachable and mmdebstrap is not installed (apt-get install mmdebstrap)")
        log(f"building the Debian base with mmdebstrap into {tar}")
        partial = tar.with_name("partial-" + tar.name)
        subprocess.run(["mmdebstrap", "--variant=minbase", f"--include={DEBIAN_PACKAGES}", "--format=tar",
                        "bookworm", str(partial)], check=True, stdout=subprocess.DEVNULL)
        partial.rename(tar)
    podman("import", "--change", "CMD=/usr/bin/python3", str(tar), DEBIAN_BASE)
    return DEBIAN_BASE


def base_image(log) -> str:
    """The public Python base where a registry answers, else the Debian base."""
    if image_exists(PUBLIC_BASE) or podman("pull", "-q", PUBLIC_BASE, check=False).returncode == 0:
        return PUBLIC_BASE
    log(f"{PUBLIC_BASE} cannot be pulled; using a Debian base built from Debian's packages")
    return debian_base(log)


def pip_settings(workdir: Path) -> tuple[Path, list[Path]]:
    """This machine's effective pip settings (its configuration files and PIP_* variables, merged by pip itself)
    as one pip.conf in `workdir`, and the local paths they name (constraint files, find-links folders, local
    indexes with the `files/` beside `simple/`, the certificate bundle) that a build must see."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=True).stdout
    sections: dict[str, dict[str, str]] = {}
    paths: set[Path] = set()
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        value = value.strip().strip("'\"")
        section = "global" if section == ":env:" else section
        sections.setdefault(section, {})[name] = value
        for token in value.split():
            path = Path(token.removeprefix("file://"))
            if token.startswith(("/", "file://")) and path.exists():
                paths.add(path.parent if path.name == "simple" and path.is_dir() else path)
    conf = workdir / "pip.conf"
    conf.write_text("".join(f"[{section}]\n" + "".join(f"{name} = {value}\n" for name, value in values.items())
                            for section, values in sections.items()))
    if Path("/etc/ssl/certs").is_dir():
        paths.add(Path("/etc/ssl/certs"))
    return conf, sorted(paths)


def torch_find_links() -> str:
    """A local folder holding the CPU torch wheel, when pip's find-links names one; else PyTorch's CPU index."""
    for folder in os.environ.get("PIP_FIND_LINKS", "").split():
        if any(Path(folder).glob("torch-*+cpu-*.whl")):
            return folder
    return "https://download.pytorch.org/whl/cpu/torch/"


def build(base: str = "", tag: str = IMAGE, log=print) -> int:
    """Build the project image from the Dockerfile; return its size in bytes."""
    base = base or base_image(log)
    with tempfile.TemporaryDirectory(prefix="jobaware-build-") as workdir:
        conf, paths = pip_settings(Path(workdir))
        mounts = [f"--volume={conf}:/etc/pip.conf:ro"]
        mounts += [f"--volume={path}:{path}:ro" for path in paths if path != Path("/etc/pip.conf")]
        log(f"podman build {tag} on {base}")
        result = podman("build", "--format=docker", "--network=host", "--pull=never", f"--tag={tag}",
                        f"--label={SOURCE_LABEL}={source_digest()}",
                        f"--build-arg=BASE_IMAGE={base}", f"--build-arg=TORCH_FIND_LINKS={torch_find_links()}",
                        *mounts, str(ROOT), check=False, capture=False)
        if result.returncode != 0:
            raise JobawareError(f"podman build of {tag} failed (exit {result.returncode}); its output is above")
    return image_size(tag)


def image_size(tag: str = IMAGE) -> int:
    return int(podman("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())


def writable_by_image_user(folders: list[Path]) -> str:
    """The user a step's container runs as, with `folders` (mounted read-write) writable by it: for root, the
    image's own uid 10001, given the folders (root keeps its access); for anyone else, their own uid and gid."""
    if os.getuid() != 0:
        return f"{os.getuid()}:{os.getgid()}"
    for folder in folders:
        for path in [folder, *folder.rglob("*")]:
            os.lchown(path, USER_ID, USER_ID)
    return f"{USER_ID}:{USER_ID}"


@contextlib.contextmanager
def docker_api(socket_dir: Path, seconds: float = 30.0) -> Iterator[str]:
    """`podman system service` on a private unix socket in `socket_dir`; yields its `unix://` URL; stops it."""
    socket = Path(socket_dir) / "podman.sock"
    url = f"unix://{socket}"
    if not shutil.which("podman"):
        raise JobawareError("podman is not installed (Debian: apt-get install podman runc)")
    service = subprocess.Popen(["podman", "system", "service", "--time=0", url], env=podman_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + seconds
        while not socket.exists():
            if service.poll() is not None or time.monotonic() > deadline:
                raise JobawareError(f"podman system service did not open {socket}")
            time.sleep(0.1)
        yield url
    finally:
        service.terminate()
        try:
            service.wait(10)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()


def main() -> None:
    started = time.monotonic()
    try:
        size = build(os.environ.get("BASE_IMAGE", ""), os.environ.get("JOBAWARE_IMAGE", IMAGE))
    except (JobawareError, subprocess.CalledProcessError) as exc:
        sys.exit(f"error: {exc}")
    print(f"image {os.environ.get('JOBAWARE_IMAGE', IMAGE)}: {size / 1e6:,.0f} MB, built in "
          f"{time.monotonic() - started:,.0f} s")


if __name__ == "__main__":
    main()
