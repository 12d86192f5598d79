"""Generated Mistral-like job pools: every table of `schema` in its exact format, with planted families.

Shape (measured on the real sample, jobaware/data/real/mistral, 69,937 jobs; `measure_shape` recomputes it and the
tests compare): 54.9 % of jobs are one segment long; 64.4 % of those and 20.0 % of the longer ones are
all-zero (44.4 % overall); longer jobs follow the real length histogram to 433 segments; about a quarter of
the segments of a longer job with I/O are idle; active segments use the real sample's commonest 9-bit symbols.

How a job is made: a pattern (segments x 9 metrics: 0 = no I/O, else the metric's mean score in (0, 4])
and a node count; every node's per-segment score per file system is drawn from {0, 1, 4} with that mean
(LowIO, HighIO, CriticalIO), averaged over the two file systems (the node values); the quantised coding is
the mean over nodes and its level, the binary coding has a metric's bit set where any node scored > 0. So
all tables of a job agree exactly as the real monitoring's do.

Planted families (`family_share` of the jobs): a template job with I/O, several segments long, re-run as
members, each changed by one or two of: `rerun` (fresh node draws, 5 % of active cells dropped, intensities
jittered), `nodes` (x0.5, x2 or x4 nodes), `stretch` (the timeline stretched by 0.6..1.6), `shift` (1..3 idle
segments before a phase, or leading idle segments removed), `idle` (1..3 extra idle runs of 1..4 segments).
The other jobs are background, drawn so that the whole pool has the real shape. Ground truth:
`families.csv` (`jobid,family,variant`; family -1 for background jobs).

Memory is bounded by the chunk of jobs generated at a time; files are appended chunk by chunk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobaware.errors import InputError
from jobaware.packaged import bundled
from jobaware.similarity import variants
from jobaware.similarity.flat import row_of
from jobaware.similarity.schema import (
    CODINGS,
    FAMILIES,
    FLOATS,
    JOBS,
    LEVELS,
    METRICS,
    NODE_VALUES,
    SEGMENT_SECONDS,
    SOURCE_COLUMNS,
    aggregate_zeros_flat,
    quantise,
)

MIN_JOBS, MAX_JOBS = 100, 20_000_000
CHUNK_JOBS = 50_000
FILES = {CODINGS: "job_codings_binary.csv", LEVELS: "job_codings.csv", JOBS: "job_metadata.csv",
         NODE_VALUES: "job_node_values.csv", FAMILIES: "families.csv"}
TABLES = tuple(FILES)
# measured on the real sample (69,937 jobs); tests/jobaware/similarity/test_synth.py re-measures them
REAL_SHAPE = {
    "one_segment": 0.549,
    "zero_given_one": 0.644,
    "zero_given_longer": 0.200,
    "idle_share": 0.26,
    # longer jobs: (first length of the bin, jobs); a bin runs to the next bin's first length - 1, the last to 433
    "length_bins": ((2, 8745), (3, 5307), (4, 4129), (5, 2421), (6, 1494), (7, 1172), (8, 599), (9, 1194),
                    (10, 493), (11, 641), (13, 892), (15, 863), (17, 645), (19, 415), (21, 540), (25, 552),
                    (31, 549), (41, 847), (51, 25), (71, 5), (101, 1), (301, 2)),
    "longest": 433,
    # the commonest non-zero segment symbols (symbol, segments); they cover 78 % of the active segments
    "symbols": ((128, 17535), (272, 13191), (256, 11219), (511, 6418), (1, 5802), (400, 5732), (6, 5185),
                (160, 5122), (32, 5044), (8, 2475), (2, 2462), (129, 2213), (384, 2197), (4, 1885), (166, 1721),
                (503, 1669), (96, 1509), (432, 1460), (407, 1438), (447, 1367), (406, 1343), (130, 1330),
                (38, 1269), (401, 1267), (368, 1234), (502, 1189), (471, 1174), (134, 1168), (304, 1096),
                (167, 1076), (496, 1057), (278, 1042), (7, 1041), (14, 1017), (257, 998), (135, 989),
                (102, 924), (191, 842), (192, 832), (239, 831)),
}
# node counts: (smallest, largest, share of jobs)
NODE_BINS = ((1, 1, 0.62), (2, 4, 0.2), (5, 16, 0.13), (17, 64, 0.04), (65, 256, 0.01))
ALL_METRICS = np.arange(len(METRICS))
FIRST_JOBID = 17_600_003
DEFAULT_SYNTH_JOBS = 20_000
PLANTED_FIRST_JOBID = 30_000_000  # above the real sample's jobids (17.6M..18.9M)
REAL_SAMPLE_ENV = "JOBAWARE_MISTRAL_REAL"
NODE_COUNT = 3340


@dataclass
class Job:
    """One job before its node values are drawn: pattern (segments x 9 mean scores), nodes, family, variant."""

    pattern: np.ndarray
    nodes: int
    family: int = -1
    variant: str = ""
    user: int = 0
    name: int = 0


def measure_shape(codings: list[np.ndarray]) -> dict:
    """The shape figures of `REAL_SHAPE` measured on a list of binary codings."""
    lengths = np.array([len(c) for c in codings])
    zero = np.array([not np.any(c) for c in codings])
    longer = lengths > 1
    busy = [c for c, z, n in zip(codings, zero, lengths, strict=True) if n > 1 and not z]
    return {
        "jobs": len(codings),
        "one_segment": float(np.mean(~longer)),
        "zero_given_one": float(zero[~longer].mean()) if (~longer).any() else 0.0,
        "zero_given_longer": float(zero[longer].mean()) if longer.any() else 0.0,
        "all_zero": float(zero.mean()),
        "idle_share": float(np.mean([np.mean(c == 0) for c in busy])) if busy else 0.0,
        "median_length": float(np.median(lengths)),
        "p99_length": float(np.percentile(lengths, 99)),
        "longest": int(lengths.max()),
    }


class _Shapes:
    """Samplers for lengths, symbols, intensities and node counts."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        bins = REAL_SHAPE["length_bins"]
        self.bin_low = np.array([b[0] for b in bins])
        self.bin_high = np.r_[self.bin_low[1:] - 1, REAL_SHAPE["longest"]]
        weight = np.array([b[1] for b in bins], float)
        self.bin_p = weight / weight.sum()
        symbols = REAL_SHAPE["symbols"]
        self.symbols = np.array([s for s, _ in symbols])
        self.symbol_p = np.array([c for _, c in symbols], float)
        self.symbol_p /= self.symbol_p.sum()
        self.node_p = np.array([b[2] for b in NODE_BINS])
        self.node_p /= self.node_p.sum()

    def longer_lengths(self, n: int) -> np.ndarray:
        which = self.rng.choice(len(self.bin_p), n, p=self.bin_p)
        return self.rng.integers(self.bin_low[which], self.bin_high[which] + 1)

    def symbol(self, n: int) -> np.ndarray:
        """Active metric sets: the real commonest symbols, one in five any other non-zero mask."""
        out = self.rng.choice(self.symbols, n, p=self.symbol_p)
        other = self.rng.random(n) < 0.2
        out[other] = self.rng.integers(1, 512, other.sum())
        return out

    def intensities(self, shape) -> np.ndarray:
        """Mean scores in (0, 4], log-uniform from 0.2."""
        return np.exp(self.rng.uniform(np.log(0.2), np.log(4.0), shape))

    def nodes(self, n: int) -> np.ndarray:
        which = self.rng.choice(len(NODE_BINS), n, p=self.node_p)
        low = np.array([b[0] for b in NODE_BINS])[which]
        high = np.array([b[1] for b in NODE_BINS])[which]
        return np.exp(self.rng.uniform(np.log(low), np.log(high + 1))).astype(int).clip(low, high)

    def busy_pattern(self, length: int) -> np.ndarray:
        """A job with I/O: idle and active phases; an active phase has a metric set and intensities, and
        each of its metrics is active in a segment with probability 0.8 (at least one per segment)."""
        rng = self.rng
        pattern = np.zeros((length, len(METRICS)), np.float32)
        idle = rng.beta(0.35, 1.5) if length > 1 else 0.0
        t = 0
        while t < length:
            if rng.random() < idle:
                t += 1 + rng.geometric(0.3)
                continue
            stop = min(length, t + rng.geometric(0.4))
            self._phase(pattern, t, stop)
            t = stop
        if not pattern.any():
            start = int(rng.integers(length))
            self._phase(pattern, start, min(length, start + rng.geometric(0.4)))
        return pattern

    def _phase(self, pattern: np.ndarray, start: int, stop: int) -> None:
        rng = self.rng
        active = (self.symbol(1)[0] >> ALL_METRICS) & 1 == 1
        on = rng.random((stop - start, len(METRICS))) < 0.8
        on[:, ~active] = False
        on[np.arange(stop - start), rng.choice(np.flatnonzero(active), stop - start)] = True
        pattern[start:stop] = np.where(on, self.intensities(len(METRICS)), 0)


def _variant(template: Job, shapes: _Shapes) -> tuple[np.ndarray, int, str]:
    """A family member: the template changed by one or two operators (see `variants`)."""
    rng = shapes.rng
    pattern, nodes = template.pattern, template.nodes
    chosen = variants.choose(rng)
    for op in chosen:
        if op == "rerun":
            pattern = np.where(variants.dropped_cells(pattern > 0, rng), 0, pattern)
            pattern = np.where(pattern > 0, np.clip(pattern * rng.lognormal(0, 0.2, pattern.shape), 0.13, 4), 0)
        elif op == "nodes":
            nodes = int(max(1, round(nodes * rng.choice(variants.NODE_FACTORS))))
        else:
            source = variants.segment_map(op, pattern.any(axis=1), rng)
            pattern = variants.apply_map(pattern.T, source).T
    return pattern.astype(np.float32), nodes, "+".join(chosen)


def _plan(n: int, family_share: float, shapes: _Shapes, next_family: int, users: int) -> tuple[list[Job], int]:
    """The jobs of one chunk: families first, then background, shuffled."""
    rng = shapes.rng
    jobs: list[Job] = []
    planted = int(round(n * family_share))
    while len(jobs) < planted:
        size = int(min(planted - len(jobs), 3 + rng.geometric(0.08)))
        if size < 2:
            break
        length = int(shapes.longer_lengths(1)[0])
        template = Job(shapes.busy_pattern(length), int(shapes.nodes(1)[0]), next_family, "template",
                       int(rng.integers(users)), next_family)
        jobs.append(template)
        for _ in range(size - 1):
            pattern, nodes, variant = _variant(template, shapes)
            same_user = rng.random() < 0.9
            jobs.append(Job(pattern, nodes, next_family, variant,
                            template.user if same_user else int(rng.integers(users)),
                            template.name if rng.random() < 0.8 else -1))
        next_family += 1
    background = n - len(jobs)
    # background shares that give the whole pool the real shape (families are all longer jobs with I/O)
    share_bg = background / n
    one = min(1.0, REAL_SHAPE["one_segment"] / share_bg)
    zero_longer = min(1.0, REAL_SHAPE["zero_given_longer"] * (1 - REAL_SHAPE["one_segment"]) /
                      max(share_bg * (1 - one), 1e-9))
    is_one = rng.random(background) < one
    zero = np.where(is_one, rng.random(background) < REAL_SHAPE["zero_given_one"],
                    rng.random(background) < zero_longer)
    lengths = np.where(is_one, 1, shapes.longer_lengths(background))
    nodes = shapes.nodes(background)
    user = np.minimum(rng.zipf(1.6, background) - 1, users - 1)
    for i in range(background):
        length = int(lengths[i])
        pattern = np.zeros((length, len(METRICS)), np.float32) if zero[i] else shapes.busy_pattern(length)
        jobs.append(Job(pattern, int(nodes[i]), user=int(user[i]), name=-1))
    order = rng.permutation(len(jobs))
    return [jobs[i] for i in order], next_family


def _node_values(jobs: list[Job], rng: np.random.Generator):
    """Per-node, per-segment scores averaged over two file systems; job means; levels; binary codings."""
    lengths = np.array([len(j.pattern) for j in jobs])
    nodes = np.array([j.nodes for j in jobs])
    seg_offsets = np.r_[0, np.cumsum(lengths)]
    pattern = np.concatenate([j.pattern for j in jobs]).astype(np.float32)
    cells = lengths * nodes
    cell_offsets = np.r_[0, np.cumsum(cells)]
    job_of_cell = row_of(cell_offsets)
    within = np.arange(cell_offsets[-1]) - cell_offsets[job_of_cell]
    segment = seg_offsets[job_of_cell] + within % lengths[job_of_cell]   # global segment index of every cell
    mean = pattern[segment]                                               # (cells, 9)
    q4 = np.clip((mean - 1) / 3, 0, 1)
    q1 = np.where(mean <= 1, mean, 1 - q4)
    draw = rng.random((2,) + mean.shape, dtype=np.float32)
    scores = np.where(draw < q4, 4.0, np.where(draw < q4 + q1, 1.0, 0.0)).astype(np.float32)
    values = scores.mean(axis=0)                                           # (cells, 9) in {0,.5,1,2,2.5,4}
    # an active cell of the pattern has at least one node with I/O (its bit is set in the binary coding)
    sums = np.stack([np.bincount(segment, weights=values[:, m], minlength=len(pattern)) for m in ALL_METRICS],
                    axis=1).astype(np.float32)
    silent = (pattern > 0) & (sums == 0)
    if silent.any():
        seg_index, metric = np.nonzero(silent)
        job = row_of(seg_offsets)[seg_index]
        first_node_cell = cell_offsets[job] + (seg_index - seg_offsets[job])
        values[first_node_cell, metric] = 0.5
        sums[seg_index, metric] = 0.5
    job_mean = sums / np.repeat(nodes, lengths)[:, None]
    return values, cell_offsets, seg_offsets, job_mean


def _sequence_text(tokens: pa.Array, offsets: np.ndarray) -> pa.Array:
    """Each sequence's tokens joined by ':' (pyarrow, no Python loop)."""
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), tokens), ":")


def _lines(columns: list[pa.Array], eol: str) -> bytes:
    """Rows of text columns joined by ',' and ended by `eol`, as the bytes of one buffer."""
    joined = pc.binary_join_element_wise(pc.binary_join_element_wise(*columns, ","), pa.scalar(""), eol)
    offsets = np.frombuffer(joined.buffers()[1], np.int32, len(joined) + 1, joined.offset * 4)
    return joined.buffers()[2][offsets[0]:offsets[-1]].to_pybytes()


def _paths(out: Path) -> dict[str, Path]:
    if out.suffix.lower() == ".csv":
        names = {t: out if t == CODINGS else out.with_name(f"{out.stem}_{t.removeprefix('mistral_')}.csv")
                 for t in TABLES}
    else:
        names = {t: out / name for t, name in FILES.items()}
    return names


def write_synthetic(out: Path, n: int, seed: int = 0, fmt: str | None = None, progress=None, *,
          tables: tuple[str, ...] = TABLES, family_share: float = 0.2, first_jobid: int = FIRST_JOBID) -> Path:
    """Write `n` generated jobs as the Mistral tables; return the ground-truth families file.

    `out` is a folder (files named as in FILES) or the binary coding file's path ending in .csv (the
    other tables beside it as <stem>_levels.csv, <stem>_jobs.csv, <stem>_node_values.csv,
    <stem>_families.csv). `tables` picks the tables to write (the node values are the bulkiest); the jobids
    begin above `first_jobid`.
    """
    if fmt not in (None, "csv"):
        raise InputError(f"format: the Mistral tables are CSV only, got {fmt!r}")
    if not isinstance(n, int) or not MIN_JOBS <= n <= MAX_JOBS:
        raise InputError(f"jobs: expected {MIN_JOBS:,}..{MAX_JOBS:,}, got {n!r}")
    if not 0 <= family_share <= 0.9:
        raise InputError(f"family_share: expected 0..0.9, got {family_share!r}")
    unknown = set(tables) - set(TABLES)
    if unknown or CODINGS not in tables and LEVELS not in tables:
        raise InputError(f"tables: expected some of {', '.join(TABLES)} including a coding table, got {tables!r}")
    out = Path(out)
    paths = _paths(out)
    paths[FAMILIES].parent.mkdir(parents=True, exist_ok=True)
    tables = tuple(dict.fromkeys((*tables, FAMILIES)))
    handles = {t: open(paths[t], "wb") for t in tables}
    try:
        for table, handle in handles.items():
            eol = "\r\n" if table == CODINGS else "\n"
            handle.write((",".join(SOURCE_COLUMNS[table]) + eol).encode())
        users = int(np.clip(3 * np.sqrt(n), 20, 20_000))
        next_family, next_jobid = 0, first_jobid
        for chunk, start in enumerate(range(0, n, CHUNK_JOBS)):
            rng = np.random.default_rng([seed, chunk])
            shapes = _Shapes(rng)
            jobs, next_family = _plan(min(CHUNK_JOBS, n - start), family_share, shapes, next_family, users)
            jobids = next_jobid + np.cumsum(rng.integers(1, 30, len(jobs)))
            next_jobid = int(jobids[-1])
            _write_chunk(handles, jobs, jobids, rng)
            if progress:
                progress(len(jobs))
    finally:
        for handle in handles.values():
            handle.close()
    return paths[FAMILIES]


def _write_chunk(handles: dict, jobs: list[Job], jobids: np.ndarray, rng: np.random.Generator) -> None:
    values, cell_offsets, seg_offsets, job_mean = _node_values(jobs, rng)
    levels = quantise(job_mean)
    bits = (job_mean > 0).astype(np.int64) << ALL_METRICS
    coding = bits.sum(axis=1)
    ids = pa.array(jobids.astype(str))
    coding_text = _sequence_text(pc.cast(pa.array(coding), pa.string()), seg_offsets)
    if CODINGS in handles:
        handles[CODINGS].write(_lines([coding_text, ids], "\r\n"))
    if LEVELS in handles:
        aggz, aggz_offsets = aggregate_zeros_flat(coding, seg_offsets)
        floats = [_sequence_text(pc.cast(pa.array(np.round(job_mean[:, m].astype(np.float64), 4)), pa.string()),
                                 seg_offsets) for m in ALL_METRICS]
        level_text = [_sequence_text(pc.cast(pa.array(levels[:, m]), pa.string()), seg_offsets) for m in ALL_METRICS]
        columns = {"jobid": ids, "coding_abs": coding_text,
                   "coding_abs_aggzeros": _sequence_text(pc.cast(pa.array(aggz), pa.string()), aggz_offsets),
                   **dict(zip(FLOATS, floats, strict=True)), **dict(zip(METRICS, level_text, strict=True))}
        handles[LEVELS].write(_lines([columns[c] for c in SOURCE_COLUMNS[LEVELS]], "\n"))
    if JOBS in handles:
        nodes = np.array([j.nodes for j in jobs])
        lengths = np.diff(seg_offsets)
        elapsed = lengths * SEGMENT_SECONDS - rng.integers(0, SEGMENT_SECONDS, len(jobs))
        user = np.array([j.user for j in jobs])
        name = np.array([j.name for j in jobs])
        name = np.where(name >= 0, name, 1_000_000 + rng.integers(0, 10_000_000, len(jobs)))
        columns = [ids, pa.array([f"user{u:05d}" for u in user]), pa.array([f"group{u // 8:04d}" for u in user]),
                   pa.array(nodes.astype(str)), pa.array(elapsed.astype(str)), pa.array([f"job{k:08d}" for k in name])]
        handles[JOBS].write(_lines(columns, "\n"))
    if NODE_VALUES in handles:
        nodes = np.array([j.nodes for j in jobs])
        lengths = np.diff(seg_offsets)
        job_of_row = np.repeat(np.arange(len(jobs)), nodes)
        first_node = rng.integers(0, NODE_COUNT, len(jobs))
        node_in_job = np.arange(len(job_of_row)) - np.repeat(np.r_[0, np.cumsum(nodes)[:-1]], nodes)
        names = pa.array([f"m{10000 + k}" for k in ((first_node[job_of_row] + node_in_job) % NODE_COUNT).tolist()])
        row_offsets = np.r_[0, np.cumsum(np.repeat(lengths, nodes))]
        columns = [pa.array(jobids[job_of_row].astype(str)), names]
        for m in ALL_METRICS:
            text = pc.cast(pa.array(values[:, m].astype(np.float64)), pa.string())
            columns.append(_sequence_text(text, row_offsets))
        handles[NODE_VALUES].write(_lines(columns, "\n"))
    family = np.array([j.family for j in jobs])
    variant = pa.array([j.variant for j in jobs])
    handles[FAMILIES].write(_lines([ids, pa.array(family.astype(str)), variant], "\n"))


def real_sample() -> Path | None:
    """The real DKRZ Mistral binary codings: $JOBAWARE_MISTRAL_REAL, else the repository's jobaware/data/real/mistral
    (None where neither is there, e.g. an image without the sample)."""
    path = Path(os.environ.get(REAL_SAMPLE_ENV) or
                bundled("data", "real", "mistral", "dkrz_mistral_job_codings_binary.csv"))
    return path if path.is_file() else None


def default_data(data_dir: Path, progress=None) -> str:
    """`make run`'s default data: the real Mistral sample (its jobids answer `jobaware similarity rank` out of the
    box), with generated Mistral tables beside it whose planted families the evaluation scores on (their
    jobids above the real ones), generated once under `data_dir`."""
    from jobaware import sources

    folder = Path(data_dir) / f"planted_similarity_{DEFAULT_SYNTH_JOBS}"
    if not (folder / FILES[FAMILIES]).is_file():
        write_synthetic(folder, DEFAULT_SYNTH_JOBS, 0, progress=progress, first_jobid=PLANTED_FIRST_JOBID)
    real = real_sample()
    return sources.encode([str(real), str(folder)] if real else [str(folder)])
