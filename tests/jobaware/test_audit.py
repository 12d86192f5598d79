"""The durable audit: one JSON object a line, an unfinished last line dropped, ids remembered across restarts."""

import json

import pytest

from jobaware.audit import Audit, append, read_records, stamp
from jobaware.errors import InputError


def test_a_restarted_writer_drops_the_cut_line_and_remembers_what_it_recorded(tmp_path):
    path = tmp_path / "audit" / "acts.jsonl"
    with Audit(path) as audit:
        audit.write({"id": "a", "n": 1})
        audit.write({"n": 2, "p": float("nan")})  # NaN is written as null: the file stays JSON
    with open(path, "a") as handle:
        handle.write('{"id": "b", "n": 3')  # a crash while writing
    assert [r["n"] for r in read_records(path)] == [1, 2]  # the cut line is left out when read
    with Audit(path) as again:
        assert "a" in again and "b" not in again
        again.write({"id": "b", "n": 4})
    lines = path.read_text().splitlines()
    assert [json.loads(line)["n"] for line in lines] == [1, 2, 4] and json.loads(lines[1])["p"] is None


def test_append_stamps_who_and_when_and_a_bad_line_is_named(tmp_path):
    path = tmp_path / "card.jsonl"
    append(path, stamp({"action": "card"}))
    [record] = read_records(path)
    assert set(record) == {"at", "host", "uid", "action"}
    path.write_text('{"ok": 1}\n[1, 2]\n')
    with pytest.raises(InputError, match=r"card.jsonl line 2: not an audit record"):
        list(read_records(path))
    with pytest.raises(InputError, match="cannot read the audit"):
        list(read_records(tmp_path / "none.jsonl"))


@pytest.mark.parametrize("sink", ["file", "store"])
def test_a_file_and_a_store_stream_are_one_audit(tmp_path, sink):
    from jobaware.audit import StoreAudit
    from jobaware.store import open_store

    store = open_store(str(tmp_path / "store"))
    about = lambda record: record.get("job") if record.get("kind") == "hold" else None  # noqa: E731

    def opened():
        return Audit(tmp_path / "a.jsonl", subject=about) if sink == "file" else StoreAudit(store, "s", subject=about)

    with opened() as audit:
        assert audit.write({"id": "h1", "kind": "hold", "job": "7.0.0", "p": float("nan")})
        assert audit.write({"id": "o1", "kind": "outcome", "job": "8.0.0"})
        assert not audit.write({"id": "h1", "kind": "hold", "job": "9.0.0"})  # each id once
    with opened() as again:  # a restarted daemon knows what it recorded
        assert "h1" in again and "o1" in again and "h2" not in again
        assert again.has_subject("7.0.0") and not again.has_subject("8.0.0") and not again.has_subject("9.0.0")
        assert [(r["id"], r["p"] if "p" in r else "-") for r in again] == [("h1", None), ("o1", "-")]
    store.close()
