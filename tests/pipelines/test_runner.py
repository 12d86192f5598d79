"""The local runner's reading of kfp.local's log: one line per step, parallel iterations numbered."""

from pipelines.runner import StepEvents


def test_parallel_iterations_of_a_step_are_numbered_and_each_finish_is_its_own():
    events = []
    steps = StepEvents(lambda kind, step, seconds: events.append((kind, step)))
    for line in ("13:52:34 - INFO - Executing task 'sweep-hold'",
                 "13:52:41 - INFO - Task 'sweep-hold' finished with status SUCCESS",
                 "13:52:41 - INFO - Executing task 'trial-hold'",
                 "13:52:41 - INFO - Executing task 'trial-hold'",
                 "[KFP Executor] unrelated output",
                 "13:52:49 - INFO - Task 'trial-hold' finished with status SUCCESS",
                 "13:52:49 - INFO - Executing task 'trial-hold'",
                 "13:52:50 - INFO - Task 'trial-hold' finished with status FAILURE",
                 "13:52:55 - INFO - Task 'trial-hold' finished with status SUCCESS"):
        steps.feed(line)
    assert events == [("start", "sweep-hold"), ("SUCCESS", "sweep-hold"),
                      ("start", "trial-hold"), ("start", "trial-hold #2"), ("SUCCESS", "trial-hold"),
                      ("start", "trial-hold #3"), ("FAILURE", "trial-hold #2"), ("SUCCESS", "trial-hold #3")]
    assert steps.failed == ["trial-hold #2"]
