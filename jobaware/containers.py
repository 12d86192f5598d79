"""The project image and podman: build the image (on a public Python base named by digest, or on a Debian base built
from Debian's packages where no registry can be reached, labelled with what pins it), and serve podman's
Docker-compatible API on a private socket.

Every podman call gets `podman/containers.conf` (runc, rlimits a root without CAP_SYS_RESOURCE may set).
`python -m jobaware.containers` is what `make image` runs; `python -m jobaware.containers requirements`, what `make
image-requirements` runs.
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from jobaware import __version__
from jobaware.errors import JobawareError

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "podman" / "containers.conf"
IMAGE = f"localhost/jobaware:{__version__}"
# the Dockerfile's default BASE_IMAGE (tests/test_dockerfile.py holds them equal)
PUBLIC_BASE = ("docker.io/library/python:3.11-slim-bookworm"
               "@sha256:6d2502238109c929569ae99355e28890c438cb11bc88ef02cd189c173b3db07c")
DEBIAN_BASE = "localhost/jobaware-base:bookworm"
DEBIAN_SUITE = "bookworm"
DEBIAN_PACKAGES = "python3,python3-venv,python3-pip,ca-certificates"
# The Debian base has no registry digest; what pins it is the release it was built from and the packages it holds.
BASE_RELEASE_LABEL = "org.jobaware.base.debian-release"  # the suite and the date of its Release file
BASE_SNAPSHOT_LABEL = "org.jobaware.base.debian-snapshot"  # the snapshot.debian.org archive of that date
BASE_PACKAGES_LABEL = "org.jobaware.base.packages-sha256"  # SHA-256 of its sorted `package=version` lines
# what the Dockerfile copies from the project: the image is stale when any of it changed since the build
SOURCES = ("constraints.txt", "requirements-image.txt", "pyproject.toml", "DESCRIPTION.md", "LICENSE", "NOTICE",
           "Dockerfile", "jobaware")
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


def installed_packages(tar: Path) -> list[str]:
    """The `package=version` lines of the packages installed in a root file system tar (its dpkg status), sorted."""
    with tarfile.open(tar) as archive:
        member = next(m for m in archive.getmembers() if m.name.lstrip("./") == "var/lib/dpkg/status")
        status = archive.extractfile(member).read().decode()
    packages = []
    for stanza in status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace())
        if fields.get("Status", "").endswith(" installed"):
            packages.append(f"{fields['Package']}={fields['Version']}")
    return sorted(packages)


def snapshot_url(release_date: str) -> str:
    """The snapshot.debian.org archive of a Release file's date (`Sat, 10 May 2025 09:12:01 UTC`)."""
    stamp = email.utils.parsedate_to_datetime(release_date).astimezone(datetime.timezone.utc)
    return f"http://snapshot.debian.org/archive/debian/{stamp:%Y%m%dT%H%M%SZ}"


def base_labels(tar: Path, release_date: str) -> dict[str, str]:
    """What pins a Debian base built here: its release and date, the snapshot that serves it, its packages' digest."""
    packages = "".join(f"{line}\n" for line in installed_packages(tar))
    return {BASE_RELEASE_LABEL: f"{DEBIAN_SUITE} {release_date}", BASE_SNAPSHOT_LABEL: snapshot_url(release_date),
            BASE_PACKAGES_LABEL: hashlib.sha256(packages.encode()).hexdigest()}


def debian_base(log) -> str:
    """The Debian bookworm base (python3 3.11, venv, pip, CA certificates) from Debian's packages, built once:
    the root file system tar and the date of the Release file it was built from are kept in the cache folder, and
    the tar is imported, labelled with what pins it (base_labels), when the image is missing."""
    if image_exists(DEBIAN_BASE):
        return DEBIAN_BASE
    tar = cache_dir() / "debian-bookworm-python3.tar"
    dated = tar.with_suffix(".release-date")
    if not tar.is_file() or not dated.is_file():
        if not shutil.which("mmdebstrap"):
            raise JobawareError("no registry reachable and mmdebstrap is not installed (apt-get install mmdebstrap)")
        log(f"building the Debian base with mmdebstrap into {tar}")
        partial = tar.with_name("partial-" + tar.name)
        # the Release file's date, read before mmdebstrap's cleanup removes the package lists
        hook = f'sed -n "s/^Date: //p" "$1"/var/lib/apt/lists/*_InRelease | head -n 1 > {dated}'
        subprocess.run(["mmdebstrap", "--variant=minbase", f"--include={DEBIAN_PACKAGES}", "--format=tar",
                        f"--customize-hook={hook}", DEBIAN_SUITE, str(partial)], check=True, stdout=subprocess.DEVNULL)
        partial.rename(tar)
    release_date = dated.read_text().strip()
    if not release_date:
        raise JobawareError(f"no Release date was read while building {tar}: remove it and build again")
    labels = [f'--change=LABEL {name}="{value}"' for name, value in base_labels(tar, release_date).items()]
    podman("import", "--change", "CMD=/usr/bin/python3", *labels, str(tar), DEBIAN_BASE)
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


def caller_user() -> str:
    """The user a pipeline step's container runs as: the caller's own uid and gid (root's for root), so that what a
    step writes into the mounted folders is the caller's, and nothing on the host changes owner or mode. (Running
    as the image's uid 10001 needed those folders made its own: root's JOBAWARE_HOME was chowned on the host.)"""
    return f"{os.getuid()}:{os.getgid()}"


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


REQUIREMENTS = ROOT / "requirements-image.txt"
REQUIREMENTS_HEAD = """\
# The image's Python packages, each pinned with the SHA-256 of its file for the image's platform (x86_64, glibc,
# CPython 3.11): the Dockerfile installs them with `pip install --require-hashes`. Written by `make image-requirements`
# (pip's own resolver and its installation report) from pyproject.toml's dependencies with the extra `all`, the pins of
# constraints.txt and requirements-image.in: do not edit by hand. On another platform, run it there.
"""


def file_sha256(url: str) -> str:
    """The SHA-256 of a local file named by a file:// URL (pip reports no hash for a link that carried none)."""
    path = Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path))
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def locked_requirements(report: dict) -> str:
    """requirements-image.txt's text from pip's installation report: every package to install, pinned, with the
    SHA-256 of the file pip chose for it; the project itself (installed from its folder) left out."""
    lines = []
    for item in report["install"]:
        info, metadata = item["download_info"], item["metadata"]
        if "archive_info" not in info:
            continue
        digest = info["archive_info"].get("hashes", {}).get("sha256")
        if not digest:
            if not info["url"].startswith("file:"):
                raise JobawareError(f"pip reported no SHA-256 for {info['url']}")
            digest = file_sha256(info["url"])
        lines.append((metadata["name"].lower(), f"{metadata['name']}=={metadata['version']} \\\n"
                                                f"    --hash=sha256:{digest}\n"))
    return REQUIREMENTS_HEAD + "".join(line for _, line in sorted(lines))


def write_requirements() -> Path:
    """Resolve the image's packages with pip (a dry run: nothing installed) and write requirements-image.txt."""
    with tempfile.TemporaryDirectory(prefix="jobaware-requirements-") as workdir:
        report = Path(workdir) / "report.json"
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                        "--report", str(report), "--find-links", torch_find_links(), "-c", "constraints.txt",
                        "-r", "requirements-image.in", ".[all]"], cwd=ROOT, check=True, stdin=subprocess.DEVNULL)
        REQUIREMENTS.write_text(locked_requirements(json.loads(report.read_text())))
    return REQUIREMENTS


def main() -> None:
    started = time.monotonic()
    if sys.argv[1:] == ["requirements"]:
        try:
            print(f"wrote {write_requirements().relative_to(ROOT)}")
        except (JobawareError, subprocess.CalledProcessError) as exc:
            sys.exit(f"error: {exc}")
        return
    try:
        size = build(os.environ.get("BASE_IMAGE", ""), os.environ.get("JOBAWARE_IMAGE", IMAGE))
    except (JobawareError, subprocess.CalledProcessError) as exc:
        sys.exit(f"error: {exc}")
    print(f"image {os.environ.get('JOBAWARE_IMAGE', IMAGE)}: {size / 1e6:,.0f} MB, built in "
          f"{time.monotonic() - started:,.0f} s")


if __name__ == "__main__":
    main()
