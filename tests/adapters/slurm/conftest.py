"""A live one-node Slurm with accounting (slurmdbd + MariaDB), shared by the collector's live tests."""

import os

import pytest

from tests.slurm.cluster import SlurmCluster, missing_binaries


@pytest.fixture(scope="package")
def accounted(tmp_path_factory):
    missing = missing_binaries(accounting=True)
    if missing:
        reason = (f"Slurm with accounting is not installed here ({', '.join(missing)} missing); "
                  "apt-get install slurm-wlm slurmdbd mariadb-server munge")
        if os.environ.get("JOBAWARE_REQUIRE_SLURM"):
            pytest.fail(reason)
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurmdbd"), accounting=True, cpus=16).start()
    yield cluster
    cluster.stop()
