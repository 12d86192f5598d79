"""Request handling for the `resource` service and CLI, as plain functions over dicts and files.

`POST /classify` body: one script `{"name": ..., "text": ...}` (or `"base64"` for bytes), or a batch
`{"scripts": [{...}, ...]}`; optional `"top"` (features to report, 0-20). Answer:
`{"model_version", "feature_version", "results": [{"name", "class", "probabilities", "top_features",
"parse_status", "parse_detail", "kind", "not_a_job", "not_a_job_reason", "n_bytes", "decode_errors"}]}`.

`POST /pairing` body: `{"jobs": [{"id", "class"} | {"id", "text"} | {"id", "base64"}], "threshold": 0.5}`
-> each job's class and probabilities and the hints of `pairing.plan`.

`Limits` are what the service accepts (`JOBAWARE_RESOURCE_*`); `request_models` declares both bodies under them,
bounds and all (`ClassifyRequest`, `PairingRequest`: under the limits read at start); `classify` and `pairing`
answer a checked body. Errors are InputError whose message starts with the JSON path of the bad field
(`scripts[1].base64: ...`); a request over a size limit raises TooLargeError (the service answers 413). Bytes that
are not UTF-8 are answered (decoded with replacement, `decode_errors` true), never refused. Answers are plain JSON
(no NaN).
"""

from __future__ import annotations

import base64
import json
import time
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field, model_validator
from pydantic_settings import SettingsConfigDict

from jobaware import fit
from jobaware.bodies import Body, Matching, worded
from jobaware.bodies import Limits as BaseLimits
from jobaware.errors import InputError, TooLargeError, UnreadableFile
from jobaware.model import Served
from jobaware.outputs import atomic_text
from jobaware.prediction import PredictionSummary
from jobaware.reading import WHOLE_FILE, Problem, binary_reason, unreadable, write_quarantine
from jobaware.resource.pairing import plan
from jobaware.resource.schema import BINDING, CLASSES, CONTRACT, NOT_A_JOB
from jobaware.sources import files as source_files

BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
SAFE_INTEGER = 2**53 - 1  # integers every JSON reader keeps exactly (a float64 holds them)


class Limits(BaseLimits):
    """What the service accepts, each read from JOBAWARE_RESOURCE_<NAME> (JOBAWARE_RESOURCE_MAX_SCRIPTS, ...)."""

    model_config = SettingsConfigDict(env_prefix="JOBAWARE_RESOURCE_")

    max_scripts: int = Field(64, ge=1, le=10_000)
    max_script_bytes: int = Field(1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    max_total_bytes: int = Field(8 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    max_name_chars: int = Field(128, ge=1, le=4096)
    max_jobs: int = Field(128, ge=2, le=10_000)
    max_pairs: int = Field(1000, ge=1, le=1_000_000)
    max_top: int = Field(20, ge=0, le=100)
    # the work budget of one request: seconds of parsing, shared by its scripts (a script not read whole in its
    # share is answered from what was read, `complete` false)
    request_seconds: float = Field(1.0, gt=0, le=60)


@cache
def request_models(limits: Limits) -> tuple[type[Body], type[Body]]:
    """The bodies of `POST /classify` and `POST /pairing` under `limits` (the service's OpenAPI document shows
    them). Beyond them: the bytes of all scripts together are bounded, and job ids differ."""
    Identifier = worded(Annotated[str, Field(max_length=limits.max_name_chars)]
                        | Annotated[int, Field(ge=-SAFE_INTEGER, le=SAFE_INTEGER)],
                        f"expected a string of at most {limits.max_name_chars} characters or an integer within "
                        f"+-{SAFE_INTEGER:,}")
    Text = Annotated[str, Field(max_length=limits.max_script_bytes,
                                description=f"the script (at most {limits.max_script_bytes:,} bytes in UTF-8)")]
    groups = -(-limits.max_script_bytes // 3)  # base64 of at most max_script_bytes, in whole groups of 3 bytes
    Encoded = Annotated[str, Field(max_length=groups * 4, description=f"or its bytes, base64-encoded (at most "
                                   f"{groups * 4:,} characters)"), Matching(BASE64_PATTERN, "not valid base64")]
    one_script = {"oneOf": [{"required": ["text"]}, {"required": ["base64"]}]}

    class Script(Body):
        model_config = ConfigDict(json_schema_extra=one_script)

        name: Identifier = Field("", description="the script's name")
        text: Text | None = None
        base64: Encoded | None = None

        @model_validator(mode="after")
        def _one_script(self) -> Script:
            if (self.text is None) == (self.base64 is None):
                raise ValueError("give exactly one of 'text' or 'base64'")
            return self

    single = {"anyOf": [{"required": ["name"]}, {"required": ["text"]}, {"required": ["base64"]}]}

    class ClassifyRequest(Body):
        model_config = ConfigDict(json_schema_extra={
            "oneOf": [{"required": ["scripts"], "not": single},
                      {"required": ["text"], "not": {"required": ["scripts"]}},
                      {"required": ["base64"], "not": {"required": ["scripts"]}}],
            "description": f"one script, or a batch of them (at most {limits.max_total_bytes:,} bytes of scripts in all)"})

        scripts: Annotated[list[Script], Field(min_length=1, max_length=limits.max_scripts)] | None = None
        name: Identifier = Field("", description="the script's name")
        text: Text | None = None
        base64: Encoded | None = None
        top: int = Field(5, ge=0, le=limits.max_top, description="how many deciding features to report per script")

        @model_validator(mode="after")
        def _one_or_a_batch(self) -> ClassifyRequest:
            given = [field for field in ("name", "text", "base64") if field in self.model_fields_set]
            if self.scripts is not None and given:
                raise ValueError(f"{given[0]}: give one script or a list of scripts, not both")
            if self.scripts is None and (self.text is None) == (self.base64 is None):
                raise ValueError("text: give exactly one of 'text' or 'base64' (or a list of scripts)")
            return self

    class Job(Body):
        model_config = ConfigDict(json_schema_extra={"oneOf": [
            {"required": ["class"], "not": {"anyOf": [{"required": ["text"]}, {"required": ["base64"]}]}},
            {"required": ["text"], "not": {"anyOf": [{"required": ["class"]}, {"required": ["base64"]}]}},
            {"required": ["base64"], "not": {"anyOf": [{"required": ["class"]}, {"required": ["text"]}]}}]})

        id: Identifier = Field(description="the job's id, unique in the request")
        label: Literal[*CLASSES, NOT_A_JOB] | None = Field(None, alias="class")
        text: Text | None = None
        base64: Encoded | None = None

        @model_validator(mode="after")
        def _class_or_script(self) -> Job:
            if [self.label, self.text, self.base64].count(None) != 2:
                raise ValueError("give one of 'class' or a script ('text' / 'base64')")
            return self

    class PairingRequest(Body):
        jobs: list[Job] = Field(min_length=2, max_length=limits.max_jobs)
        threshold: float = Field(0.5, ge=0, le=1, description="the least score of a recommended pair")

    return ClassifyRequest, PairingRequest


LIMITS = Limits.load()
ClassifyRequest, PairingRequest = request_models(LIMITS)


# Why a body valid by the OpenAPI document may still be refused (the reason with numbers and quoted values blanked as
# #): what no JSON Schema can state. Most valid bodies need nothing beyond the document: at least VALID_ANSWERED of
# them must be answered.
UNSTATABLE = (r"^jobs\[#\]\.id: duplicate of jobs\[#\]\.id",)
VALID_ANSWERED = 0.6


def _script(item, path: str, limits: Limits) -> tuple[bytes | str, int]:
    """(script, size in bytes) of a checked script; the bytes of a text bounded (base64 is, by its length)."""
    if item.text is None:
        data = base64.b64decode(item.base64)
        return data, len(data)
    size = len(item.text.encode("utf-8", errors="surrogatepass"))
    if size > limits.max_script_bytes:
        raise TooLargeError(f"{path}.text: {size:,} bytes; at most {limits.max_script_bytes:,}".lstrip("."))
    return item.text, size


def _within_total(total: int, path: str, limits: Limits) -> None:
    if total > limits.max_total_bytes:
        raise TooLargeError(f"{path}: request over {limits.max_total_bytes:,} bytes of scripts in all")


def scripts_of(body, limits: Limits) -> list[tuple[str, bytes | str, int]]:
    """The scripts of a /classify body (name, script, bytes), their bytes bounded one by one and in all."""
    items = [(body, "")] if body.scripts is None else [(s, f"scripts[{i}]") for i, s in enumerate(body.scripts)]
    scripts, total = [], 0
    for item, path in items:
        scripts.append((str(item.name), *_script(item, path, limits)))
        total += scripts[-1][2]
        _within_total(total, path or "text", limits)
    return scripts


def _answer(name: str, size: int, result: dict) -> dict:
    return {"name": name, "class": result["class"], "probabilities": result["probabilities"],
            "top_features": result["top_features"], "parse_status": result["parse_status"],
            "parse_detail": result["parse_detail"] or None, "kind": result["kind"],
            "not_a_job": result["not_a_job"], "not_a_job_reason": result["not_a_job_reason"], "n_bytes": size,
            "complete": result["complete"], "decode_errors": result["decode_errors"]}


def classify(body, model: Served, limits: Limits = LIMITS) -> dict:
    """Each script's class, probabilities and deciding features; `fit` says where the scripts are unlike what the
    model was trained on (its profile, `jobaware.fit`)."""
    scripts = scripts_of(body, limits)
    bundle = model.bundle
    features = analyse_within(bundle, [(name, script) for name, script, _ in scripts], limits.request_seconds)
    results = bundle.classify_features(features, body.top)
    return {"model_version": model.version, "feature_version": bundle.feature_version,
            "results": [_answer(name, size, r) for (name, _, size), r in zip(scripts, results, strict=True)],
            "fit": _fit(model, [size for _, _, size in scripts])}


def _fit(model: Served, sizes: list[int]) -> list[str]:
    return model.fit({"n_bytes": np.array(sizes, dtype="float64")}) if sizes else []


def analyse_within(bundle, scripts: list[tuple[str, bytes | str]], seconds: float) -> list:
    """Each script's features, all within `seconds`: each script may spend an equal share of what is left."""
    end = time.monotonic() + seconds
    features = []
    for i, (name, script) in enumerate(scripts):
        now = time.monotonic()
        features.append(bundle.analyse(script, name, now + max(0.0, end - now) / (len(scripts) - i)))
    return features


def jobs_of(body, limits: Limits) -> list[dict]:
    """The jobs of a /pairing body: dicts with `id` and either `class` or a script; ids differ."""
    parsed, seen, total = [], {}, 0
    for i, job in enumerate(body.jobs):
        path = f"jobs[{i}]"
        job_id = str(job.id)
        if job_id in seen:
            raise InputError(f"{path}.id: duplicate of jobs[{seen[job_id]}].id ({job_id!r})")
        seen[job_id] = i
        if job.label is not None:
            parsed.append({"id": job_id, "class": job.label})
            continue
        script, size = _script(job, path, limits)
        total += size
        _within_total(total, path, limits)
        parsed.append({"id": job_id, "script": script})
    return parsed


def pairing(body, model: Served | None, limits: Limits = LIMITS) -> dict:
    """Each job's class (given or classified) and the pairs whose bottlenecks differ (`fit` as for /classify, over
    the scripts classified)."""
    jobs = jobs_of(body, limits)
    scripts = [j for j in jobs if "script" in j]
    sizes = [len(j["script"]) for j in scripts]
    if scripts:
        if model is None:
            raise InputError("jobs: scripts given but no model is loaded; give classes instead")
        features = analyse_within(model.bundle, [(j["id"], j["script"]) for j in scripts], limits.request_seconds)
        for job, result in zip(scripts, model.bundle.classify_features(features, top=0), strict=True):
            job.update({"class": result["class"], "probabilities": result["probabilities"], "source": "classified"})
    for job in jobs:
        job.pop("script", None)
        if "probabilities" not in job:
            job.update({"probabilities": {c: float(c == job["class"]) for c in (*BINDING, "other")},
                        "source": "given"})
    hints = plan(jobs, body.threshold, limits.max_pairs)
    return {"model_version": model.version if scripts else None, "threshold": body.threshold, "jobs": jobs, **hints,
            "fit": _fit(model, sizes) if scripts else []}


MAX_SCRIPT_BYTES = 16 * 1024 * 1024  # read of a script at most: the largest parse limit a bundle may have


def read_script(path: str | Path) -> tuple[bytes | None, Problem | None]:
    """A script's bytes (at most MAX_SCRIPT_BYTES), or the problem that makes it no script (unreadable, binary). An
    empty file is a script (the labelled real scripts hold some, of class `other`)."""
    try:
        with open(path, "rb") as handle:
            content = handle.read(MAX_SCRIPT_BYTES)
    except OSError as error:
        return None, Problem(str(path), None, WHOLE_FILE, "", f"cannot read ({error.strerror or error})")
    reason = binary_reason(content[:65536]) if content else None
    return (None, Problem(str(path), None, WHOLE_FILE, "", reason)) if reason else (content, None)


def read_scripts_given(sources: list[str], max_scripts: int = 100_000) -> list[tuple[str, bytes | None, Problem | None]]:
    """Every file the sources (files, globs, folders) name, in order, with its bytes or the problem that makes it no
    script; an InputError when none is one (reading nothing is not success, of the files together)."""
    found = [(name, *read_script(name))
             for name in source_files([str(s) for s in sources], recursive=True)[: max_scripts + 1]]
    if len(found) > max_scripts:
        raise InputError(f"{', '.join(map(str, sources))}: more than {max_scripts:,} scripts; split the input")
    if all(problem is not None for _, _, problem in found):
        first = f"; first: {found[0][2]}" if found else ""
        raise InputError(f"{', '.join(map(str, sources))}: no script read ({len(found):,} not a script){first}")
    return found


CLASSIFIED = "classified"  # the status of a script classify read; any other is why a file was not read


def classify_files(paths: list[str | Path], model, detail: bool = False) -> list[dict]:
    """`jobaware resource classify FILE...` (files, globs, folders): one `{"file", "status", "class", "probabilities"}`
    per file, in order (more with `detail`): `status` CLASSIFIED, or why the file is no script (`class` None). The
    files are read before `model()` loads the model; when none is a script, an InputError and no model loaded."""
    if not paths:
        raise InputError("no files given")
    found = read_scripts_given([str(p) for p in paths])
    scripts = [(name, content) for name, content, problem in found if problem is None]
    bundle, _ = model()
    results = iter(bundle.classify([content for _, content in scripts], [name for name, _ in scripts],
                                   top=5 if detail else 0))
    rows = []
    for name, _, problem in found:
        if problem is not None:
            rows.append({"file": str(name), "status": f"not read: {problem.reason}", "class": None, "probabilities": {}})
            continue
        result = next(results)
        row = {"file": str(name), "status": CLASSIFIED, "class": result["class"], "probabilities": result["probabilities"]}
        if detail:
            row.update(parse_status=result["parse_status"], not_a_job_reason=result["not_a_job_reason"],
                       top_features=result["top_features"])
        rows.append(row)
    return rows


def predict_file(inputs: list[str], output: str | Path, model, progress=None,
                 max_scripts: int = 100_000) -> PredictionSummary:
    """Classify labels.csv files (or folders holding them), folders of scripts or single scripts (globs
    taken); write JSON Lines (`-`: standard output). The scripts are read before `model()` loads the model.

    Each line: file, class, probabilities, parse_status, not_a_job (and `label` when the scripts come
    labelled). The counts per class (and the agreement with the labels) go to the summary."""
    from jobaware.resource.reader import read_scripts

    items, labelled, quarantined, problems = [], False, [], []
    sources = [str(s) for s in ([inputs] if isinstance(inputs, str | Path) else inputs)]
    for source in sources:
        path = Path(source)
        if path.name == "labels.csv" or (path.is_dir() and any(path.rglob("labels.csv"))):
            try:
                table, bad, report = read_scripts([str(path)])
            except UnreadableFile as error:  # among several sources, one bad record; the others are read
                if len(sources) == 1:
                    raise
                problem, record = unreadable(path, error)
                problems.append(str(problem))
                quarantined.append(record)
                continue
            quarantined += bad
            problems += [str(p) for p in report.problems]
            items += list(zip(table["file"], table["content"], table["class"], strict=True))
            labelled = True
        else:
            found = [(name, *read_script(name)) for name in source_files(str(path), recursive=True)[: max_scripts + 1]]
            items += [(name, content, None) for name, content, problem in found if problem is None]
            quarantined += [{"file": p.file, "reason": p.reason} for _, _, p in found if p is not None]
            problems += [str(p) for _, _, p in found if p is not None]
        if len(items) > max_scripts:
            raise InputError(f"{source}: more than {max_scripts:,} scripts; split the input")
    if not items:
        first = f"; first: {problems[0]}" if problems else ""
        raise InputError(f"{', '.join(sources)}: no script read ({len(quarantined):,} bad record(s)){first}")
    bundle, version = model()
    counts: dict[str, float] = {}
    agree = 0
    with atomic_text(output) as handle:
        for start in range(0, len(items), 256):
            chunk = items[start : start + 256]
            results = bundle.classify([c for _, c, _ in chunk], [str(n) for n, _, _ in chunk], top=0)
            for (name, _, label), result in zip(chunk, results, strict=True):
                row = {"file": str(name), "class": result["class"], "probabilities": result["probabilities"],
                       "parse_status": result["parse_status"], "not_a_job": result["not_a_job"],
                       "model_version": version}
                if label is not None:
                    row["label"] = label
                    agree += int(label == result["class"])
                counts[f"class_{result['class']}"] = counts.get(f"class_{result['class']}", 0) + 1
                handle.write(json.dumps(row) + "\n")
            if progress:
                progress(len(chunk))
    if labelled and items:
        counts["agreement_with_labels"] = round(agree / len(items), 4)
    return PredictionSummary(predictions=len(items), model_version=str(version), output=str(output),
                             bad_records=len(quarantined), quarantine=write_quarantine(output, quarantined),
                             problems=problems[:20], counts=dict(sorted(counts.items())),
                             input_profile=fit.describe({CONTRACT: pd.DataFrame({"n_bytes": [len(c) for _, c, _ in items]})},
                                                       sources))
