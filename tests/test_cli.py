"""The `jobaware` console script, run as a user runs it."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import KTH, NREL_CSV, ROOT, free_port, wait_for

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))


def run(*args, env=None, timeout=600):
    return subprocess.run([JOBAWARE, *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env=env)


def test_validate_exit_codes_and_reports(tmp_path):
    good = run("data", "validate", "failure", "--input", NREL_CSV)
    assert good.returncode == 0 and "all 15 expectations met on 700 rows" in good.stdout
    assert run("data", "validate", "failure", KTH, "--json").returncode == 0  # the old positional spelling
    lines = NREL_CSV.read_text().splitlines()
    lines[3] = lines[3].replace("COMPLETED", "RUNNING")
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    failed = run("data", "validate", "failure", "--input", bad, "--json")
    assert failed.returncode == 1
    report = json.loads(failed.stdout)
    (contract,) = report["contracts"]
    assert contract["failed"][0]["column"] == "state" and contract["failed"][0]["examples"] == ["RUNNING"]


def test_validate_fails_on_any_bad_record_and_lists_each(tmp_path):
    lines = NREL_CSV.read_text().splitlines()[:301]  # header + 300 jobs
    header = lines[0].split(",")
    fields = lines[10].split(",")
    fields[header.index("nodes_req")] = "-10"
    lines[10] = ",".join(fields)
    fields = lines[20].split(",")
    fields[header.index("state")] = "EXPLODED"
    lines[20] = ",".join(fields)
    corrupt = tmp_path / "corrupt.csv"
    corrupt.write_text("\n".join(lines) + "\n")
    result = run("data", "validate", "failure", "--input", corrupt)
    assert result.returncode == 1, result.stdout
    assert "2 bad record(s) of 300 read" in result.stderr
    assert f"{corrupt}:11: field 'nodes_req': negative (got '-10')" in result.stderr
    assert f"{corrupt}:21: field 'state': unknown state" in result.stderr and "EXPLODED" in result.stderr
    assert "expectations met on 298 rows" in result.stderr  # the contract's own verdict, beside the bad records


def test_errors_are_one_line_without_traceback(tmp_path):
    missing = run("data", "validate", "failure", "--input", tmp_path / "nothing.csv")
    assert missing.returncode == 1
    assert missing.stderr.strip().startswith("error:") and "no such file" in missing.stderr
    assert "Traceback" not in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    unknown = run("data", "validate", "nonesuch", "--input", NREL_CSV)  # a usage error, as every wrong value
    assert unknown.returncode == 2 and "'nonesuch' is not one of 'failure'" in unknown.stderr
    bad_param = run("pipeline", "run", "failure", "--input", NREL_CSV, "--param", "max_iter=2.7")
    assert bad_param.returncode == 2
    assert "parameters of failure: max_iter: input should be a valid integer, got 2.7" in bad_param.stderr
    negative = run("pipeline", "run", "failure", "--input", NREL_CSV, "--param", "learning_rate=-1")
    assert "learning_rate: input should be greater than 0, got -1" in negative.stderr


def test_usage_errors_name_the_option_and_exit_2(tmp_path):
    for args, message in ((("data", "synth", "hold", "--output", tmp_path / "x.log"), "Missing option '--jobs'"),
                          (("data", "synth", "hold", "--jobs", "many", "--output", tmp_path / "x.log"),
                           "Invalid value for '--jobs'"),
                          (("no-such-command",), "No such command 'no-such-command'")):
        result = run(*args)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: "), result.stderr
    assert not (tmp_path / "x.log").exists()


def test_synth_writes_jobs_and_truth(tmp_path):
    result = run("data", "synth", "failure", "--jobs", 1000, "--output", tmp_path / "s.json", "--seed", 3)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "s.json").exists() and (tmp_path / "s.truth.parquet").exists()
    again = run("data", "synth", "failure", "--jobs", 1000, "--output", tmp_path / "s.json", "--seed", 4)
    assert again.returncode == 1 and "s.json: exists; give --overwrite to replace it" in again.stderr
    old = run("data", "synth", "failure", "--jobs", 1000, "--out", tmp_path / "s.json", "--seed", 4, "--overwrite")
    assert old.returncode == 0 and "notice: --out is now --output" in old.stderr, old.stderr


def test_predict_swf_and_models_list_whole_when_piped(champion, tmp_path):
    out = tmp_path / "preds.jsonl"
    result = run("predict", "failure", "--input", KTH, "--output", out)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 28_476 and rows[0]["job_id"] == 15 and 0 <= rows[0]["p_fail"] <= 1
    assert all(r["likely_fail"] == (r["p_fail"] >= r["threshold"]) for r in rows) and 0 < rows[0]["threshold"] < 1
    listed = json.loads(run("models", "list", "--json").stdout)
    assert any(r["aliases"] and "champion" in r["aliases"] for r in listed)
    table = run("models", "list", env={**os.environ, "COLUMNS": "40"}).stdout  # piped, a narrow terminal set
    assert "…" not in table
    for row in listed:  # every identifier whole, whatever other tests registered meanwhile
        assert row["model"] in table and row["run_id"] in table and (not row["aliases"] or row["aliases"] in table)


def test_promote_refuses_an_unknown_version(champion):
    result = run("models", "promote", "failure", "999")
    assert result.returncode == 1 and "jobaware-failure has no version 999" in result.stderr


def test_reading_commands_never_create_a_store(tmp_path):
    moved = tmp_path / "moved-away"
    env = {**os.environ, "JOBAWARE_HOME": str(moved)}
    env.pop("MLFLOW_TRACKING_URI", None)
    for command in (("models", "list"), ("models", "promote", "failure", "1"), ("models", "rollback", "failure")):
        result = run(*command, env=env)
        assert result.returncode == 1 and f"no MLflow store at {moved / 'mlflow.db'}" in result.stderr
    assert not moved.exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_pipeline_run_shows_a_line_per_step_and_the_metrics_of_its_version(tmp_path):
    from jobaware.failure.synth import write

    env = {**os.environ, "JOBAWARE_HOME": str(tmp_path / "home")}
    env.pop("MLFLOW_TRACKING_URI", None)
    data = tmp_path / "jobs.csv"
    write(data, 6_000, "csv", seed=3)
    result = run("pipeline", "run", "failure", "--input", data, "--param", "max_iter=40", env=env, timeout=900)
    assert result.returncode == 0, result.stderr
    steps = [line.split()[1] for line in result.stderr.splitlines() if line.startswith("✓")]
    assert steps == ["ingest", "validate", "train", "register", "promote"]
    assert "KFP Executor" not in result.stderr + result.stdout and "RuntimeWarning" not in result.stderr
    assert len(result.stderr.splitlines()) < 15 and len(result.stdout.splitlines()) < 20
    assert "jobaware-failure version 1 (champion)" in result.stdout and "Bayes-optimal roc_auc" in result.stdout
    log = next((tmp_path / "home" / "logs").glob("pipeline-failure-*.log"))
    assert str(log) in result.stderr and "KFP Executor" in log.read_text()
    as_json = run("models", "list", "--json", env=env)
    assert [r["version"] for r in json.loads(as_json.stdout)] == ["1"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_stopping_serve_with_sigterm_leaves_no_server_behind(tmp_path):
    env = {**os.environ, "JOBAWARE_HOME": str(tmp_path / "home")}
    port = free_port()
    process = subprocess.Popen([JOBAWARE, "serve", "failure", "--port", str(port)], env=env,
                               stdout=open(tmp_path / "serve.log", "wb"), stderr=subprocess.STDOUT)
    try:
        wait_for(f"http://127.0.0.1:{port}/livez", 180, process)
        process.send_signal(signal.SIGTERM)  # as kill, systemd or a harness stops it: the process itself
        process.wait(60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _listening(port):
            time.sleep(0.5)
        assert not _listening(port), "a server still holds the port"
        assert _started_with_home(tmp_path / "home") == [], "processes left behind"
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_stopping_a_pipeline_run_with_sigterm_stops_its_steps(tmp_path):
    from jobaware.failure.synth import write

    data = tmp_path / "jobs.csv"
    write(data, 6000, "csv", 3)
    home = tmp_path / "home"
    process = subprocess.Popen([JOBAWARE, "pipeline", "run", "failure", "--input", data],
                               env={**os.environ, "JOBAWARE_HOME": str(home)}, stdout=subprocess.DEVNULL,
                               stderr=open(tmp_path / "run.err", "wb"))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("Executing task" in p.read_text(errors="replace")
                                                      for p in (home / "logs").glob("pipeline-*.log")):
            time.sleep(0.5)
        assert process.poll() is None, (tmp_path / "run.err").read_text()
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _started_with_home(home):
            time.sleep(0.5)
        assert _started_with_home(home) == [], "pipeline steps left running"
    finally:
        if process.poll() is None:
            process.kill()


def _started_with_home(home: Path) -> list[int]:
    """Processes whose environment names this JOBAWARE_HOME (the server and any worker it started)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"JOBAWARE_HOME={home}".encode() in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# ---------------------------------------------------------------- the capabilities' own commands
def test_hold_parse_and_hold_label_on_the_real_logs(tmp_path):
    logs = ROOT / "jobaware" / "data" / "real" / "condor" / "mldag_standalone"
    out = tmp_path / "events.parquet"
    parsed = run("hold", "parse", "--input", logs, "--output", out, "--json")
    assert parsed.returncode == 0, parsed.stderr
    summary = json.loads(parsed.stdout)
    assert summary["events"] > 0 and summary["bad_records"] == 0 and out.is_file()
    labelled = run("hold", "label", "--input", logs / "metl_12636334.log", "--json")
    assert labelled.returncode == 0, labelled.stderr
    assert [h["label"] for h in json.loads(labelled.stdout)] == ["remove"] * 5  # five holds, then aborted
    missing = run("hold", "label", "--input", tmp_path / "nothing.log")
    assert missing.returncode == 1 and missing.stderr.startswith("error:") and "Traceback" not in missing.stderr


def test_similarity_rank_ranks_the_real_pool_with_the_job_first():
    codings = ROOT / "jobaware" / "data" / "real" / "mistral" / "dkrz_mistral_job_codings_binary.csv"
    result = run("similarity", "rank", "18035492", "--input", codings, "--top", "3", "--json")
    assert result.returncode == 0, result.stderr
    ranking = json.loads(result.stdout)
    assert len(ranking) == 3 and ranking[0]["jobid"] == 18035492 and ranking[0]["similarity"] == 1.0
    wrong = run("similarity", "rank", "18035492", "--input", codings, "--algorithm", "q-lev")
    assert wrong.returncode == 1 and "quantised" in wrong.stderr.lower() and "Traceback" not in wrong.stderr


def test_classify_without_a_champion_says_what_to_run(tmp_path):
    env = {**os.environ, "JOBAWARE_HOME": str(tmp_path / "home")}
    env.pop("MLFLOW_TRACKING_URI", None)
    result = run("resource", "classify", "--input", ROOT / "jobaware" / "data" / "real" / "scripts" / "labels.csv", env=env)
    assert result.returncode == 1 and "no MLflow store" in result.stderr and "Traceback" not in result.stderr


def test_the_old_spellings_of_the_capability_commands_still_run_with_a_notice(tmp_path):
    """`jobaware classify|similar|events parse` became `jobaware resource classify|similarity rank|hold parse`; the
    old spellings stay for one release, hidden from the help, each naming its new spelling."""
    codings = ROOT / "jobaware" / "data" / "real" / "mistral" / "dkrz_mistral_job_codings_binary.csv"
    similar = run("similar", "18035492", "--data", codings, "--top", "3", "--json")
    assert similar.returncode == 0 and json.loads(similar.stdout)[0]["jobid"] == 18035492, similar.stderr
    assert "notice: this command is now `jobaware similarity rank`" in similar.stderr
    assert "notice: --data is now --input" in similar.stderr
    parsed = run("events", "parse", ROOT / "jobaware" / "data" / "real" / "condor" / "mldag_standalone", "--out",
                 tmp_path / "events.parquet", "--json")
    assert parsed.returncode == 0 and "now `jobaware hold parse`" in parsed.stderr, parsed.stderr
    env = {**os.environ, "JOBAWARE_HOME": str(tmp_path / "home")}
    env.pop("MLFLOW_TRACKING_URI", None)
    classify = run("classify", ROOT / "jobaware" / "data" / "real" / "scripts" / "labels.csv", env=env)
    assert classify.returncode == 1 and "now `jobaware resource classify`" in classify.stderr
    listed = run("--help").stdout
    assert all(f"│ {old} " not in listed for old in ("classify", "similar", "events"))
    assert all(f"│ {key} " in listed for key in ("failure", "hold", "resource", "similarity"))


def test_stopping_the_demo_services_survives_a_second_ctrl_c(monkeypatch):
    """`make run`'s services are stopped, every one, even when Ctrl-C comes again while they are being stopped (as
    it does when `make` or `timeout` forwards the first)."""
    from jobaware import cli

    services = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
                for _ in range(3)]
    real_killpg = os.killpg

    def killpg_then_ctrl_c(group, sig):
        real_killpg(group, sig)
        os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, after the first service was signalled

    monkeypatch.setattr(os, "killpg", killpg_then_ctrl_c)
    try:
        try:
            cli.stop_services(services, grace=10)
        except KeyboardInterrupt:
            pytest.fail("the second Ctrl-C cut the stopping short")
        ended = [service.poll() for service in services]
    finally:
        for service in services:
            if service.poll() is None:
                service.kill()
                service.wait(5)
    assert ended == [-signal.SIGTERM] * len(services)


def _with_markup(tmp_path: Path) -> Path:
    """A folder holding the NREL sample's first 200 jobs, one named `[/bold]` and one with the state `[red]`."""
    lines = NREL_CSV.read_text().splitlines()[:201]
    header = lines[0].split(",")
    for row, column, value in ((5, "name", "[/bold]"), (9, "state", "[red]")):
        fields = lines[row].split(",")
        fields[header.index(column)] = value
        lines[row] = ",".join(fields)
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "jobs.csv").write_text("\n".join(lines) + "\n")
    (folder / "README.md").write_text("not a job file: a folder is read for its job files only\n")
    return folder


def test_user_text_is_never_read_as_markup_and_folders_are_sources(tmp_path):
    folder = _with_markup(tmp_path)
    result = run("data", "validate", "failure", "--input", folder)
    assert result.returncode == 1 and "Traceback" not in result.stderr and "unexpected" not in result.stderr
    assert "jobs.csv:10: field 'state'" in result.stderr and "'[red]'" in result.stderr
    glob = run("data", "validate", "failure", "--input", tmp_path / "*" / "*.csv", "--json")
    assert json.loads(glob.stdout)["read"]["bad_rows"] == 1


def test_refused_commands_touch_nothing(tmp_path):
    keep = tmp_path / "keep.csv"
    keep.write_text("precious\n")
    refused = run("data", "synth", "failure", "--jobs", 5, "--output", keep, "--overwrite")
    assert refused.returncode == 2 and "--jobs must be between" in refused.stderr
    assert keep.read_text() == "precious\n" and sorted(p.name for p in tmp_path.iterdir()) == ["keep.csv"]
    events = run("hold", "parse", "--input", NREL_CSV, "--output", keep, "--overwrite")  # not an event log
    assert events.returncode == 1 and "no HTCondor event read" in events.stderr
    assert keep.read_text() == "precious\n" and sorted(p.name for p in tmp_path.iterdir()) == ["keep.csv"]
    budget = run("pipeline", "run", "failure", "--input", tmp_path / "missing.csv", "--budget", 2)
    assert budget.returncode == 2 and "Invalid value for '--budget'" in budget.stderr


def test_predict_takes_a_folder_prints_data_as_it_is_and_writes_to_stdout(champion, tmp_path):
    folder = _with_markup(tmp_path)
    out = tmp_path / "preds.jsonl"
    result = run("predict", "failure", "--input", folder, "--output", out)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "wrote 199 predictions" in result.stdout
    assert "1 bad record(s) not predicted" in result.stderr and "'[red]'" in result.stderr
    piped = run("predict", "failure", "--input", folder / "jobs.csv", "--output", "-")
    assert piped.stdout.splitlines() == out.read_text().splitlines()


# ---------------------------------------------------------------- issue 36: what a new user met, each once more
def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<folder>" for p in sorted(folder.rglob("*"))}


def test_synth_never_replaces_a_folder_and_a_refusal_leaves_no_folder_behind(tmp_path):
    """`data synth --out DIR` deleted DIR and its file; a refused synth left `a/b/c` created."""
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("precious\n")
    before = _tree(tmp_path)
    for extra in ([], ["--overwrite"]):
        result = run("data", "synth", "failure", "--jobs", 1000, "--output", taken, *extra)
        assert result.returncode == 1 and "a folder is there" in result.stderr and _tree(tmp_path) == before
    deep = run("data", "synth", "failure", "--jobs", 5, "--output", tmp_path / "a" / "b" / "c" / "x.csv")
    assert deep.returncode == 2 and not (tmp_path / "a").exists()


def test_a_refused_follow_leaves_no_log_file(tmp_path):
    """`hold follow --audit DIR` was refused but left `DIR.log`."""
    log = ROOT / "jobaware" / "data" / "real" / "condor" / "mldag_standalone" / "metl_12636334.log"
    folder = tmp_path / "audit"
    folder.mkdir()
    result = run("hold", "follow", "--input", log, "--audit", folder, "--once")
    assert result.returncode == 1 and "is a folder" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit"] and not any(folder.iterdir())


def test_predict_with_nothing_readable_keeps_the_output_and_says_why(tmp_path):
    """`predict failure` on records none of which was readable replaced an existing output with an empty file."""
    existing = tmp_path / "predictions.jsonl"
    existing.write_text('{"kept": true}\n')
    unreadable = tmp_path / "jobs.csv"
    unreadable.write_text("job_id,user\n" + "".join(f"x{i},u\n" for i in range(5)))
    for extra in ([], ["--overwrite"]):
        result = run("predict", "failure", "--input", unreadable, "--output", existing, *extra)
        assert result.returncode == 1 and existing.read_text() == '{"kept": true}\n', result.stderr
        assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert "exists; give --overwrite" in run("predict", "failure", "--input", unreadable, "--output",
                                             existing).stderr
    read = run("predict", "failure", "--input", unreadable, "--output", existing, "--overwrite")
    assert "jobs.csv" in read.stderr and "no MLflow store" not in read.stderr  # read first: the model never loaded


@pytest.mark.parametrize("content", [b"", bytes(range(256)) * 12])
def test_empty_or_random_event_logs_are_refused(tmp_path, content):
    """`data validate hold` and `hold label` passed a 0-byte or random file; `hold follow` counted 0 bad records."""
    log = tmp_path / "EventLog"
    log.write_bytes(content)
    for args in (("data", "validate", "hold", "--input", log), ("hold", "label", "--input", log),
                 ("hold", "follow", "--input", log, "--audit", tmp_path / "holds.jsonl", "--once")):
        result = run(*args)
        assert result.returncode == 1 and result.stderr.startswith("error: ") and "EventLog" in result.stderr, args
        assert len(result.stderr.splitlines()) == 1, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["EventLog"]


def test_follow_refuses_text_with_no_whole_event(tmp_path):
    log = tmp_path / "EventLog"
    log.write_text("jobid,state\n1,RUNNING\n")
    result = run("hold", "follow", "--input", log, "--audit", tmp_path / "holds.jsonl", "--once")
    assert result.returncode == 1 and "no whole HTCondor event" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["EventLog"]


def test_export_of_a_store_that_is_none_writes_nothing(tmp_path):
    """`failure export --store` (formerly `slurm export`) of a missing folder or a regular file exited 0 with a
    header-only CSV."""
    plain = tmp_path / "plain.txt"
    plain.write_text("not a store\n")
    for store in (tmp_path / "missing", plain):
        result = run("failure", "export", "--store", store, "--output", tmp_path / "jobs.csv")
        assert result.returncode == 1 and "not a job store" in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.txt"]


def test_classify_refuses_random_bytes():
    """`resource classify` called random bytes a script of class `other` with probability 1."""
    with tempfile.TemporaryDirectory() as folder:
        noise = Path(folder) / "job.sh"
        noise.write_bytes(bytes(range(256)) * 12)
        result = run("resource", "classify", "--input", noise)
    assert result.returncode == 1 and "binary data, not text" in result.stderr


def test_a_huge_line_random_bytes_and_a_place_print_as_short_plain_text(tmp_path):
    """A 10 MB header printed 10,000,074 bytes of error; random bytes reached the terminal raw; `file.csv:100:` printed
    as an emoji."""
    huge = tmp_path / "huge.csv"
    huge.write_bytes(b"job_id" + b"x" * (10 << 20) + b"\n1\n")
    result = run("data", "validate", "failure", "--input", huge)
    assert result.returncode == 1 and len(result.stderr) < 400 and "huge.csv" in result.stderr
    noisy = tmp_path / "noisy.csv"
    noisy.write_bytes(b"job\x1b[31m_id,\x07user\n1,2\n")
    shown = run("data", "validate", "failure", "--input", noisy).stderr
    assert "\x1b" not in shown and "\x07" not in shown and "\\x1b" in shown
    lines = NREL_CSV.read_text().splitlines()
    fields = lines[100].split(",")
    fields[lines[0].split(",").index("state")] = "EXPLODED"
    lines[100] = ",".join(fields)
    hundred = tmp_path / "file.csv"
    hundred.write_text("\n".join(lines) + "\n")
    report = run("data", "validate", "failure", "--input", hundred).stderr
    assert "file.csv:101:" in report and "\U0001f4af" not in report
    emoji = tmp_path / "e.csv"
    emoji.write_text("job_id:100:\n")
    assert ":100:" in run("data", "validate", "failure", "--input", emoji).stderr


def test_json_errors_are_json_and_the_version_is_printed(tmp_path):
    result = run("data", "validate", "failure", "--input", tmp_path / "gone.csv", "--json")
    assert result.returncode == 1 and result.stderr == ""
    assert json.loads(result.stdout) == {"error": f"{tmp_path / 'gone.csv'}: no such file or folder", "exit_code": 1}
    usage = run("runs", "list", "--limit", 0, "--json")
    assert usage.returncode == 2 and json.loads(usage.stdout)["exit_code"] == 2
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("jobaware ")


def test_every_help_has_an_example_and_shows_flags_as_flags():
    for args in (("--help",), ("predict", "--help"), ("models", "list", "--help"), ("hold", "follow", "--help")):
        shown = run(*args, env={**os.environ, "COLUMNS": "120"}).stdout
        assert "Example: jobaware" in shown and "<bool>" not in shown, shown


def test_an_empty_or_binary_file_among_several_is_one_line_of_the_answer(tmp_path):
    """The contract's 'reading nothing is not success' holds for what a command reads together (issue 51): an empty or
    binary file among good ones is one bad record of the answer, named and why; alone, or with only bad ones, it is
    the one-line refusal it was."""
    good = tmp_path / "good.csv"
    good.write_text("\n".join(NREL_CSV.read_text().splitlines()[:51]) + "\n")
    empty, noise = tmp_path / "empty.csv", tmp_path / "noise.csv"
    empty.write_bytes(b"")
    noise.write_bytes(bytes(range(256)) * 12)
    checked = run("data", "validate", "failure", "--input", good, "--input", empty, "--input", noise, "--json")
    assert checked.returncode == 1, checked.stderr  # validation calls no data valid that held a bad file
    read = json.loads(checked.stdout)["read"]
    assert read["rows"] == 50 and read["bad_rows"] == 2, read
    assert f"{empty}: empty file" in read["problems"] and any(p.startswith(f"{noise}: binary data, not text")
                                                              for p in read["problems"])
    codings = ROOT / "jobaware" / "data" / "real" / "mistral" / "dkrz_mistral_job_codings_binary.csv"
    ranked = run("similarity", "rank", "18035492", "--input", codings, "--input", empty, "--top", "2", "--json")
    assert ranked.returncode == 0 and json.loads(ranked.stdout)[0]["jobid"] == 18035492, ranked.stderr
    assert f"warning: 1 bad record(s) left out of the pool; first: {empty}: empty file" in ranked.stderr
    for args in (("data", "validate", "failure", "--input", empty, "--input", noise),
                 ("similarity", "rank", "18035492", "--input", empty, "--input", noise)):
        refused = run(*args)
        assert refused.returncode == 1 and refused.stderr == f"error: {empty}: empty file\n", refused.stderr


@pytest.mark.timeout(300)
def test_an_unreachable_mlflow_is_one_line_within_seconds(tmp_path):
    """Issue 51: with MLFLOW_TRACKING_URI at a closed port, `models list` was silent for 255 s (MLflow's 7 retries)
    before its one line. Now a person's command checks the server answers at all, within seconds, and bounds MLflow's
    own retries and timeout where the site did not set them. A closed port, and a socket that takes the connection
    and never answers (as a black-holed server does)."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel takes connections; no one ever answers
    closed = free_port()
    env = {**os.environ, "JOBAWARE_HOME": str(tmp_path / "home"), "JOBAWARE_CONFIG": "/nonexistent"}
    try:
        for uri, why in ((f"http://127.0.0.1:{closed}", "cannot connect"),
                         (f"http://jobaware:secret@127.0.0.1:{silent.getsockname()[1]}", "gave no answer within 3 s")):
            for args in (("models", "list"), ("runs", "list"), ("models", "promote", "failure", "1")):
                began = time.monotonic()
                result = run(*args, env={**env, "MLFLOW_TRACKING_URI": uri}, timeout=120)
                seconds = time.monotonic() - began
                assert result.returncode == 1 and result.stdout == "", (args, result.stdout)
                assert len(result.stderr.splitlines()) == 1 and why in result.stderr, (args, result.stderr)
                assert f"MLflow at {uri.replace(':secret@', ':***@')} (MLFLOW_TRACKING_URI) is unreachable" \
                    in result.stderr and "secret" not in result.stderr
                assert seconds < 10, f"{args}: {seconds:.1f} s"  # a generous budget for a loaded 2-core machine
    finally:
        silent.close()


def test_a_command_bounds_mlflow_waits_its_steps_and_services_keep_mlflow_own(monkeypatch):
    """What `fail_fast` sets a person's command waits seconds with; a value the site set wins; the pipeline steps and
    services it starts get MLflow's own patience back (a tracking server's restart must not fail a training run)."""
    from jobaware import config

    environ = {name: value for name, value in os.environ.items() if name not in config.MLFLOW_WAITS}
    monkeypatch.setattr(os, "environ", {**environ, "MLFLOW_HTTP_REQUEST_TIMEOUT": "300"})  # as a site set it
    monkeypatch.setattr(config, "_bounded", set())
    monkeypatch.setattr(config, "_waits", {"bounded": False})
    config.fail_fast()
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2" and os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "300"
    steps = config.patient(dict(os.environ))
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in steps and "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR" not in steps
    assert steps["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "300"
