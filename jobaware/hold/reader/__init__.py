"""A streaming reader of HTCondor's classic text job event log (user logs and the schedd's global EVENT_LOG).

Format: each event is a header line `EEE (CLUSTER.PROC.SUBPROC) DATE TIME TEXT`, zero or more body lines,
and a terminator line `...`. The reader works on blocks of whole events (`block_bytes`, cut after a `...`
line) with NumPy over the block's bytes: it finds every line, tells headers and terminators apart, pairs
them, and decodes the fixed-position header fields of all events of the block at once; only the few event
types whose bodies matter (005, 012, 013, 009, 004, 021, 024, 028) are looked at one by one. Memory is
bounded by the block size, not the log size (plus 12 bytes per event for the overlap index, below).
(Hand-written positional decoding rather than a regular-expression engine: RE2 through pyarrow.compute
took about 3 us per header line here, more than this whole reader spends per event.)

Dates and the year rule. `YYYY-MM-DD HH:MM:SS` (or with `T`, `.fff` and `Z`, HTCondor's ISO_DATE, SUB_SECOND
and UTC options) is taken as written. The year-less `MM/DD HH:MM:SS` of old logs gets its year thus:
  - from `ReadOptions.year` when given: the year of the file's first year-less date;
  - else from the file itself: the last year-less date before any ISO date lies in the year of the file's
    modification time (a log is last written at or after its last event), or the year before when its
    month/day/time falls after the modification time's; earlier year-less dates count back from there;
  - an ISO date in the same file sets the year for the year-less dates after it;
  - roll-over: a year-less date more than six months before the previous event's month/day (12/31 ->
    01/01) starts the next year.
  HTCondor's own reader gives every year-less date the current year and never rolls over.
Times are the access point's wall clock as written (naive), `utc` true where the header carried `Z`.

Several files, overlaps and duplicates. Files (and globs, and the files of a folder) are read in the order
of their first event's time, each file in its own order. A file or a time step backwards (more than
`backstep_seconds`) starts a new segment: the signature of a concatenated or overlapping log. An event
whose whole record (header and body) is identical to one of an EARLIER segment is an overlap and is
dropped; identical events within one segment are kept (they are separate events). Records are compared by
a 64-bit key of the header fields, the record's length and its byte sum. `seq` numbers the kept events in
reading order, so the order within a job is the log's.

Bad input. A header that does not parse, a date that does not exist, an event without its `...`
terminator, or lines outside any event: the record is skipped, counted and reported (file, line, reason);
`strict=True` raises an InputError at the first one. Bodies are read leniently (fields left empty when a
line is missing), because HTCondor versions differ in what they write there.

Modules: `table` (the canonical table, options, bad records), `sources`, `dates` (the year rule),
`headers` and `blocks` (decoding a block of whole events), `overlaps`, `eventlog` (`EventLogReader`) and
`entry` (whole logs into a DataFrame or a Parquet file).
"""

from jobaware.hold.reader.blocks import mix64
from jobaware.hold.reader.entry import ingest, read_events, read_stats, to_frame, write_events
from jobaware.hold.reader.eventlog import EventLogReader
from jobaware.hold.reader.sources import Source, resolve_sources
from jobaware.hold.reader.table import BadRecord, ReadOptions, ReadStats
from jobaware.hold.schema import CONTRACT, SCHEMA

__all__ = ["CONTRACT", "SCHEMA", "BadRecord", "EventLogReader", "ReadOptions", "ReadStats", "Source",
           "ingest", "mix64", "read_events", "read_stats", "resolve_sources", "to_frame", "write_events"]
