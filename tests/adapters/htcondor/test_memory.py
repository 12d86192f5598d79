"""What HTCondor's events say of a job's memory, and the RequestMemory a job held for memory is raised to."""

from __future__ import annotations

from jobaware.adapters.htcondor.memory import condor_memory, condor_request_memory

# the wording of HTCondor's cgroup memory hold (code 34); none of the bundled real logs holds a job for memory
HELD = ("012 (254037.000.000) 2024-05-01 17:41:22 Job was held.\n\tError from slot: Job has gone over cgroup "
        "memory limit of 3072 megabytes. Peak usage: 3070 megabytes.  Consider resubmitting with a higher "
        "request_memory.\n\tCode 34 Subcode 0\n...\n")


def test_a_memory_hold_names_its_limit_and_peak():
    assert condor_memory(HELD) == {"request": 3072, "peak": 3070}


def test_terminate_and_image_size_events_give_usage_and_request():
    text = ("006 (1.0.0) 2024-01-01 00:00:00 Image size of job updated: 9\n\t188  -  MemoryUsage of job (MB)\n...\n"
            "005 (1.0.0) 2024-01-01 01:00:00 Job terminated.\n\t   Memory (MB)          :      301      256       256\n")
    assert condor_memory(text) == {"request": 256, "peak": 301}
    assert condor_memory("000 (1.0.0) 2024-01-01 00:00:00 Job submitted\n") == {}


def test_a_job_held_again_is_at_its_last_limit_with_its_largest_peak():
    again = HELD.replace("3072 megabytes", "3684 megabytes").replace("3070 megabytes", "3500 megabytes")
    assert condor_memory(HELD + again) == {"request": 3684, "peak": 3500}
    assert condor_memory(HELD + HELD.replace("3070 megabytes", "2000 megabytes")) == {"request": 3072, "peak": 3070}


def test_the_new_request_memory_is_the_peak_with_margin_up_to_the_cap():
    assert condor_request_memory(3072, 3070, margin=0.2, cap_mb=16_384) == 3684
    assert condor_request_memory(3072, 3070, margin=0.0, cap_mb=16_384) is None  # the peak alone is no more
    assert condor_request_memory(3072, 3070, margin=0.5, cap_mb=4096) == 4096
    assert condor_request_memory(4096, 3070, margin=0.2, cap_mb=4096) is None  # no more to give: no action
    assert condor_request_memory(None, 3070, margin=0.2, cap_mb=4096) == 3684
    assert condor_request_memory(3072, None, margin=0.2, cap_mb=4096) is None
