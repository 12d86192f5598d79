"""`jobaware deploy systemd|k8s --output DIR`: a site with only the wheel gets the systemd units and the Kubernetes
manifests on disk, as the installed version carries them (the install test runs it from the wheel)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobaware.packaged import DEPLOYMENTS, bundled

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


def deploy(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "JOBAWARE_CONFIG": "/nonexistent", "JOBAWARE_HOME": str(cwd / "home")}
    return subprocess.run([JOBAWARE, "deploy", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("kind", sorted(DEPLOYMENTS))
def test_every_file_is_written_as_the_package_holds_it_one_line_each(kind, tmp_path):
    out = tmp_path / "out"
    done = deploy(kind, "--output", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    package = files(bundled(*DEPLOYMENTS[kind]))
    assert files(out) == package and len(package) > 10
    assert done.stderr.splitlines() == [f"wrote {out / name}" for name in package] and not done.stdout
    for name in package:
        mode = (out / name).stat().st_mode & 0o777
        assert mode == (0o600 if name == "credentials.env" else 0o644), (name, oct(mode))
    assert not (tmp_path / "home").exists()


def test_existing_files_are_kept_unless_overwrite(tmp_path):
    out = tmp_path / "units"
    assert deploy("systemd", "-o", out, cwd=tmp_path).returncode == 0
    edited = out / "jobaware.env"
    edited.write_text("JOBAWARE_STORE=sqlite:/srv/site.db\n")
    (out / "jobaware-adapter.service").unlink()
    refused = deploy("systemd", "-o", out, cwd=tmp_path)
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "already exist; give --overwrite to replace them" in refused.stderr
    assert edited.read_text() == "JOBAWARE_STORE=sqlite:/srv/site.db\n"
    assert not (out / "jobaware-adapter.service").exists()  # refused whole: nothing written
    edited.chmod(0o640)
    assert deploy("systemd", "-o", out, "--overwrite", cwd=tmp_path).returncode == 0
    assert files(out) == files(bundled("deploy", "systemd"))
    assert edited.stat().st_mode & 0o777 == 0o640  # a replaced file keeps the mode the site gave it


def test_a_file_where_the_folder_should_be_is_one_line(tmp_path):
    (tmp_path / "taken").write_text("x")
    done = deploy("k8s", "--output", tmp_path / "taken", cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.strip() == f"error: {tmp_path / 'taken'}: is a file; give a folder"


def test_the_written_manifests_render_as_the_packages_do(tmp_path):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        if os.environ.get("JOBAWARE_REQUIRE_KUSTOMIZE") == "1":
            pytest.fail("JOBAWARE_REQUIRE_KUSTOMIZE=1 but no kubectl (Debian package 'kubernetes-client')")
        pytest.skip("kubectl is not installed (Debian package 'kubernetes-client')")
    assert deploy("k8s", "--output", tmp_path / "k8s", cwd=tmp_path).returncode == 0
    for overlay in ("local", "production"):
        rendered = [subprocess.run([kubectl, "kustomize", str(root / "overlays" / overlay)], capture_output=True,
                                   text=True, timeout=120, check=True).stdout
                    for root in (tmp_path / "k8s", bundled("k8s"))]
        assert rendered[0] == rendered[1] and "kind: Deployment" in rendered[0]
