"""Fixtures of the resource tests: the bundled real scripts, generated scripts, a quickly trained bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REAL, ROOT

SCRIPTS = REAL / "scripts"
SEED_FEATURES = ROOT / "tests" / "data" / "resource" / "seed_features.csv"
# quick settings: one CV repeat, a short sequence model; the real defaults run in the slow test
QUICK = {"cv_repeats": 1, "max_epochs": 3, "max_len": 256, "embedding_dim": 16, "hidden_size": 16}


@pytest.fixture(scope="session")
def generated(tmp_path_factory) -> Path:
    """300 generated scripts in the real layout (Python and batch)."""
    from jobaware.resource.synth import write_synthetic

    out = tmp_path_factory.mktemp("resource-generated")
    write_synthetic(out, 300, seed=3)
    return out


@pytest.fixture(scope="session")
def dataset(tmp_path_factory, generated) -> Path:
    """The real scripts and the generated ones ingested into one canonical table."""
    from jobaware.resource.reader import ingest

    out = tmp_path_factory.mktemp("resource-dataset")
    ingest([str(SCRIPTS), str(generated)], out)
    return out


@pytest.fixture(scope="session")
def trained(dataset, tmp_path_factory):
    """(bundle, evaluation) trained quickly on the dataset."""
    from jobaware.resource.train import train

    return train(dataset, QUICK, tmp_path_factory.mktemp("resource-train"))


def classify_request(payload, bundle, version=None, limits=None, trained=None) -> dict:
    """`POST /classify` as the service answers it, in process: the body read by its model, then `classify`."""
    from jobaware.bodies import parse_body
    from jobaware.model import Served
    from jobaware.resource.service import Limits, classify, request_models

    limits = limits or Limits()
    return classify(parse_body(request_models(limits)[0], payload), Served(bundle, version, trained), limits)


def pairing_request(payload, bundle=None, version=None, limits=None, trained=None) -> dict:
    """`POST /pairing` in process (no bundle: classes given only)."""
    from jobaware.bodies import parse_body
    from jobaware.model import Served
    from jobaware.resource.service import Limits, pairing, request_models

    limits = limits or Limits()
    model = Served(bundle, version, trained) if bundle is not None else None
    return pairing(parse_body(request_models(limits)[1], payload), model, limits)
