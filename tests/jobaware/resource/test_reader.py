import json

import pandas as pd
import pytest

from jobaware import contracts
from jobaware.errors import InputError
from jobaware.resource.reader import ingest, is_stub, load_table, read_scripts
from tests.jobaware.resource.conftest import SCRIPTS


def _write(folder, labels: str, files: dict[str, bytes]):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "labels.csv").write_bytes(labels.encode())
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    return folder


def test_real_scripts_are_read_with_stubs_conflicts_and_near_duplicate_groups(tmp_path):
    report = ingest([str(SCRIPTS)], tmp_path)
    assert (report.rows, report.bad_rows) == (134, 0)
    table = load_table(tmp_path)
    assert table["class"].value_counts().to_dict() == {"cpu": 71, "mem": 27, "network": 22, "io": 11, "other": 3}
    assert int(table["stub"].sum()) == 12
    stubs = set(table.loc[table["stub"], "file"])
    assert {"18.py", "p34.py", "new_format_csv_production.py", "dict.py", "slackFlask.py"} <= stubs
    # identical content, different labels: set aside (the 3-byte stubs, and get_data.py vs its copy)
    conflicts = table[table["label_conflict"] & ~table["stub"]]
    assert set(conflicts["file"]) == {"get_data.py", "get_data copy.py"}
    assert int(table["usable"].sum()) == 120 and (table["origin"] == "real").all()
    group = table.set_index("file")["group"]
    assert group["p1.py"] == group["p1 copy.py"] and group["myscript.py"] == group["myscript copy 2.py"]
    assert group["breakdown_by_field.py"] == group["myscript.py"]  # 90 %-similar content
    assert group["p1.py"] != group["p2.py"]
    assert (tmp_path / "quarantine.jsonl").read_text() == ""


def test_the_table_meets_its_contract(tmp_path):
    ingest([str(SCRIPTS)], tmp_path)
    report = contracts.validate_parquet(tmp_path / "labelled_scripts.parquet", "labelled_scripts")
    assert report["success"], contracts.format_report(report)


def test_crlf_upstream_layout_without_stored_as(tmp_path):
    labels = "file,class\r\nsolver.py,CPU \r\nfetch copy.py,network\r\n\r\n"
    _write(tmp_path, labels, {"scripts/solver.py": b"for i in range(9):\n    x = i * i\n",
                              "scripts/fetch copy.py": b"import requests\nrequests.get('http://x')\n"})
    frame, bad, report = read_scripts([str(tmp_path)])
    assert bad == [] and report.rows == 2
    assert frame["class"].tolist() == ["cpu", "network"]
    assert frame["stored_as"].tolist() == ["scripts/solver.py", "scripts/fetch copy.py"]


def test_bad_records_are_quarantined_with_file_line_field_and_reason(tmp_path):
    labels = ("file,class,stored_as\n"
              "a.py,cpu,files/a.py.txt\n"
              "b.py,gpu,files/b.py.txt\n"
              "missing.py,io,files/missing.py.txt\n"
              "escape.py,io,../outside.py\n"
              "a.py,mem,files/a.py.txt\n"
              "short\n"
              ",cpu,files/a.py.txt\n")
    (tmp_path / "outside.py").write_text("x = 1\n")
    folder = _write(tmp_path / "set", labels, {"files/a.py.txt": b"print(1)\n", "files/b.py.txt": b"x()\n"})
    report = ingest([str(folder)], tmp_path / "out")
    assert (report.rows, report.bad_rows) == (1, 6)
    quarantined = [json.loads(line) for line in (tmp_path / "out" / "quarantine.jsonl").read_text().splitlines()]
    assert [(q["line"], q["field"]) for q in quarantined] == [
        (3, "class"), (4, "stored_as"), (5, "stored_as"), (6, "file"), (7, "row"), (8, "file")]
    assert "leaves the labels folder" in quarantined[2]["reason"]
    assert "listed again with class mem" in quarantined[3]["reason"]
    assert str(report.problems[0]).startswith(f"{folder / 'labels.csv'}:3: field 'class'")
    table = load_table(tmp_path / "out")
    assert table.loc[0, "label_conflict"] and not table.loc[0, "usable"]  # a.py: its two labels disagree
    with pytest.raises(InputError, match=r"labels.csv:3: field 'class'.*strict mode"):
        ingest([str(folder)], tmp_path / "strict", strict=True)


def test_whole_source_errors_name_the_source(tmp_path):
    with pytest.raises(InputError, match="nowhere: no such file or folder"):
        ingest([str(tmp_path / "nowhere")], tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty: no labels.csv here"):
        ingest([str(tmp_path / "empty")], tmp_path / "out")
    _write(tmp_path / "noheader", "a.py,cpu\n", {"a.py": b"x\n"})
    with pytest.raises(InputError, match=r"noheader/labels.csv:1: header must name the columns file and class"):
        ingest([str(tmp_path / "noheader")], tmp_path / "out")
    with pytest.raises(InputError, match="the pattern matches no file"):
        ingest([str(tmp_path / "*.nothing")], tmp_path / "out")
    _write(tmp_path / "allbad", "file,class\nx.py,cpu\n", {})
    with pytest.raises(InputError, match=r"no readable labelled scripts \(1 bad record"):
        ingest([str(tmp_path / "allbad")], tmp_path / "out")


def test_generated_folders_are_marked_and_found_below_a_folder(tmp_path):
    from jobaware.resource.synth import write_synthetic

    write_synthetic(tmp_path / "outer" / "one", 40, seed=1)
    write_synthetic(tmp_path / "outer" / "two", 30, seed=2)
    progress = []
    frame, _, report = read_scripts([str(tmp_path / "outer")], progress=progress.append)
    assert report.rows == 70 == sum(progress)
    assert (frame["origin"] == "synthetic").all() and frame["source"].nunique() == 2


def test_stub_rule():
    assert is_stub(b"") and is_stub(b"Non") and is_stub(b"  \r\n# only a comment\n") and is_stub(b"pass")
    assert not is_stub(b"x = 1") and not is_stub(b"print()")


def test_large_scripts_are_truncated_not_refused(tmp_path):
    _write(tmp_path, "file,class\nbig.py,io\n", {"big.py": b"x = 1\n" * 5000})
    frame, _, _ = read_scripts([str(tmp_path)], max_file_bytes=1000)
    assert frame.loc[0, "truncated"] and frame.loc[0, "n_bytes"] == 30000 and len(frame.loc[0, "content"]) == 1000
    assert isinstance(pd.DataFrame(frame)["content"][0], bytes)
