"""Decision instances and their labels."""

from __future__ import annotations

import pandas as pd

from jobaware.hold.commands import label_holds
from jobaware.hold.labels import decisions, label_records
from jobaware.hold.reader import read_events
from tests.jobaware.hold.conftest import STANDALONE

# the labels the real samples' README gives, job by job
README_LABELS = {12634379: "release", 12634462: "release", 12636334: "remove", 12642498: "remove"}


def test_the_real_single_job_logs_get_the_labels_their_readme_gives():
    found = {}
    for path in sorted(STANDALONE.glob("*.log")):
        table = decisions(read_events([str(path)])[0])
        for cluster, labels in table.groupby("cluster")["label"]:
            found[int(cluster)] = set(labels)
    assert found == {cluster: {label} for cluster, label in README_LABELS.items()}


def test_every_hold_of_a_chain_gets_the_chain_outcome_and_rehold_marks_it():
    table = decisions(read_events([str(STANDALONE / "metl_12636334.log")])[0])
    assert table["hold_index"].tolist() == [0, 1, 2, 3, 4]
    assert table["reheld"].tolist() == [True, True, True, True, False]
    assert set(table["label"]) == {"remove"} and set(table["resolution_code"]) == {9}


LOG = """000 (1.000.000) 2025-05-01 10:00:00 Job submitted from host: <1.2.3.4:9618>
...
012 (1.000.000) 2025-05-01 10:05:00 Job was held.
\tTransfer input files failure
\tCode 13 Subcode 256
...
013 (1.000.000) 2025-05-01 10:35:00 Job was released.
\tvia condor_release (by user a)
...
005 (1.000.000) 2025-05-01 11:00:00 Job terminated.
\t(1) Normal termination (return value 3)
...
000 (2.000.000) 2025-05-01 10:00:00 Job submitted from host: <1.2.3.4:9618>
...
012 (2.000.000) 2025-05-01 10:06:00 Job was held.
\tMemory usage exceeded request_memory
\tCode 26 Subcode 103
...
013 (2.000.000) 2025-05-01 10:40:00 Job was released.
\tvia condor_release (by user b)
...
005 (2.000.000) 2025-05-01 11:00:00 Job terminated.
\t(0) Abnormal termination (signal 9)
...
012 (3.000.000) 2025-05-01 11:30:00 Job was held.
\tvia condor_hold (by user c)
\tCode 1 Subcode 0
...
"""


def test_labels_follow_the_first_terminal_event_and_unresolved_holds_have_none(tmp_path):
    log = tmp_path / "three.log"
    log.write_text(LOG)
    table = decisions(read_events([str(log)])[0])
    assert table["label"].tolist()[:2] == ["release", "remove"] and pd.isna(table["label"].iloc[2])
    strict = decisions(read_events([str(log)])[0], nonzero_exit_is_failure=True)
    assert strict["label"].iloc[0] == "remove"  # return value 3
    assert table["hold_reason"].tolist() == ["Transfer input files failure", "Memory usage exceeded request_memory",
                                             "via condor_hold (by user c)"]


def test_label_records_are_what_the_cli_prints(tmp_path):
    log = tmp_path / "three.log"
    log.write_text(LOG)
    assert label_holds([str(log)]) == [
        {"cluster": 1, "proc": 0, "hold_time": "2025-05-01 10:05:00", "hold_code": 13, "hold_subcode": 256,
         "label": "release"},
        {"cluster": 2, "proc": 0, "hold_time": "2025-05-01 10:06:00", "hold_code": 26, "hold_subcode": 103,
         "label": "remove"},
    ]
    everything = label_holds([str(log)], include_unresolved=True)
    assert everything[-1] == {"cluster": 3, "proc": 0, "hold_time": "2025-05-01 11:30:00", "hold_code": 1,
                              "hold_subcode": 0, "label": None}
    table = decisions(read_events([str(log)])[0])
    assert label_records(table) == everything[:2]
