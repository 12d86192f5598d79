"""`jobaware store copy` moves a site from the folder log to SQLite to Redis and back, losing nothing."""

import subprocess
import sys
from pathlib import Path

from jobaware.store import open_store
from tests.conftest import ROOT
from tests.jobaware.store.test_store import contents, play

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


def copy(source: str, destination: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([JOBAWARE, "store", "copy", "--input", source, "--output", destination, *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_a_site_goes_from_folder_to_sqlite_to_redis_and_back_losing_nothing(tmp_path, fresh_redis):
    folder, sqlite, back = f"folder:{tmp_path / 'old'}", str(tmp_path / "new"), f"folder:{tmp_path / 'back'}"
    with open_store(folder) as store:
        play(store)
        original = contents(store)
    for source, destination in ((str(tmp_path / "old"), sqlite), (sqlite, fresh_redis), (fresh_redis, back)):
        done = copy(source, destination)
        assert done.returncode == 0, done.stderr
        assert "copied 4 jobs, 4 predictions, 2 checkpoints and 3 events" in done.stdout
        assert f"copying 4 jobs from {source} to {destination}" in done.stderr
        with open_store(destination) as store:
            assert contents(store) == original
    # a second copy into a store that holds something: refused unless told, and with --merge nothing changes
    refused = copy(sqlite, fresh_redis)
    assert refused.returncode == 1 and refused.stderr.strip().splitlines() == [
        f"error: store copy: {fresh_redis} is not empty (4 jobs); give --merge to copy into it anyway"]
    for source, destination in ((sqlite, fresh_redis), (fresh_redis, back), (str(tmp_path / "old"), sqlite)):
        assert copy(source, destination, "--merge").returncode == 0
        with open_store(destination) as store:
            assert contents(store) == original
    same = copy(sqlite, f"sqlite:{sqlite}")
    assert same.returncode == 1 and "are the same store" in same.stderr
