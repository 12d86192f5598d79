"""The canonical table of `hold`: `condor_events`, one row per event read from HTCondor job event logs.

Written by the reader (jobaware.hold.reader) as `<dataset>/condor_events.parquet`; its data contract is
data_contracts/condor_events.json. Event codes and hold reason codes are named in jobaware.hold.events.
"""

from __future__ import annotations

import pyarrow as pa

CONTRACT = "condor_events"
SCHEMA = pa.schema([
    ("seq", pa.int64()),  # reading order of the kept events (overlaps of earlier segments dropped)
    ("source", pa.string()),  # the file, and the line of the event's header
    ("line", pa.int64()),
    ("event_code", pa.int16()),  # 000-047; event_name as HTCondor's ULogEventNumber, or FUTURE_EVENT
    ("event_name", pa.string()),
    ("cluster", pa.int64()),
    ("proc", pa.int64()),
    ("subproc", pa.int64()),
    ("time", pa.timestamp("ms")),  # the access point's wall clock as written; utc where the header had `Z`
    ("utc", pa.bool_()),
    ("text", pa.string()),  # the header's text after the date
    ("code", pa.int32()),  # the code and subcode of a hold (012), remote error (021) or eviction (004)
    ("subcode", pa.int32()),
    ("reason", pa.string()),  # the first body line of a hold, release, abort, error; `Reason:` of an eviction
    ("via", pa.string()),  # condor_hold, condor_rm ... named in the reason
    ("by_user", pa.string()),
    ("terminated_normally", pa.bool_()),  # of a termination (005, 015, 016)
    ("return_value", pa.int32()),
    ("signal", pa.int32()),
    ("direction", pa.string()),  # of a file transfer (040): input / output, queued / started / finished
    ("stage", pa.string()),
    ("job_ad", pa.string()),  # a job ad information event (028) as a JSON object
])
