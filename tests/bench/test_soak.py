"""The short soak of `make test`: each service (a real `bentoml serve` of its smoke champion) under a fixed rate
of mixed valid, invalid and worst-case requests; every answer as expected and memory flat over the second half.
The long soak (10,000 requests per service) is `make bench`."""

import importlib.util
import sys

import pytest

from tests.conftest import ROOT
from tests.test_conformance import KEYS, smoke_version

pytestmark = pytest.mark.slow
spec = importlib.util.spec_from_file_location("soak", ROOT / "bench" / "soak.py")
soak = sys.modules["soak"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(soak)


@pytest.mark.timeout(1800)
def test_a_short_soak_answers_every_request_as_expected_with_flat_memory(conformance_home, tmp_path_factory,
                                                                         tmp_path, monkeypatch):
    monkeypatch.setenv("JOBAWARE_HOME", str(conformance_home))
    for key in KEYS:
        smoke_version(key, conformance_home, tmp_path_factory.mktemp(key))
    results = soak.run(list(KEYS), conformance_home, 200, 20.0, worst_every=20, invalid_every=5, logs=tmp_path)
    for s in results:
        print(soak.line(s))
        statuses = s["statuses"]
        assert {k for k in statuses if k.startswith("valid")} == {"valid 200"}, s
        assert all(k.startswith("invalid 4") for k in statuses if k.startswith("invalid")), s
        assert {k for k in statuses if k.startswith("worst")} == {"worst 200"}, s
        assert s["largest_answer_bytes"] <= 1 << 20, s
        assert s["growth_second_half"] <= soak.MAX_GROWTH, s
