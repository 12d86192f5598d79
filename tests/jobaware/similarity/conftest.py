"""Fixtures of the similarity tests: the real Mistral sample and a small generated pool, ingested and indexed."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
REAL = ROOT / "jobaware" / "data" / "real" / "mistral" / "dkrz_mistral_job_codings_binary.csv"


@pytest.fixture(scope="session")
def real_dataset(tmp_path_factory) -> Path:
    from jobaware.similarity.reader import ingest

    out = tmp_path_factory.mktemp("real")
    ingest([str(REAL)], out)
    return out


@pytest.fixture(scope="session")
def real_index(real_dataset):
    from jobaware.similarity.index import SimilarityIndex

    return SimilarityIndex.build(real_dataset)


@pytest.fixture(scope="session")
def generated(tmp_path_factory) -> Path:
    """4,000 generated jobs with every table (source files)."""
    from jobaware.similarity import synth

    out = tmp_path_factory.mktemp("generated")
    synth.write_synthetic(out, 4000, seed=3)
    return out


@pytest.fixture(scope="session")
def generated_dataset(generated, tmp_path_factory) -> Path:
    from jobaware.similarity.reader import ingest

    out = tmp_path_factory.mktemp("generated_dataset")
    ingest([str(generated)], out)
    return out


@pytest.fixture(scope="session")
def generated_index(generated_dataset):
    from jobaware.similarity.index import SimilarityIndex

    return SimilarityIndex.build(generated_dataset)


@pytest.fixture(scope="session")
def trained(generated_dataset, tmp_path_factory):
    """The pipeline's build + evaluation on the generated pool (small evaluation)."""
    from jobaware.similarity.train import train

    params = {"eval_references": 60, "eval_pool_jobs": 4000, "timing": True}
    return train(generated_dataset, params, tmp_path_factory.mktemp("train"))


@pytest.fixture(scope="module")
def bundle(generated_index):
    """The generated pool as the service holds it: b-aggz by default, top 5, one worker."""
    from jobaware.similarity.bundle import SimilarityBundle

    return SimilarityBundle(generated_index, "b-aggz", top_k=5, workers=1)


def similar_request(bundle, payload) -> dict:
    """`POST /similar` in process, without the envelope: the body read by its model, then ranked."""
    from jobaware.bodies import parse_body
    from jobaware.similarity.service import SimilarBody, rank

    return rank(bundle, parse_body(SimilarBody, payload))


def job_request(bundle, payload) -> dict:
    """`POST /job` in process."""
    from jobaware.bodies import parse_body
    from jobaware.model import Served
    from jobaware.similarity.service import JobBody, job

    return job(parse_body(JobBody, payload), Served(bundle, "1"))
