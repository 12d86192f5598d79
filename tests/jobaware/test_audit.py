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


def _append_many(path, writer: int, count: int) -> None:
    from jobaware.audit import AppendLimits

    limits = AppendLimits(max_bytes=16_384, backups=3)
    for number in range(count):
        append(path, stamp({"action": "card", "writer": writer, "number": number, "pad": "x" * (number % 200)}), limits)


def test_appends_of_several_processes_stay_within_the_bound_rotated_and_whole(tmp_path):
    """Four processes append at once (the gateway's workers, an admin's `jobaware card`): the audit is rotated, at most
    four files of at most 16 KiB each, every line whole, and the newest file ends with the last records written."""
    import multiprocessing

    path = tmp_path / "audit" / "card.jsonl"
    writers = [multiprocessing.get_context("fork").Process(target=_append_many, args=(path, w, 300)) for w in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
    assert [writer.exitcode for writer in writers] == [0, 0, 0, 0]
    files = sorted(p.name for p in path.parent.iterdir() if not p.name.endswith(".lock"))
    assert files == ["card.jsonl", "card.jsonl.1", "card.jsonl.2", "card.jsonl.3"]
    assert all((path.parent / name).stat().st_size <= 16_384 for name in files)
    kept = [record for name in files for record in read_records(path.parent / name)]  # a torn line would not read
    assert len(kept) == sum(len((path.parent / name).read_bytes().splitlines()) for name in files)
    assert list(read_records(path))[-1]["number"] == 299  # the last record written: each writer's last is its 299th


def test_a_record_too_long_for_a_line_is_cut_to_fit(tmp_path):
    from jobaware.audit import MAX_LINE_BYTES

    path = tmp_path / "card.jsonl"
    append(path, stamp({"action": "card", "short": "x" * 100_000, "versions": {str(n): "v" * 50 for n in range(500)}}))
    [record] = read_records(path)
    assert len(path.read_bytes()) <= MAX_LINE_BYTES and record["cut"] and record["action"] == "card"
    assert record["short"].startswith('"xxx') and record["short"].endswith("...")
