"""The project image, run for real with podman (runc and rlimits from podman/containers.conf): its size within the
budget docs/results/containers.md states; one pipeline per capability with every step in the image (`pipeline run --runner docker`),
registering the same kind of model as the subprocess runner; and each of the four services served from the image
on loopback, read-only root, answering the README's example request as uid 10001.

Slow, and run last (tests/conftest.py). Needs podman and the image `make image` builds from this tree (an image
built from other sources is stale: its label says what it was built from); without them the tests skip, except
where JOBAWARE_REQUIRE_PODMAN=1 (CI), where they fail. Where JOBAWARE_IMAGE_BUILD names a file, a build runs
beside the suite (.ci/run) and writes its exit status there: the tests wait for it, at most 45 minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from jobaware import capabilities, containers
from tests.conftest import ROOT, free_port, wait_for
from tests.test_cli import run
from tests.test_conformance import smoke_version

IMAGE = os.environ.get("JOBAWARE_IMAGE", containers.IMAGE)
CONTAINERS_PAGE = "docs/results/containers.md"  # the image budget it states
KEYS = capabilities.keys()


BUILD_WAIT_SECONDS = 45 * 60


def image_digest(tag: str) -> str:
    """The source digest an image was built from (its label), empty for an image without one."""
    label = containers.podman("image", "inspect", "--format", f'{{{{index .Labels "{containers.SOURCE_LABEL}"}}}}', tag,
                              check=False)
    return label.stdout.strip() if label.returncode == 0 else ""


def wait_for_build(status: Path) -> None:
    """Wait (bounded) for the image build running beside the suite to write its exit status to `status`."""
    deadline = time.monotonic() + BUILD_WAIT_SECONDS
    while not status.is_file() or not status.read_text().strip():
        if time.monotonic() > deadline:
            pytest.fail(f"the image build beside the suite wrote no status to {status} in {BUILD_WAIT_SECONDS} s")
        time.sleep(5)
    code = status.read_text().strip()
    if code != "0":
        log = status.with_suffix(".log")
        tail = log.read_text(errors="replace")[-3000:] if log.is_file() else "(no log)"
        pytest.fail(f"`make image` beside the suite failed (exit {code}):\n{tail}")


def require_image() -> None:
    if os.environ.get("JOBAWARE_IMAGE_BUILD"):
        wait_for_build(Path(os.environ["JOBAWARE_IMAGE_BUILD"]))
    if not shutil.which("podman"):
        reason = "podman is not installed (apt-get install podman runc)"
    elif not containers.image_exists(IMAGE):
        reason = f"no image {IMAGE}: build it with `make image`"
    elif image_digest(IMAGE) != containers.source_digest():
        reason = f"{IMAGE} was built from other sources than this tree's: rebuild it with `make image`"
    else:
        return
    if os.environ.get("JOBAWARE_REQUIRE_PODMAN") == "1":
        pytest.fail(f"JOBAWARE_REQUIRE_PODMAN=1 but {reason}")
    pytest.skip(f"{reason}; set JOBAWARE_REQUIRE_PODMAN=1 to fail")


def test_an_unknown_runner_is_a_one_line_error():
    result = run("pipeline", "run", "failure", "--runner", "kubernetes")
    # a usage error (exit 2, the command contract), said in one line
    assert result.returncode == 2 and "'kubernetes' is not one of 'subprocess', 'docker'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_image_size_is_within_the_documented_budget():
    require_image()
    budget = re.search(r"image budget: \*\*([\d.]+) GB\*\*", (ROOT / CONTAINERS_PAGE).read_text())
    assert budget, f"{CONTAINERS_PAGE} states no 'image budget: **N GB**'"
    size = containers.image_size(IMAGE)
    assert size <= float(budget.group(1)) * 1e9, f"{IMAGE} is {size / 1e9:.2f} GB, past the documented budget"


def pipeline(key: str, home: Path, data: Path, runner: str) -> str:
    """Run the capability's pipeline on its smoke data with `runner`; the version it registered."""
    _, params = capabilities.get(key).smoke
    env = {**os.environ, "JOBAWARE_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    args = [f"--param={name}={json.dumps(value) if not isinstance(value, str) else value}"
            for name, value in params.items()]
    result = run("pipeline", "run", key, "--input", data, *args, "--runner", runner, "--json", env=env, timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)[key]["version"]


@pytest.fixture(scope="module")
def smoke_data(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("smoke-data")
    for key in KEYS:
        capability = capabilities.get(key)
        capability.synth(folder / key, capability.smoke[0], seed=5, fmt=None, progress=None)
    return {key: folder / key for key in KEYS}


@pytest.fixture(scope="module")
def container_home(tmp_path_factory) -> Path:
    """A JOBAWARE_HOME for the pipelines run with each step in the image."""
    return tmp_path_factory.mktemp("container-home")


_IN_CONTAINERS: dict[str, str] = {}


def in_containers(key: str, home: Path, data: Path) -> str:
    """The version the capability's pipeline registered in `home` with each step in the image (run once)."""
    require_image()
    if key not in _IN_CONTAINERS:
        _IN_CONTAINERS[key] = pipeline(key, home, data, "docker")
        # the steps ran as the caller: everything in the home is the caller's (root's home was chowned to 10001)
        strangers = [p for p in [home, *home.rglob("*")] if p.lstat().st_uid != os.getuid()]
        assert not strangers, f"{strangers[0]} is owned by uid {strangers[0].lstat().st_uid}"
    return _IN_CONTAINERS[key]


def model_kind(key: str, home: Path, version: str, monkeypatch) -> tuple[str, list[str]]:
    """The bundle class and the MLflow flavors of a registered version."""
    import mlflow

    from jobaware import tracking

    monkeypatch.setenv("JOBAWARE_HOME", str(home))
    bundle, _ = tracking.load_bundle(key, version)
    info = mlflow.models.get_model_info(f"models:/{capabilities.get(key).model_name}/{version}")
    return f"{type(bundle).__module__}.{type(bundle).__qualname__}", sorted(info.flavors)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("key", KEYS)
def test_pipeline_in_containers_registers_the_same_kind_of_model(key, container_home, smoke_data, in_home,
                                                                  tmp_path_factory, monkeypatch):
    """The same smoke data and parameters as the conformance suite's subprocess run (reused where it ran)."""
    kind = model_kind(key, container_home, in_containers(key, container_home, smoke_data[key]), monkeypatch)
    version = smoke_version(key, in_home, tmp_path_factory.mktemp(key))
    assert kind == model_kind(key, in_home, version, monkeypatch)
    logs = sorted((container_home / "logs").glob(f"pipeline-{key}-*.log"))
    assert logs and "Found image" in logs[-1].read_text(errors="replace")  # the steps ran in the image


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], env=containers.podman_env(), capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("key", KEYS)
def test_service_answers_from_its_container_as_uid_10001(key, container_home, smoke_data, tmp_path):
    """`podman run` of the service, published on 127.0.0.1 only, read-only root, /tmp a tmpfs, and a copy of the
    JOBAWARE_HOME its champion was trained in (in containers) mounted at the home's own path (its artifacts' paths
    are absolute), the copy owned by the image's user 10001, as a site gives a service its volume: a home is its
    owner's alone (0700); the container is removed at the end."""
    in_containers(key, container_home, smoke_data[key])
    served = tmp_path / "home"
    shutil.copytree(container_home, served, symlinks=True)
    for path in [served, *served.rglob("*")]:
        os.lchown(path, 10001, 10001)
    home, name, port = str(container_home), f"jobaware-test-{key}-{uuid.uuid4().hex[:8]}", free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        started = podman("run", "--detach", f"--name={name}", f"--publish=127.0.0.1:{port}:3000", "--read-only",
                         "--tmpfs=/tmp", f"--volume={served}:{home}", f"--env=JOBAWARE_HOME={home}",
                         f"--env=BENTOML_HOME={home}/bentoml", IMAGE,
                         "jobaware", "serve", key, "--host", "0.0.0.0", "--port", "3000")
        assert started.returncode == 0, started.stderr
        try:
            wait_for(f"{url}/readyz", 300)
        except TimeoutError:
            pytest.fail(f"{key}: {url}/readyz never answered 200; its log:\n{podman('logs', name).stderr[-3000:]}")
        route, example = capabilities.get(key).example
        answer = httpx.post(f"{url}{route}", json=example, timeout=60)
        assert answer.status_code == 200, answer.text
        status = podman("exec", name, "cat", "/proc/1/status").stdout
        assert re.search(r"^Uid:\s+10001\s+10001", status, re.M), status
        ports = json.loads(podman("inspect", name).stdout)[0]["HostConfig"]["PortBindings"]["3000/tcp"]
        assert [p["HostIp"] for p in ports] == ["127.0.0.1"]
    finally:
        podman("rm", "--force", "--time=10", name)


def test_a_debian_base_is_labelled_with_its_release_snapshot_and_packages(tmp_path):
    """The Debian base `make image` builds where no registry answers has no registry digest: its labels say what pins
    it, from the root file system itself (dpkg's status: installed packages only) and the Release file's date."""
    import hashlib
    import io
    import tarfile

    status = ("Package: python3\nStatus: install ok installed\nVersion: 3.11.2-1+b1\nDescription: x\n continued\n\n"
              "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9+deb12u10\n\n"
              "Package: gone\nStatus: deinstall ok config-files\nVersion: 1.0\n")
    tar = tmp_path / "rootfs.tar"
    with tarfile.open(tar, "w") as archive:
        member = tarfile.TarInfo("./var/lib/dpkg/status")
        member.size = len(status.encode())
        archive.addfile(member, io.BytesIO(status.encode()))
    assert containers.installed_packages(tar) == ["libc6=2.36-9+deb12u10", "python3=3.11.2-1+b1"]
    labels = containers.base_labels(tar, "Sat, 10 May 2025 09:12:01 UTC")
    assert labels == {
        containers.BASE_RELEASE_LABEL: "bookworm Sat, 10 May 2025 09:12:01 UTC",
        containers.BASE_SNAPSHOT_LABEL: "http://snapshot.debian.org/archive/debian/20250510T091201Z",
        containers.BASE_PACKAGES_LABEL: hashlib.sha256(b"libc6=2.36-9+deb12u10\npython3=3.11.2-1+b1\n").hexdigest(),
    }
