"""A live one-node Slurm with accounting (slurmdbd + MariaDB), shared by the collector's live tests."""


import pytest

from harness.slurm_cluster import SlurmCluster, require_slurm


@pytest.fixture(scope="package")
def accounted(tmp_path_factory):
    require_slurm(accounting=True)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurmdbd"), accounting=True, cpus=16).start()
    yield cluster
    cluster.stop()
