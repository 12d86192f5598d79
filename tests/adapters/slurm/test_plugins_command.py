"""`jobaware slurm plugins`, run as an admin runs it (three runs: the CLI takes seconds to start)."""

import os
import stat

import pytest

from jobaware.adapters.slurm.plugins import render, write_plugins
from jobaware.errors import JobawareError
from tests.test_cli import run


def test_plugins_renders_both_files_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "etc"
    done = run("slurm", "plugins", "--output", out, "--cache", "/var/spool/jobaware/v.tsv", "--field", "admin_comment",
               "--stale-after", "900", "--advise-above", "0.3")
    assert done.returncode == 0, done.stderr
    assert "notice: --advise-above is ignored" in done.stderr  # the old option: the models' flag decides now
    submit, cli = (out / "job_submit.lua").read_text(), (out / "cli_filter.lua").read_text()
    assert 'JOBAWARE_CACHE_PATH = "/var/spool/jobaware/v.tsv"' in submit and 'JOBAWARE_CACHE_PATH = "/var/spool' in cli
    assert 'local FIELD = "admin_comment"' in submit and "JOBAWARE_STALE_AFTER = 900 " in cli
    assert "@" not in submit.replace("@+-", "") and stat.S_IMODE((out / "cli_filter.lua").stat().st_mode) == 0o644
    again = run("slurm", "plugins", "--output", out, "--field", "notes")  # a wrong value: a usage error
    assert again.returncode == 2 and "Invalid value for '--field'" in again.stderr and "'notes'" in again.stderr
    again = run("slurm", "plugins", "--output", out)
    assert again.returncode == 1 and again.stderr.startswith("error: ") and "give --overwrite" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1 and (out / "job_submit.lua").read_text() == submit
    write_plugins(out, force=True)
    assert 'local FIELD = "comment"' in (out / "job_submit.lua").read_text()


@pytest.mark.parametrize("options, message", [
    ({"stale_after": 0}, "--stale-after 0"), ({"cache": "verdicts.tsv"}, "expected an absolute path"),
    ({"cache": '/x"y'}, "quotes, backslashes"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(JobawareError, match=message):
        render(**options)


def test_plugin_dir_without_a_compiler_is_one_line_and_writes_nothing(tmp_path):
    out, plugins = tmp_path / "etc", tmp_path / "plugins"
    plugins.mkdir()
    done = run("slurm", "plugins", "--output", out, "--plugin-dir", plugins, env={**os.environ, "CC": "no-such-cc"})
    assert done.returncode == 1 and done.stderr.startswith("error: no C compiler found ($CC=no-such-cc)")
    assert len(done.stderr.strip().splitlines()) == 1 and not out.exists() and not list(plugins.iterdir())
