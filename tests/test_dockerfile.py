"""The Dockerfile passes hadolint and builds what the project needs: CPU torch, a non-root user, a read-only root, a
base named by digest, and every Python package installed with --require-hashes from requirements-image.txt, whose
pins are constraints.txt's."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from jobaware import containers
from tests.conftest import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_runs_as_non_root_with_cpu_torch_on_a_chosen_base():
    text = DOCKERFILE
    assert "USER 10001:10001" in text and "download.pytorch.org/whl/cpu" in text
    assert image_requirements()["torch"][0].endswith("+cpu")
    assert text.count("FROM ${BASE_IMAGE}") == 2
    final = text.split("FROM ${BASE_IMAGE}\n")[1]  # the final stage: the build's venv, no compiler, no pip
    assert "COPY --from=build /opt/venv /opt/venv" in final and "pip install" not in final
    assert "HEALTHCHECK" in final and "NUMBA_CACHE_DIR=/tmp/" in final  # numba's cache off a read-only root
    assert 'LABEL org.opencontainers.image.base.name="${BASE_IMAGE}"' in final


def test_the_base_is_named_by_digest_and_make_image_uses_the_same():
    [default] = re.findall(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE, re.M)
    assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", default), default
    assert default == containers.PUBLIC_BASE


def image_requirements() -> dict[str, tuple[str, list[str]]]:
    """requirements-image.txt: each package's pinned version and its SHA-256 hashes."""
    found = {}
    text = (ROOT / "requirements-image.txt").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pin, *options = line.split()
        name, _, version = pin.partition("==")
        assert version, f"requirements-image.txt: {pin} is not pinned with =="
        found[canonicalize_name(name)] = (version, [o.removeprefix("--hash=sha256:") for o in options])
    return found


def constraints() -> dict[str, str]:
    pins = (line.split("#", 1)[0].strip() for line in (ROOT / "constraints.txt").read_text().splitlines())
    return {canonicalize_name(p.split("==")[0]): p.split("==")[1] for p in pins if "==" in p}


def test_every_package_of_the_image_is_pinned_with_its_hash_and_installed_requiring_hashes():
    """The image installs exactly requirements-image.txt, hash-checked (a changed file on the index, or one served
    by someone else, is refused), then the project alone: nothing is resolved or fetched beside the list."""
    requirements = image_requirements()
    for name, (version, hashes) in requirements.items():
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), f"{name}=={version} has no hash"
    assert re.search(r'pip install --require-hashes --no-deps --find-links "\$TORCH_FIND_LINKS" '
                     r"-r requirements-image.txt", DOCKERFILE)
    assert "pip install --no-deps --no-build-isolation --no-index ." in DOCKERFILE and "pip check" in DOCKERFILE
    assert DOCKERFILE.count("pip install") == 2
    assert {"psycopg2-binary", "flask-wtf", "setuptools", "mlflow", "torch"} <= set(requirements)


def test_the_image_pins_are_the_constraints_pins():
    """What the image installs is what CI tests with: a package in both lists has one version in both (torch's
    local label `+cpu` aside), and every dependency of pyproject.toml, the extras' included (the image holds `all`),
    is in the image."""
    import tomllib

    from packaging.requirements import Requirement

    requirements, pins = image_requirements(), constraints()
    differ = {name: (version, pins[name]) for name, (version, _) in requirements.items()
              if name in pins and Version(version).public != Version(pins[name]).public}
    assert not differ, f"requirements-image.txt and constraints.txt disagree: {differ}; run `make image-requirements`"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"], *(d for extra in extras["all"][0].partition("[")[2].rstrip("]").split(",")
                                          for d in extras[extra])]
    missing = {canonicalize_name(Requirement(d).name) for d in wanted} - set(requirements)
    assert not missing, f"pyproject.toml's {sorted(missing)} are not in requirements-image.txt"


@pytest.mark.slow
def test_the_hashes_are_those_of_the_files_the_index_serves(tmp_path):
    """pip itself, in hash-checking mode, finds and checks every file the image would install (a dry run: nothing
    installed), with this machine's index settings (the torch CPU wheel from PIP_FIND_LINKS where it lies). This
    machine is of the image's platform (x86_64, glibc, CPython 3.11): the files it picks are the image's."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--require-hashes", "--no-deps",
         "-r", str(ROOT / "requirements-image.txt")], capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Would install" in result.stdout
