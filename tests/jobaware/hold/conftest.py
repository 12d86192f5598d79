"""Fixtures of the hold tests: the real sample logs, and one small synthetic global log, read and trained once."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CONDOR = ROOT / "data" / "real" / "condor"
REAL_LOGS = sorted([*CONDOR.glob("*.log"), *CONDOR.glob("*.txt"), *CONDOR.glob("mldag_standalone/*.log")])
STANDALONE = CONDOR / "mldag_standalone"
SMALL = {"j": 6, "m": 8, "timeframe_len": 300, "hidden_size": 8, "embedding_dim": 4, "epochs": 3, "patience": 2,
         "batch_size": 256, "gbt_max_iter": 30}


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory) -> tuple[Path, Path]:
    """A generated global log of 12,000 jobs (2.4 days, every hold code of the generator) and its truth file."""
    from jobaware.hold import synth

    log = tmp_path_factory.mktemp("hold_synth") / "EventLog"
    truth = synth.write(log, 12_000, seed=11)
    return log, truth


@pytest.fixture(scope="session")
def dataset(synthetic, tmp_path_factory) -> Path:
    """The synthetic log ingested into a canonical dataset folder."""
    from jobaware.hold.reader import ingest

    out = tmp_path_factory.mktemp("hold_dataset")
    ingest([str(synthetic[0])], out)
    return out


@pytest.fixture(scope="session")
def trained(dataset, synthetic, tmp_path_factory):
    """A small LSTM trained on the dataset, with its evaluation (model, baselines, oracle)."""
    from jobaware.hold.train import train

    workdir = tmp_path_factory.mktemp("hold_train")
    bundle, evaluation = train(dataset, SMALL, workdir, truth=synthetic[1])
    return bundle, evaluation, workdir
