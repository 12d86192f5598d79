"""The local runner's reading of kfp.local's log: one line per step, parallel iterations numbered, the steps' own
progress lines, and the CPU each step took."""

from jobaware.pipelines.runner import StepEvents, children_cpu


def test_parallel_iterations_of_a_step_are_numbered_and_each_finish_is_its_own():
    events = []
    steps = StepEvents(lambda event: events.append((event.kind, event.step)))
    for line in ("13:52:34 - INFO - Executing task 'sweep-hold'",
                 "13:52:41 - INFO - Task 'sweep-hold' finished with status SUCCESS",
                 "13:52:41 - INFO - Executing task 'trial-hold'",
                 "13:52:41 - INFO - Executing task 'trial-hold'",
                 "[KFP Executor] unrelated output",
                 "    jobaware-progress: 3/10 epochs",  # two trials run: whose it is cannot be told
                 "13:52:49 - INFO - Task 'trial-hold' finished with status SUCCESS",
                 "13:52:49 - INFO - Executing task 'trial-hold'",
                 "13:52:50 - INFO - Task 'trial-hold' finished with status FAILURE",
                 "13:52:55 - INFO - Task 'trial-hold' finished with status SUCCESS"):
        steps.feed(line)
    assert events == [("start", "sweep-hold"), ("SUCCESS", "sweep-hold"),
                      ("start", "trial-hold"), ("start", "trial-hold #2"), ("SUCCESS", "trial-hold"),
                      ("start", "trial-hold #3"), ("FAILURE", "trial-hold #2"), ("SUCCESS", "trial-hold #3")]
    assert steps.failed == ["trial-hold #2"]


def test_a_step_reports_its_progress_and_the_cpu_its_processes_used():
    events, reaped = [], iter([1.0, 1.5, 9.5])
    steps = StepEvents(events.append, lambda: next(reaped))
    for line in ("10:00:00 - INFO - Executing task 'train'",
                 "    jobaware-progress: 0/300 iterations",
                 "    jobaware-progress: 120/300 iterations",
                 "10:00:09 - INFO - Task 'train' finished with status SUCCESS",
                 "10:00:09 - INFO - Executing task 'register'",
                 "10:00:12 - INFO - Task 'register' finished with status SUCCESS"):
        steps.feed(line)
    progress = [e.progress for e in events if e.kind == "progress"]
    assert progress == [(0, 300, "iterations"), (120, 300, "iterations")]
    assert [(e.step, e.cpu) for e in events if e.kind == "SUCCESS"] == [("train", 0.5), ("register", 8.0)]


def test_the_cpu_of_finished_children_is_read_from_proc():
    import os
    import subprocess
    import sys

    before = children_cpu(os.getpid())
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    assert children_cpu(os.getpid()) > before


def test_an_iteration_whose_end_kfp_local_does_not_log_ends_when_the_next_task_starts():
    """kfp.local logged the end of one of two parallel trials only; the other ended before `best-hold` started."""
    events, reaped = [], iter([0.0, 5.0, 12.0, 13.0])
    steps = StepEvents(events.append, lambda: next(reaped))
    for line in ("10:00:00 - INFO - Executing task 'trial-hold'",
                 "10:00:00 - INFO - Executing task 'trial-hold'",
                 "10:01:00 - INFO - Task 'trial-hold' finished with status SUCCESS",
                 "10:01:01 - INFO - Executing task 'best-hold'",
                 "10:01:09 - INFO - Task 'best-hold' finished with status SUCCESS"):
        steps.feed(line)
    ended = [(e.step, e.cpu) for e in events if e.kind == "SUCCESS"]
    assert ended == [("trial-hold", 5.0), ("trial-hold #2", 7.0), ("best-hold", 1.0)]
    assert not any(steps.running.values())


def test_docker_steps_run_as_the_caller_and_change_no_owner_or_mode_on_the_host(tmp_path, monkeypatch):
    """`pipeline run --runner docker` as root chowned JOBAWARE_HOME (and the store's folder) to the image's uid 10001
    on the host. Now each step runs as the caller's uid and gid, and the host's files keep their owner and mode."""
    import os

    from jobaware.pipelines.runner import _container_args

    home, data = tmp_path / "home", tmp_path / "data.csv"
    (home / "mlruns" / "1").mkdir(parents=True)
    (home / "mlflow.db").write_text("")
    (home / "mlruns" / "1" / "meta.yaml").write_text("")
    (home / "mlruns" / "1").chmod(0o750)
    data.write_text("job_id\n1\n")
    monkeypatch.setenv("JOBAWARE_HOME", str(home))

    def owners():
        return {p: (p.lstat().st_uid, p.lstat().st_gid, p.lstat().st_mode) for p in [home, *home.rglob("*"), data]}

    before = owners()
    args = _container_args({"tracking_uri": f"sqlite:///{home / 'mlflow.db'}", "data": str(data)}, home / "kfp")
    assert args["user"] == f"{os.getuid()}:{os.getgid()}"
    assert {m["Target"]: m["ReadOnly"] for m in args["mounts"]} == {str(home): False, str(data): True}
    after = owners()
    assert {p: after[p] for p in before} == before


def test_a_steps_arguments_reach_it_as_given_even_when_they_hold_python3(tmp_path):
    """kfp.local put its Python in place of every `python3` of a step's command line, arguments included: a path under
    a venv's lib/python3.11/ reached the step broken (the installed wheel's bundled data, tests/test_install.py).
    Run here in a child process: kfp.local's setup is process-wide."""
    import subprocess
    import sys

    given = "/opt/site/venv/lib/python3.11/site-packages/jobaware/data/real/python3 x.csv"
    code = f"""
import sys
from kfp import dsl
from jobaware.pipelines import runner

@dsl.component(base_image="python:3.11", install_kfp_package=False)
def echo(text: str) -> str:
    return text

@dsl.pipeline
def round_trip(text: str) -> str:
    return echo(text=text).output

runner.init_subprocess({str(tmp_path / "root")!r})
print("ECHO", round_trip(text={given!r}).output)
"""
    (tmp_path / "round_trip.py").write_text(code)  # kfp reads a component's source from its file
    done = subprocess.run([sys.executable, "round_trip.py"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"ECHO {given}\n" in done.stdout
