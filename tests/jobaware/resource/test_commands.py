"""`jobaware resource classify` as a person runs it, against a champion in a home of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.jobaware.resource.conftest import QUICK

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


@pytest.fixture(scope="module")
def home(trained, tmp_path_factory) -> Path:
    """A JOBAWARE_HOME whose resource champion is the quickly trained bundle."""
    from jobaware import gate, tracking

    folder = tmp_path_factory.mktemp("resource-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JOBAWARE_HOME", str(folder))
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        run_id = tracking.log_training("resource", QUICK, *trained)
        assert gate.promote("resource", tracking.register("resource", run_id), force=True)["promoted"]
    return folder


def classify(home: Path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "JOBAWARE_HOME": str(home), "JOBAWARE_CONFIG": "/nonexistent", "COLUMNS": "200"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([JOBAWARE, "resource", "classify", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def test_classify_over_a_folder_gives_each_script_its_status(home, tmp_path):
    """An empty and a binary script among good ones: each is one row of the answer, exit 0. Issue 51 found the whole
    answer replaced by `{"error": ".../empty.py: empty file"}`, exit 1."""
    folder = tmp_path / "scripts"
    folder.mkdir()
    (folder / "a.py").write_text("import numpy\nx = numpy.ones((4000, 4000)) @ numpy.ones((4000, 4000))\n")
    (folder / "b.sh").write_text("#!/bin/bash\n#SBATCH --mem=4G\nsrun ./simulate\n")
    (folder / "empty.py").write_bytes(b"")
    (folder / "noise.sh").write_bytes(bytes(range(256)) * 12)
    for given in ([folder], [folder / "*"], sorted(folder.iterdir())):
        args = [item for path in given for item in ("--input", path)]
        answer = classify(home, *args, "--json")
        assert answer.returncode == 0, answer.stdout + answer.stderr
        rows = {Path(row["file"]).name: row for row in json.loads(answer.stdout)}
        assert sorted(rows) == ["a.py", "b.sh", "empty.py", "noise.sh"]
        assert rows["noise.sh"]["class"] is None and "binary data, not text" in rows["noise.sh"]["status"]
        assert rows["empty.py"]["class"] == "other" and all(rows[name]["class"] for name in ("a.py", "b.sh"))
    table = classify(home, "--input", folder)
    assert table.returncode == 0 and "noise.sh" in table.stdout and "not read: binary data" in table.stdout
    assert table.stderr == "warning: 1 of 4 files not classified (no script: see their status)\n", table.stderr


def test_classify_over_only_bad_scripts_fails_in_one_line(home, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "noise.sh").write_bytes(bytes(range(256)) * 12)
    (folder / "noise.py").write_bytes(bytes(range(255, -1, -1)) * 12)
    for given in (folder, folder / "*"):
        refused = classify(home, "--input", given)
        assert refused.returncode == 1 and refused.stdout == "", refused.stdout
        assert refused.stderr.startswith("error: ") and len(refused.stderr.splitlines()) == 1
        assert "binary data, not text" in refused.stderr
