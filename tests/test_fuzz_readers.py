"""Hypothesis over every registered capability's reader: small cuts of the real data, mutated (bytes flipped,
inserted, cut, lines doubled, numbers made extreme), go through `ingest`. Each ends in a read report or in
jobaware's own error, within bounded time; never another exception. `make fuzz` runs many more examples."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobaware import capabilities
from jobaware.errors import JobawareError
from jobaware.reading import ReadReport
from tests.fuzzing import examples, fuzz_settings

EXTREMES = [b"1e300", b"-1", b"NaN", b"inf", b"-inf", b"99999999999999999999999", b"", b"\x00", b"\xff\xfe",
            b"9223372036854775808", b"0.5", b'"', b"\r\n", b"2500-01-01 00:00:00", b"\xef\xbb\xbf"]
_NUMBER = re.compile(rb"\d+(\.\d+)?")
MUTATION = st.tuples(st.sampled_from(["flip", "insert", "delete", "double_line", "extreme"]),
                     st.integers(0, 2**32), st.binary(max_size=48), st.sampled_from(EXTREMES))


def mutate(data: bytes, mutations) -> bytes:
    for kind, at, blob, extreme in mutations:
        at = at % max(len(data), 1)
        if kind == "flip" and data:
            data = data[:at] + bytes([data[at] ^ (1 + blob[0] % 255 if blob else 0x80)]) + data[at + 1:]
        elif kind == "insert":
            data = data[:at] + blob + data[at:]
        elif kind == "delete":
            data = data[:at] + data[at + 1 + len(blob) * 8:]
        elif kind == "double_line":
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end + 1
            data = data[:end] + data[start:end] + data[end:]
        else:
            numbers = list(_NUMBER.finditer(data))
            if numbers:
                match = numbers[at % len(numbers)]
                data = data[:match.start()] + extreme + data[match.end():]
    return data


REAL = Path(__file__).resolve().parents[1] / "jobaware" / "data" / "real"


def _head(path: Path, lines: int) -> bytes:
    return b"".join(path.read_bytes().splitlines(keepends=True)[:lines])


def _swf_head(path: Path, jobs: int) -> bytes:
    text = path.read_bytes().splitlines(keepends=True)
    header = [line for line in text if line.startswith(b";")]
    return b"".join(header + [line for line in text if line.strip() and not line.startswith(b";")][:jobs])


def _scripts(folder: Path, count: int) -> None:
    labels = (REAL / "scripts" / "labels.csv").read_bytes().splitlines(keepends=True)[: count + 1]
    (folder / "files").mkdir(parents=True)
    (folder / "labels.csv").write_bytes(b"".join(labels))
    for row in labels[1:]:
        name = row.decode().split(",")[0].strip()
        stored = REAL / "scripts" / "files" / f"{name}.txt"
        if stored.is_file():
            (folder / "files" / stored.name).write_bytes(stored.read_bytes())


# (capability, a small cut of its real data in each format its reader takes)
SAMPLES = {
    "failure-nrel-csv": ("failure", "jobs.csv", lambda p: p.write_bytes(_head(REAL / "nrel" / "eagle_sample_jobs.csv", 120))),
    "failure-swf": ("failure", "trace.swf", lambda p: p.write_bytes(_swf_head(REAL / "swf" / "KTH-SP2-1996-2.1-cln.swf", 100))),
    "hold": ("hold", "EventLog", lambda p: p.write_bytes((REAL / "condor" / "htcondor_test_condor.log").read_bytes())),
    "similarity": ("similarity", "codings.csv",
                   lambda p: p.write_bytes(_head(REAL / "mistral" / "dkrz_mistral_job_codings_binary.csv", 200))),
    "resource": ("resource", "scripts", lambda p: _scripts(p, 20)),
}


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> dict[str, Path]:
    made = {}
    for name, (_, file_name, build) in SAMPLES.items():
        made[name] = tmp_path_factory.mktemp(f"fuzz-{name}") / file_name
        build(made[name])
    return made


def _files(source: Path) -> list[Path]:
    return sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]


@pytest.mark.timeout(max(1800, examples(25) * 2))  # `make fuzz` runs long
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")  # printed, not raised: a failure too
@pytest.mark.parametrize("name", list(SAMPLES))
def test_a_mutated_source_ends_in_a_report_or_a_jobaware_error(name, samples, tmp_path_factory):
    key, sample = SAMPLES[name][0], samples[name]
    files = _files(sample)
    seen = {"report": 0, "error": 0}
    work = tmp_path_factory.mktemp(f"case-{name}")  # one folder, emptied for each case: `make fuzz` fills no disk

    @fuzz_settings(examples(25))
    @given(which=st.integers(0, 10**6), mutations=st.lists(MUTATION, min_size=1, max_size=4))
    def read(which, mutations):
        shutil.rmtree(work)
        work.mkdir()
        source = work / sample.name
        if sample.is_dir():
            shutil.copytree(sample, source)
        target = source / files[which % len(files)].relative_to(sample) if sample.is_dir() else source
        target.write_bytes(mutate(files[which % len(files)].read_bytes(), mutations))
        started = time.monotonic()
        try:
            report = capabilities.get(key).ingest([str(source)], work / "dataset", strict=False, progress=None)
        except JobawareError as exc:
            assert str(exc).strip() and "Traceback" not in str(exc)
            seen["error"] += 1
        else:
            assert isinstance(report, ReadReport) and report.rows >= 0 and report.bad_rows >= 0
            seen["report"] += 1
        assert time.monotonic() - started < 60

    read()
    print(f"{name}: {seen['report']} mutated sources read with a report, {seen['error']} refused with a message")
    assert seen["report"] + seen["error"] > 0
