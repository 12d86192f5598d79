"""Fixtures of the hold tests: the real logs, one small synthetic global log, and the real logs with a small log
generated from outcomes fitted on them, each read and trained once."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CONDOR = ROOT / "jobaware" / "data" / "real" / "condor"
MORE = ROOT / "jobaware" / "data" / "real" / "condor-more"
REAL_LOGS = sorted([*CONDOR.glob("*.log"), *CONDOR.glob("*.txt"), *CONDOR.glob("mldag_standalone/*.log")])
MORE_LOGS = sorted(MORE.glob("*.log"))
STANDALONE = CONDOR / "mldag_standalone"
SMALL = {"j": 6, "m": 8, "timeframe_len": 300, "hidden_size": 8, "embedding_dim": 4, "epochs": 3, "batch_size": 256,
         "gbt_max_iter": 30, "folds": 3, "bootstrap": 300}


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


@pytest.fixture(scope="session")
def real_dataset(tmp_path_factory) -> Path:
    """The bundled real logs (jobaware/data/real/condor's OSPool logs and jobaware/data/real/condor-more) and a log of 2,000 jobs
    generated from outcomes fitted on them, ingested into one dataset folder."""
    from jobaware.hold import synth
    from jobaware.hold.groups import real_outcomes
    from jobaware.hold.reader import ingest

    real = synth.real_logs()
    log = tmp_path_factory.mktemp("hold_fitted") / "EventLog"
    synth.write(log, 2_000, seed=3, outcomes=real_outcomes(real))
    out = tmp_path_factory.mktemp("hold_real_dataset")
    ingest([*real, str(log)], out)
    return out


@pytest.fixture(scope="session")
def real_trained(real_dataset, tmp_path_factory):
    """Every decision-maker measured on the real holds of `real_dataset`, and the bundle that serves the best."""
    from jobaware.hold.train import train

    workdir = tmp_path_factory.mktemp("hold_real_train")
    bundle, evaluation = train(real_dataset, SMALL, workdir)
    return bundle, evaluation, workdir
