import csv
import json

import pytest

from jobaware.errors import InputError
from jobaware.resource.features import extract
from jobaware.resource.parsing import parse_script
from jobaware.resource.reader import read_scripts
from jobaware.resource.schema import TRUTH_FILE
from jobaware.resource.synth import default_data, write_synthetic
from tests.jobaware.resource.conftest import SCRIPTS


def test_real_layout_with_truth_beside_it(generated):
    labels = (generated / "labels.csv").read_text()
    assert labels.splitlines()[0] == (SCRIPTS / "labels.csv").read_text().splitlines()[0] == "file,class,stored_as"
    assert "\r" not in labels
    truth = list(csv.DictReader(open(generated / TRUTH_FILE)))
    rows = list(csv.DictReader(open(generated / "labels.csv")))
    assert len(rows) == len(truth) == 300
    assert all((generated / r["stored_as"]).is_file() and r["stored_as"] == f"files/{r['file']}.txt" for r in rows)
    assert {r["class"] for r in rows} == {"cpu", "mem", "network", "io", "other"}
    kinds = {(t["kind"], t["class"]) for t in truth}
    assert {(k, c) for k in ("python", "shell") for c in ("cpu", "mem", "network", "io", "other")} <= kinds
    assert {t["not_a_job"] for t in truth} == {"true", "false"}
    assert {"crlf", "py2", "latin1", "plain"} <= {t["variant"] for t in truth}


def test_seeded(tmp_path, generated):
    write_synthetic(tmp_path, 300, seed=3)
    assert (tmp_path / "labels.csv").read_bytes() == (generated / "labels.csv").read_bytes()
    first = sorted((generated / "files").iterdir())[5]
    assert (tmp_path / "files" / first.name).read_bytes() == first.read_bytes()
    write_synthetic(tmp_path / "other", 300, seed=4)
    assert (tmp_path / "other" / "labels.csv").read_bytes() != (generated / "labels.csv").read_bytes()


def test_the_reader_agrees_with_the_truth(generated):
    table, bad, _ = read_scripts([str(generated)])
    assert bad == [] and (table["origin"] == "synthetic").all() and table["usable"].all()
    truth = {t["file"]: t for t in csv.DictReader(open(generated / TRUTH_FILE))}
    for name, content in zip(table["file"], table["content"], strict=True):
        features = extract(parse_script(content, name))
        expected = truth[name]
        assert features.kind == expected["kind"], name
        assert features.not_a_job == (expected["not_a_job"] == "true"), (name, features.not_a_job_reason)
        assert features.status == {"py2": "py2_repaired"}.get(expected["variant"], features.status)
        assert features.status in ("ok", "py2_repaired", "shell"), name


def test_formats_and_bad_arguments(tmp_path):
    write_synthetic(tmp_path / "sh", 20, seed=1, fmt="shell")
    assert {t["kind"] for t in csv.DictReader(open(tmp_path / "sh" / TRUTH_FILE))} == {"shell"}
    with pytest.raises(InputError, match="format: expected python or shell"):
        write_synthetic(tmp_path / "x", 5, fmt="csv")
    with pytest.raises(InputError, match="n: expected a positive number"):
        write_synthetic(tmp_path / "x", 0)


def test_default_data_is_the_real_and_a_generated_folder(tmp_path):
    progress = []
    sources = json.loads(default_data(tmp_path, progress.append))
    assert sources[0] == str(SCRIPTS.resolve()) and sum(progress) == 600
    assert (tmp_path / "resource_generated_600" / "labels.csv").is_file()
    assert json.loads(default_data(tmp_path)) == sources and sum(progress) == 600  # made once
