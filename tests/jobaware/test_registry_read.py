"""`jobaware.registry_read` reads the embedded MLflow store without MLflow's client: it must read what the client
reads, and the commands that use it must import no MLflow."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from jobaware import gate, registry_read, tracking


def _same(fast, slow) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(fast, dict) and isinstance(slow, dict):
        return fast.keys() == slow.keys() and all(_same(fast[k], slow[k]) for k in fast)
    if isinstance(fast, list) and isinstance(slow, list):
        return len(fast) == len(slow) and all(_same(a, b) for a, b in zip(fast, slow, strict=True))
    if isinstance(fast, float) and isinstance(slow, float) and math.isnan(fast) and math.isnan(slow):
        return True
    return fast == slow


def assert_both_ways_read_the_same(key: str, versions: list[str]) -> None:
    """Every reading of `registry_read` equals the one through MLflow's client (`tracking`, `gate`)."""
    assert _same(registry_read.list_models(), tracking.list_models())
    assert registry_read.champion_version(key) == tracking.champion_version(key)
    for version in versions:
        assert _same(registry_read.describe_version(key, version), tracking.describe_version(key, version)), version
        assert _same(registry_read.version_metrics(key, version), tracking.version_metrics(key, version))
        assert _same(registry_read.training_profile(key, version), tracking.training_profile(key, version))
        assert _same(registry_read.last_promotion(key, version), gate.last_promotion(key, version))
    runs = registry_read.list_runs([key], 50)
    assert _same(runs, tracking.list_runs([key], 50))
    for run in runs[:5]:
        assert _same(registry_read.describe_run(run["run_id"]), tracking.describe_run(run["run_id"]))


def test_reading_the_store_directly_reads_what_mlflow_reads(champion):
    assert_both_ways_read_the_same("failure", [champion])
    with pytest.raises(Exception, match="has no version 999"):
        registry_read.describe_version("failure", "999")
    with pytest.raises(Exception, match="no run 'nope'"):
        registry_read.describe_run("nope")


def test_listing_the_models_imports_no_mlflow(champion):
    code = ("import sys; from jobaware import registry_read; rows = registry_read.list_models(); "
            "registry_read.list_runs(['failure']); assert rows; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mlflow', 'pandas', 'sklearn')))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]", shown.stdout + shown.stderr
