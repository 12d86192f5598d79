"""Small traces for the wait tests: the head of the real KTH trace, and a generated one."""

from __future__ import annotations

import pytest

from tests.conftest import KTH


@pytest.fixture(scope="session")
def kth_head():
    """The first 3,000 jobs of the real KTH IBM SP2 trace as queue_jobs rows."""
    from jobaware.wait.reader import read_trace

    return read_trace(KTH)[0].iloc[:3000].copy()


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """A generated trace of 3,000 jobs (EASY backfilling simulated), its path."""
    from jobaware.wait.synth import write_synthetic

    folder = tmp_path_factory.mktemp("wait-synth")
    write_synthetic(folder, 3000, seed=3)
    return folder / "synthetic.swf"


@pytest.fixture(scope="session")
def trained(generated):
    """A bundle and evaluation fitted on the generated trace."""
    from jobaware.wait.reader import read_trace
    from jobaware.wait.train import fit_and_evaluate

    return fit_and_evaluate(read_trace(generated)[0], {"max_iter": 40})
