"""Where a hold comes from: its log (rotations joined), real or generated, and its workflow."""

from __future__ import annotations

from jobaware.hold import groups
from jobaware.hold.labels import decisions
from jobaware.hold.reader import read_events
from tests.jobaware.hold.conftest import MORE, STANDALONE

LOG = ("000 (7.000.000) 2026-01-05 10:00:00 Job submitted from host: <10.0.0.1:9618>\n...\n"
       "012 (7.000.000) 2026-01-05 10:30:00 Job was held.\n\tvia condor_hold (by user alice)\n\tCode 1 Subcode 0\n...\n"
       "000 (8.000.000) 2026-01-05 10:00:00 Job submitted from host: <10.0.0.1:9618>\n...\n"
       "012 (8.000.000) 2026-01-05 10:31:00 Job was held.\n\tDisk quota exceeded\n\tCode 12 Subcode 122\n...\n"
       "009 (8.000.000) 2026-01-05 11:31:00 Job was aborted.\n\tvia condor_rm (by user condor)\n...\n")


def test_rotations_of_a_log_are_one_log():
    assert groups.log_of("/var/log/condor/EventLog.1") == groups.log_of("/var/log/condor/EventLog.old") \
        == groups.log_of("/var/log/condor/EventLog") == "/var/log/condor/EventLog"
    assert groups.log_of("/x/metl_12634379.log") == "/x/metl_12634379.log"


def test_the_workflow_is_the_named_repository_else_the_submitter_else_the_log(tmp_path):
    real, _ = read_events([str(MORE / "CosmicRay__job.log"), str(STANDALONE / "metl_12634379.log")])
    named = {log: set(groups.workflows(part, decisions(part), log)) for log, part in groups.by_log(real).items()}
    assert sorted(map(frozenset, named.values())) == [{"andyPhysics/CosmicRay"}, {"iross/MLDAG"}]
    site = tmp_path / "EventLog"
    site.write_text(LOG)
    events, _ = read_events([str(site)])
    table = decisions(events)
    # job 7 names its user; job 8 only `condor`, a system user: its log stands for it
    assert list(groups.workflows(events, table, str(site))) == ["user:alice", f"log:{site}"]
    holds = groups.log_holds(events, str(site))
    assert not holds["generated"].any() and holds["action"].tolist() == ["held", "removed"]


def test_a_job_ad_names_the_owner_and_a_truth_file_marks_a_generated_log(tmp_path):
    from jobaware.hold import synth

    synth.write(tmp_path / "EventLog", 300, seed=2)
    events, _ = read_events([str(tmp_path / "EventLog")])
    table = groups.log_holds(events, str(tmp_path / "EventLog"))
    assert table["generated"].all() and table["workflow"].str.startswith("user:").all()
    assert table["workflow"].nunique() >= 3 and not table["workflow"].str.contains('"').any()
