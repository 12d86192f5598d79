"""`sizing` on HTCondor job event logs through the CLI: the bundled real logs are too few for the gate (refused at
validation, saying how many more jobs it needs); logs enough for it train, register and promote a memory model, and
`predict sizing` on a log answers each job a memory per CPU and no time limit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REAL

pytestmark = pytest.mark.slow
COSMIC = REAL / "condor-more" / "CosmicRay__job.log"  # 378 real IceCube jobs, each with its memory peak and request


def jobaware(*args: str, home: Path) -> tuple[int, str]:
    env = {**os.environ, "JOBAWARE_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run([str(Path(sys.executable).with_name("jobaware")), *args], capture_output=True, text=True,
                          env=env, timeout=840, check=False)
    return done.returncode, done.stdout + done.stderr


def test_event_logs_train_a_memory_model_or_are_refused_before_training_when_too_few(tmp_path):
    home = tmp_path / "home"
    code, said = jobaware("pipeline", "run", "sizing", "--input", str(REAL / "condor-more"), home=home)
    assert code == 1 and "✓ ingest" in said and "✗ validate" in said and "✓ train" not in said, said
    assert re.search(r"the gate needs 1,000 test jobs with a known memory use, a memory asked and an earlier job of "
                     r"their user: .* has [\d,]+ jobs, whose test split would hold [\d,]+; about [\d,]+ more jobs are "
                     r"needed", said.strip().splitlines()[-1]), said
    # twelve submitters' logs (the real log under twelve names, as twelve users) are enough
    logs = tmp_path / "logs"
    logs.mkdir()
    for k in range(12):
        (logs / f"submitter{k:02d}.log").write_bytes(COSMIC.read_bytes())
    code, said = jobaware("pipeline", "run", "sizing", "--input", str(logs), "--param", "max_iter=20", home=home)
    assert code == 0 and "✓ train" in said and "jobaware-sizing version 1 (champion)" in said, said
    code, said = jobaware("predict", "sizing", "--input", str(COSMIC), "--output", "-", home=home)
    assert code == 0, said
    rows = [json.loads(line) for line in said.splitlines() if line.startswith("{")]
    assert len(rows) == 378 and all(r["time_s"] is None and r["time_asked_s"] is None for r in rows)
    sized = [r for r in rows if r.get("mem_per_cpu_mb") is not None]
    assert len(sized) > 300 and all(0 < r["mem_per_cpu_mb"] <= r["mem_asked_per_cpu_mb"] for r in sized)
    assert {r["job_id"] // 1_000_000 for r in rows} >= {59211698}
    assert all(r["note"] == "no time asked: memory only" for r in sized)
    assert f"recommended {len(sized)}; no_recommendation {378 - len(sized)}" in said, said
