"""Where data comes from: paths, globs, URIs."""

import pytest

from jobaware import sources
from jobaware.errors import InputError


def test_a_glob_becomes_the_sorted_files_it_matches_and_a_miss_is_named(tmp_path):
    for name in ("b.log", "a.log", "notes.txt"):
        (tmp_path / name).write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.log").write_text("x")
    assert sources.expand(str(tmp_path / "*.log")) == [str(tmp_path / "a.log"), str(tmp_path / "b.log")]
    assert sources.expand(str(tmp_path / "**" / "*.log"))[-1] == str(tmp_path / "sub" / "c.log")
    assert sources.expand(str(tmp_path / "notes.txt")) == [str(tmp_path / "notes.txt")]
    assert sources.expand("s3://bucket/*.log") == ["s3://bucket/*.log"]
    with pytest.raises(InputError, match=r"\*\.csv: the pattern matches no file"):
        sources.expand(str(tmp_path / "*.csv"))
    with pytest.raises(InputError, match="nothing.log: no such file or folder"):
        sources.expand(str(tmp_path / "nothing.log"))


def test_files_takes_paths_globs_and_folders_each_once(tmp_path):
    for name in ("b.swf", "a.swf", "README.md", ".hidden.swf"):
        (tmp_path / name).write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.swf").write_text("x")
    a, b, c = (str(tmp_path / n) for n in ("a.swf", "b.swf", "sub/c.swf"))
    assert sources.files([str(tmp_path)], (".swf",)) == [a, b]
    assert sources.files(str(tmp_path), (".swf",), recursive=True) == [a, b, c]
    assert sources.files([str(tmp_path / "*.swf"), a, str(tmp_path / "sub")]) == [a, b, c]
    assert sources.files(str(tmp_path), keep=lambda p: p.suffix != ".swf") == [str(tmp_path / "README.md")]
    with pytest.raises(InputError, match=r"sub: no files \(\.csv\) in this folder"):
        sources.files([str(tmp_path / "sub")], (".csv",))


def test_a_store_named_by_its_backend_is_made_absolute_and_must_be_there(tmp_path, monkeypatch):
    from jobaware.store import open_store

    with open_store(str(tmp_path / "store")):
        pass
    monkeypatch.chdir(tmp_path)
    assert sources.expand("sqlite:store") == [f"sqlite:{tmp_path / 'store'}"]
    assert sources.expand("redis://localhost:6379/0") == ["redis://localhost:6379/0"]
    with pytest.raises(InputError, match=r"^sqlite:elsewhere: no job store there$"):
        sources.expand("sqlite:elsewhere")
    with pytest.raises(InputError, match=r"^folder:store: no job store there$"):  # SQLite there, no folder log
        sources.expand("folder:store")
