import pytest

from jobaware.sizing.reader import read_trace
from jobaware.sizing.synth import write_synthetic


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """4,000 generated jobs as an SWF trace: (trace path, truth path)."""
    folder = tmp_path_factory.mktemp("sizing-synth")
    truth = write_synthetic(folder, 4000, seed=3)
    return folder / "synthetic_sizing.swf", truth


@pytest.fixture(scope="session")
def generated_jobs(generated):
    jobs, problems, _ = read_trace(generated[0])
    assert not problems
    return jobs


@pytest.fixture(scope="session")
def trained(generated_jobs):
    from jobaware.sizing.train import train_in_memory

    return train_in_memory(generated_jobs, {"max_iter": 40, "calibration_jobs": 800})
