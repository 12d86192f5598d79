"""The memory an HTCondor job held for memory (hold code 34) should be given: what its events say of its limit
and peak, and the RequestMemory to raise it to (the policy's `raise_memory`)."""

from __future__ import annotations

import math
import re

HELD_FOR_MEMORY = 34  # a job over its memory is held with this code and a reason naming its limit and peak
_LIMIT_PEAK = re.compile(r"memory limit of (\d+) megabytes\.\s*Peak usage: (\d+) megabytes", re.IGNORECASE)
_USAGE = re.compile(r"^\s*(\d+)\s+-\s+MemoryUsage of job \(MB\)", re.MULTILINE)
_RESOURCES = re.compile(r"^\s*Memory \(MB\)\s*:\s*(\d+)\s+(\d+)\s+(\d+)", re.MULTILINE)


def condor_memory(events_text: str) -> dict[str, int]:
    """What a job's HTCondor events say of its memory (MB): `request` (the limit of its last memory hold, or the
    request of a terminate event), `peak` (the largest usage of its hold reasons, image-size updates and terminate
    events); a key is absent when no event says it."""
    found: dict[str, int] = {}
    peaks = [int(p) for p in _USAGE.findall(events_text)]
    for limit, peak in _LIMIT_PEAK.findall(events_text):
        found["request"] = int(limit)
        peaks.append(int(peak))
    for usage, request, _allocated in _RESOURCES.findall(events_text):
        peaks.append(int(usage))
        found.setdefault("request", int(request))
    if peaks:
        found["peak"] = max(peaks)
    return found


def condor_request_memory(request_mb: int | None, peak_mb: int | None, margin: float, cap_mb: int) -> int | None:
    """The RequestMemory (MB) to give a job held for memory: its observed peak with `margin` (0.2: 20 % more), up
    to `cap_mb`; None when there is no peak, when the peak is above `cap_mb`, or when that is no more than the job
    already has (raising it would not help: release or remove instead)."""
    if peak_mb is None or peak_mb <= 0 or peak_mb > cap_mb:
        return None
    new = min(int(math.ceil(peak_mb * (1 + margin))), cap_mb)
    return new if request_mb is None or new > request_mb else None
