"""The hold adapter's audit (`jobaware.audit`: one JSON object a line, appended and synced before anything is acted
upon, ids remembered), and the records it holds.

Records (field `kind`):
  hold     a new hold and what was made of it: the job, hold time, code, subcode and reason, NumJobStarts and
           NumHolds, the model's answer (P(release), decision, version, what it was trained on) or why there
           was none, the site rule's call and the rule that fired, the model's call and the threshold that
           fired, the mode, the action taken or why not, and the equivalent command line;
  acted    the schedd's answer to an act (or its error), after the act;
  outcome  a later event of a job with an audited hold: released (013), terminated (005, normally or not),
           removed (009) (a re-hold is a new `hold` record).
Each record has an `id` (the event's job, time and byte offset in its file; `outcome:` and `acted:` in front
for those), so a follower restarted after a crash recognises what it has already recorded and never acts twice.
"""

from __future__ import annotations

from pathlib import Path

from jobaware.audit import Audit


class HoldAudit(Audit):
    """The audit, knowing also the jobs with audited holds (whose later events are outcomes)."""

    def __init__(self, path: str | Path):
        self.jobs: set[str] = set()
        super().__init__(path)

    def remember(self, record: dict) -> None:
        super().remember(record)
        if record.get("kind") == "hold":
            self.jobs.add(record["job"])
