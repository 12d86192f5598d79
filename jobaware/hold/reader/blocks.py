"""One block of whole lines into a record batch of events (no seq yet), their keys and the bad records."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from jobaware.hold.events import EVENT_NAMES, FUTURE_EVENT
from jobaware.hold.reader.dates import DateState
from jobaware.hold.reader.headers import decode_headers
from jobaware.hold.reader.table import BadRecord
from jobaware.hold.schema import SCHEMA

PAD = 128
_NAMES = pa.array(list(EVENT_NAMES) + [FUTURE_EVENT])


def _gather(pad: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The byte ranges [starts, ends) of the block as one binary array (copied, contiguous)."""
    lengths = np.maximum(ends - starts, 0)
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    index = np.repeat(starts - offsets[:-1], lengths)
    index += np.arange(offsets[-1], dtype=np.int64)
    data = pad[index]
    kind = pa.binary() if offsets[-1] < 2**31 else pa.large_binary()
    width = np.int32 if kind == pa.binary() else np.int64
    return pa.Array.from_buffers(kind, len(starts), [None, pa.py_buffer(offsets.astype(width)), pa.py_buffer(data)])


def _to_text(binary: pa.Array) -> pa.Array:
    """UTF-8 text; bytes that are not UTF-8 become U+FFFD (the record is kept)."""
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in binary.to_pylist()],
                        pa.string())


_TERMINATION = re.compile(rb"^\((\d)\) (Normal|Abnormal) termination \((?:return value|signal) (-?\d+)\)")
_CODE_LINE = re.compile(rb"^Code (-?\d+) Subcode (-?\d+)")
_EVICT_CODE = re.compile(rb" Code (-?\d+) Subcode (-?\d+)")
_VIA = re.compile(r"via (condor_\w+)")
_BY_USER = re.compile(r"\(by user ([^)]+)\)")
_TRANSFER = {b"Entered queue to transfer ": "queued", b"Started transferring ": "started",
             b"Finished transferring ": "finished"}


def _int32(digits: bytes) -> int | None:
    """A number of a body line as its int32 column holds it; one out of that range is left empty (None)."""
    if len(digits) > 11:
        return None
    value = int(digits)
    return value if -(2**31) <= value < 2**31 else None


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


@dataclass
class Block:
    batch: pa.RecordBatch
    ms: np.ndarray
    keys: np.ndarray
    bad: list[BadRecord]


def decode_block(buf: bytes, file: str, first_line: int, dates: DateState) -> Block:
    """All events of one block of whole lines: a record batch (no seq yet), their keys, and the bad records."""
    n_bytes = len(buf)
    pad = np.frombuffer(buf + b"\n" * PAD, np.uint8)
    ends = np.flatnonzero(pad[:n_bytes] == 10)
    if len(ends) == 0 or ends[-1] != n_bytes - 1:
        raise AssertionError("a block must end with a newline")
    starts = np.empty(len(ends), np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    content_end = ends - ((pad[np.maximum(ends - 1, 0)] == 13) & (ends > starts))
    length = content_end - starts
    s0, s1, s2 = pad[starts], pad[starts + 1], pad[starts + 2]
    is_header = (length >= 5) & (s0 - 48 < 10) & (s1 - 48 < 10) & (s2 - 48 < 10) \
        & (pad[starts + 3] == 32) & (pad[starts + 4] == 40)
    is_term = (length == 3) & (s0 == 46) & (s1 == 46) & (s2 == 46)
    blank = length == 0
    markers = np.flatnonzero(is_header | is_term)
    kinds = is_header[markers]
    nxt = np.concatenate([kinds[1:], [True]])  # past the last marker: as if a header followed
    nxt_line = np.concatenate([markers[1:], [len(ends)]])
    event_h = markers[kinds & ~nxt]
    event_t = nxt_line[kinds & ~nxt]
    bad: list[BadRecord] = []

    def record_text(first: int, last: int) -> str:
        return _text(buf[starts[first]:ends[min(last, len(ends) - 1)]])

    def add_bad(first: int, last: int, reason: str) -> None:
        bad.append(BadRecord(file, first_line + first, reason, record_text(first, last)))

    # headers not followed by their terminator: truncated or unterminated events
    for h, following in zip(markers[kinds & nxt], nxt_line[kinds & nxt]):
        reason = "event has no '...' terminator before the next event" if following < len(ends) \
            else "event is truncated: the file ends before its '...' terminator"
        add_bad(int(h), int(following) - 1, reason)
    # stretches of non-blank lines that belong to no event
    covered = np.zeros(len(ends) + 1, np.int64)
    np.add.at(covered, event_h, 1)
    np.add.at(covered, event_t + 1, -1)
    bad_h = markers[kinds & nxt]
    np.add.at(covered, bad_h, 1)
    np.add.at(covered, nxt_line[kinds & nxt], -1)
    outside = (np.cumsum(covered)[:-1] == 0) & ~blank
    if outside.any():
        lines = np.flatnonzero(outside)
        # a stretch ends at a gap or just after a terminator line
        breaks = np.flatnonzero((np.diff(lines) > 1) | is_term[lines[:-1]])
        for first, last in zip(np.r_[lines[0], lines[breaks + 1]], np.r_[lines[breaks], lines[-1]]):
            if is_term[last]:
                reason = "'...' terminator without an event" if first == last \
                    else "record has no event header (its first line is not 'EEE (C.P.S) DATE TIME ...')"
            else:
                reason = "lines outside any event (no event header before them)"
            add_bad(int(first), int(last), reason)

    header = decode_headers(pad, starts[event_h], content_end[event_h], dates)
    for i in np.flatnonzero(~header.ok):
        add_bad(int(event_h[i]), int(event_t[i]), str(header.reason[i]))
    bad.sort(key=lambda record: record.line)
    keep = header.ok
    h, t = event_h[keep], event_t[keep]
    n = len(h)
    code = header.code[keep]
    ms = header.ms[keep]
    text_start = header.text_start[keep]
    text = _to_text(_gather(pad, text_start, content_end[h]))

    # record keys: header fields, record length and byte sum
    record_start, record_end = starts[h], ends[t]  # up to the terminator's newline (always inside the block)
    sums = np.add.reduceat(pad[:n_bytes], np.ravel(np.column_stack([record_start, record_end])),
                           dtype=np.uint64)[::2] if n else np.zeros(0, np.uint64)
    keys = mix64([ms, header.cluster[keep], header.proc[keep], header.subproc[keep], code,
                 record_end - record_start, sums])

    columns = _body_fields(buf, pad, starts, content_end, h, t, code, text_start, content_end[h], n)
    names = _NAMES.take(pa.array(np.where((code >= 0) & (code < len(EVENT_NAMES)), code, len(EVENT_NAMES))))
    batch = pa.RecordBatch.from_arrays([
        pa.nulls(n, pa.int64()),
        pa.array([file]).take(pa.array(np.zeros(n, np.int64))) if n else pa.array([], pa.string()),
        pa.array(first_line + h),
        pa.array(code.astype(np.int16)),
        names,
        pa.array(header.cluster[keep]),
        pa.array(header.proc[keep]),
        pa.array(header.subproc[keep]),
        pa.array(ms.astype("datetime64[ms]")),
        pa.array(header.utc[keep]),
        text,
        *columns,
    ], schema=SCHEMA)
    return Block(batch, ms, keys, bad)


def mix64(parts: list[np.ndarray]) -> np.ndarray:
    """A 64-bit key of several integer columns (splitmix64 rounds), vectorised."""
    with np.errstate(over="ignore"):
        key = np.full(len(parts[0]), 0x9E3779B97F4A7C15, np.uint64)
        for part in parts:
            key ^= np.asarray(part).astype(np.uint64)
            key += np.uint64(0x9E3779B97F4A7C15)
            key = (key ^ (key >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            key = (key ^ (key >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            key ^= key >> np.uint64(31)
    return key


def _body_fields(buf, pad, starts, content_end, h, t, code, text_start, text_end, n) -> list[pa.Array]:
    """code, subcode, reason, via, by_user, terminated_normally, return_value, signal, direction, stage, job_ad.

    Only the few event types whose bodies matter are visited one by one (plain Python ints: no NumPy scalars)."""
    code_v: list[int | None] = [None] * n
    subcode_v: list[int | None] = [None] * n
    reason: list[str | None] = [None] * n
    via: list[str | None] = [None] * n
    by_user: list[str | None] = [None] * n
    normal: list[bool | None] = [None] * n
    return_value: list[int | None] = [None] * n
    signal: list[int | None] = [None] * n
    job_ad: list[str | None] = [None] * n
    first_body = (h + 1).tolist()
    terminator = t.tolist()
    kinds = code.tolist()
    line_start, line_end = starts.tolist(), content_end.tolist()

    def line(i: int) -> bytes:
        return buf[line_start[i]:line_end[i]].lstrip(b" \t")

    def visit(codes: tuple[int, ...]) -> list[int]:
        return np.flatnonzero(np.isin(code, codes)).tolist()

    for e in visit((5, 15, 16)):
        if first_body[e] < terminator[e]:
            match = _TERMINATION.match(line(first_body[e]))
            if match:
                value = _int32(match.group(3))
                normal[e] = match.group(2) == b"Normal"
                if normal[e]:
                    return_value[e] = value
                else:
                    signal[e] = value
    for e in visit((2, 7, 9, 12, 13, 21, 24)):
        wants_code = kinds[e] in (12, 21)
        for i in range(first_body[e], min(first_body[e] + 4, terminator[e])):
            raw = line(i)
            match = _CODE_LINE.match(raw) if wants_code else None
            if match:
                code_v[e], subcode_v[e] = _int32(match.group(1)), _int32(match.group(2))
                break
            if i == first_body[e] and raw:
                reason[e] = _text(raw)
        if reason[e]:
            found = _VIA.search(reason[e])
            via[e] = found.group(1) if found else None
            found = _BY_USER.search(reason[e])
            by_user[e] = found.group(1) if found else None
    header_text_start, header_text_end = text_start.tolist(), text_end.tolist()
    for e in visit((4,)):
        match = _EVICT_CODE.search(buf[header_text_start[e]:header_text_end[e]])
        if match:
            code_v[e], subcode_v[e] = _int32(match.group(1)), _int32(match.group(2))
        for i in range(first_body[e], terminator[e]):
            raw = line(i)
            if raw.startswith(b"Reason: "):
                reason[e] = _text(raw[len(b"Reason: "):])
                break
    for e in visit((28,)):
        ad = {}
        if first_body[e] < terminator[e]:
            for item in _text(buf[line_start[first_body[e]]:line_end[terminator[e] - 1]]).split("\n"):
                key, sep, value = item.partition("=")
                key = key.strip()
                if sep and key.replace("_", "a").replace(".", "a").isalnum():
                    ad[key] = value.strip()
        job_ad[e] = _JSON.encode(ad)
    stage, direction = _transfer_kinds(pad, text_start, code)
    return [
        pa.array(code_v, pa.int32()),
        pa.array(subcode_v, pa.int32()),
        pa.array(reason, pa.string()),
        pa.array(via, pa.string()),
        pa.array(by_user, pa.string()),
        pa.array(normal, pa.bool_()),
        pa.array(return_value, pa.int32()),
        pa.array(signal, pa.int32()),
        direction,
        stage,
        pa.array(job_ad, pa.string()),
    ]


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))
_STAGES = pa.array(["queued", "started", "finished"])
_DIRECTIONS = pa.array(["input", "output"])


def _transfer_kinds(pad: np.ndarray, text_start: np.ndarray, code: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """Stage (queued/started/finished) and direction (input/output) of every 040 event, from its header text."""
    n = len(code)
    stage = np.full(n, -1)
    direction = np.full(n, -1)
    transfers = np.flatnonzero(code == 40)
    if len(transfers):
        head = pad[np.minimum(text_start[transfers][:, None] + np.arange(32), len(pad) - 1)]
        for k, prefix in enumerate(_TRANSFER):
            width = len(prefix)
            hit = (head[:, :width] == np.frombuffer(prefix, np.uint8)).all(axis=1)
            word = head[:, width:width + 3]
            is_input = (word == np.frombuffer(b"inp", np.uint8)).all(axis=1)
            is_output = (word == np.frombuffer(b"out", np.uint8)).all(axis=1)
            known = hit & (is_input | is_output)
            stage[transfers[known]] = k
            direction[transfers[known]] = np.where(is_input[known], 0, 1)
    return (_STAGES.take(pa.array(np.maximum(stage, 0), mask=stage < 0)),
            _DIRECTIONS.take(pa.array(np.maximum(direction, 0), mask=direction < 0)))
