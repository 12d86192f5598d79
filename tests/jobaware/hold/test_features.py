"""Tensors and features: the frame and job rules, and that nothing after a hold reaches its features."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jobaware.hold import features as F
from jobaware.hold.labels import decisions
from jobaware.hold.reader import read_events

LOG = """000 (6.000.000) 2025-05-01 09:00:00 Job submitted from host: <1.2.3.4:9618>
...
000 (3.000.000) 2025-05-01 09:00:00 Job submitted from host: <1.2.3.4:9618>
...
005 (3.000.000) 2025-05-01 09:30:00 Job terminated.
\t(1) Normal termination (return value 0)
...
000 (1.000.000) 2025-05-01 10:00:00 Job submitted from host: <1.2.3.4:9618>
...
001 (1.000.000) 2025-05-01 10:02:00 Job executing on host: <1.2.3.5:9618>
...
000 (2.000.000) 2025-05-01 10:05:00 Job submitted from host: <1.2.3.4:9618>
...
028 (2.000.000) 2025-05-01 10:05:00 Job ad information event triggered.
Owner = "x"
...
040 (2.000.000) 2025-05-01 10:06:00 Started transferring input files
...
001 (2.000.000) 2025-05-01 10:07:00 Job executing on host: <1.2.3.6:9618>
...
000 (4.000.000) 2025-05-01 10:08:30 Job submitted from host: <1.2.3.4:9618>
...
012 (1.000.000) 2025-05-01 10:10:00 Job was held.
\tTransfer input files failure
\tCode 13 Subcode 256
...
001 (4.000.000) 2025-05-01 10:10:00 Job executing on host: <1.2.3.7:9618>
...
000 (5.000.000) 2025-05-01 10:11:00 Job submitted from host: <1.2.3.4:9618>
...
"""


@pytest.fixture()
def small(tmp_path):
    path = tmp_path / "small.log"
    path.write_text(LOG)
    events, _ = read_events([str(path)])
    return events, decisions(events)


def test_frames_run_oldest_first_carry_states_forward_and_start_at_zero(small):
    events, table = small
    index = F.build_index(events)
    holds = F.locate(index, table)
    jobs = F.co_jobs(index, holds, 5, 12 * 60, seed=0)
    clusters = [int(index.job_ids[j, 0]) if j >= 0 else None for j in jobs[0]]
    # held job first; then most recently active: 4 (10:08:30), 2 (10:07), 6 (idle since 09:00); 3 ended before
    # the window (09:58) and 5 came after the hold
    assert clusters == [1, 4, 2, 6, None]
    states = F.frame_states(index, holds, jobs, 12, 60)[0]  # frames end 09:59, 10:00, ..., 10:10
    submit, execute, transfer, held = 0 + 1, 1 + 1, 40 + 1, 12 + 1
    assert states[:, 0].tolist() == [0, submit, submit, execute, execute, execute, execute, execute, execute,
                                      execute, execute, held]
    assert states[:, 1].tolist() == [0] * 10 + [submit, submit]  # its 001 at 10:10:00 was written after the hold
    assert states[:, 2].tolist() == [0] * 6 + [submit, transfer, execute, execute, execute, execute]  # 028 keeps 000
    assert states[:, 3].tolist() == [submit] * 12
    assert states[:, 4].tolist() == [0] * 12
    hot = F.one_hot(states[None])
    assert hot.shape == (1, F.E, 12, 5)
    assert (hot.sum(axis=1)[0] == (states > 0)).all()
    assert (hot[0].argmax(axis=0) + 1)[states > 0].tolist() == states[states > 0].tolist()


def test_jobs_of_the_same_second_are_ordered_by_the_seeded_hash_not_the_log_order(tmp_path):
    burst = [f"000 (70.{p:03d}.000) 2025-05-01 10:00:00 Job submitted from host: <1.2.3.4:9618>\n...\n"
             for p in range(8)]
    hold = ("000 (9.000.000) 2025-05-01 09:59:00 Job submitted from host: <1.2.3.4:9618>\n...\n"
            "012 (9.000.000) 2025-05-01 10:01:00 Job was held.\n\tx\n\tCode 1 Subcode 0\n...\n")
    chosen = {}
    for name, order in (("a", range(8)), ("b", [5, 2, 7, 0, 3, 6, 1, 4])):
        path = tmp_path / f"{name}.log"
        path.write_text(hold.split("012")[0] + "".join(burst[i] for i in order) + "012" + hold.split("012")[1])
        events, _ = read_events([str(path)])
        index = F.build_index(events)
        for seed in (0, 1):
            jobs = F.co_jobs(index, F.locate(index, decisions(events)), 4, 600, seed)
            chosen[name, seed] = [int(index.job_ids[j, 1]) for j in jobs[0, 1:]]
    assert chosen["a", 0] == chosen["b", 0] and chosen["a", 1] == chosen["b", 1]
    assert chosen["a", 0] != chosen["a", 1]


def test_events_after_a_hold_change_none_of_its_features(dataset):
    from jobaware.hold.train import read_events_table

    events = read_events_table(dataset / "condor_events.parquet")
    table = decisions(events)
    picked = table.iloc[np.random.default_rng(3).choice(len(table), 25, replace=False)].sort_values("hold_seq")
    full_index = F.build_index(events)
    full_states = F.build_tensors(full_index, picked, 16, 12, 240, seed=4)
    full_counts = F.count_features(full_index, picked)
    for k, (_, row) in enumerate(picked.iterrows()):
        cut = events[events["seq"] <= row["hold_seq"]]
        cut_table = decisions(cut)
        mine = cut_table[cut_table["hold_seq"] == row["hold_seq"]]
        pd.testing.assert_frame_equal(F.static_features(mine), F.static_features(picked.iloc[[k]]))
        cut_index = F.build_index(cut)
        assert np.array_equal(F.build_tensors(cut_index, mine, 16, 12, 240, seed=4)[0], full_states[k])
        pd.testing.assert_frame_equal(F.count_features(cut_index, mine).reset_index(drop=True),
                                      full_counts.iloc[[k]].reset_index(drop=True))
    assert (full_states > 0).any(axis=(1, 2)).all()


def test_tensors_go_to_a_memory_mapped_file_chunk_by_chunk(dataset, tmp_path):
    from jobaware.hold.train import read_events_table

    events = read_events_table(dataset / "condor_events.parquet")
    table = decisions(events).head(300)
    index = F.build_index(events)
    in_memory = F.build_tensors(index, table, 10, 7, 120, seed=1)
    mapped = F.build_tensors(index, table, 10, 7, 120, seed=1, out=tmp_path / "t.npy", chunk=64)
    assert in_memory.shape == (300, 10, 7) and in_memory.dtype == np.uint8
    assert isinstance(mapped, np.memmap) and np.array_equal(mapped, in_memory)
    assert np.array_equal(np.load(tmp_path / "t.npy"), in_memory)


def test_count_features_see_the_job_history_and_the_pool(small):
    events, table = small
    counts = F.count_features(F.build_index(events), table).iloc[0]
    assert counts["n_execute"] == 1 and counts["n_held_before"] == 0 and counts["hold_code"] == 13
    assert counts["age"] == 600 and counts["since_last"] == 480 and counts["last_code"] == 1
    assert counts["pool_held"] == 0 and counts["pool_events"] == 8  # events from 09:10 on, before the hold


SIBLINGS = """000 (9.000.000) 2025-05-01 09:00:00 Job submitted from host: <1.2.3.4:9618>
...
000 (9.001.000) 2025-05-01 09:00:00 Job submitted from host: <1.2.3.4:9618>
...
000 (9.002.000) 2025-05-01 09:00:00 Job submitted from host: <1.2.3.4:9618>
...
012 (9.000.000) 2025-05-01 09:10:00 Job was held.
\tError from slot1: permission denied
\tCode 6 Subcode 13
...
012 (9.001.000) 2025-05-01 09:11:00 Job was held.
\tError from slot1: permission denied
\tCode 6 Subcode 13
...
013 (9.000.000) 2025-05-01 09:20:00 Job was released.
\tvia condor_release (by user x)
...
009 (9.001.000) 2025-05-01 09:21:00 Job was aborted.
\tvia condor_rm (by user x)
...
005 (9.000.000) 2025-05-01 09:40:00 Job terminated.
\t(1) Normal termination (return value 0)
...
012 (9.002.000) 2025-05-01 09:50:00 Job was held.
\tError from slot1: permission denied
\tCode 6 Subcode 13
...
"""


def test_siblings_are_the_other_jobs_of_the_cluster_before_the_hold(tmp_path):
    path = tmp_path / "siblings.log"
    path.write_text(SIBLINGS)
    events, _ = read_events([str(path)])
    table = decisions(events)
    counts = F.count_features(F.build_index(events), table)
    assert counts[list(F.SIBLINGS)].to_numpy().tolist() == [[0, 0, 0, 0], [1, 0, 0, 0], [2, 1, 1, 1]]
    # how the earlier holds ended, once their end is in the log: 9.0 released and run to its end, 9.1 removed
    assert counts[list(F.EVIDENCE)].to_numpy().tolist() == [[0] * 10, [0] * 10, [1, 1, 0, 1, 1, 0, 1, 1, 0, 0]]
    # asked between 9.0's release (09:20) and its end (09:40): a release not yet ended
    cut = pd.concat([events[events["time"] <= "2025-05-01 09:21:00"], events.tail(1)], ignore_index=True)
    pending = F.count_features(F.build_index(cut), decisions(cut)).iloc[-1]
    assert pending[["log_ended_remove", "log_released_pending", "log_released_pending_same_code",
                    "sib_released_pending"]].tolist() == [1, 1, 1, 1]
    ends = [events.loc[events["event_code"] == code, "seq"].iloc[0] for code in (5, 9)]
    assert table["resolution_seq"].iloc[:2].tolist() == ends and pd.isna(table["resolution_seq"].iloc[2])
