"""Request handling for the `resource` service and CLI, as plain functions over dicts and files.

`POST /classify` body: one script `{"name": ..., "text": ...}` (or `"base64"` for bytes), or a batch
`{"scripts": [{...}, ...]}`; optional `"top"` (features to report, 0-20). Answer:
`{"model_version", "feature_version", "results": [{"name", "class", "probabilities", "top_features",
"parse_status", "parse_detail", "kind", "not_a_job", "not_a_job_reason", "n_bytes", "decode_errors"}]}`.

`POST /pairing` body: `{"jobs": [{"id", "class"} | {"id", "text"} | {"id", "base64"}], "threshold": 0.5}`
-> each job's class and probabilities and the hints of `pairing.plan`.

Every number and string length is bounded before anything is built from it; errors are InputError whose
message starts with the JSON path of the bad field (`scripts[1].base64: ...`); a request over a size limit
raises PayloadTooLarge (an InputError the service answers with 413). Bytes that are not UTF-8 are answered
(decoded with replacement, `decode_errors` true), never refused. Answers are plain JSON (no NaN).
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

import numpy as np
import pandas as pd

from jobaware import fit
from jobaware.errors import InputError, TooLargeError
from jobaware.outputs import atomic_text
from jobaware.prediction import PredictionSummary
from jobaware.reading import write_quarantine
from jobaware.resource.bundle import ResourceBundle
from jobaware.resource.pairing import plan
from jobaware.resource.schema import BINDING, CLASSES, CONTRACT, NOT_A_JOB
from jobaware.sources import files as source_files

SCRIPT_FIELDS = {"name", "text", "base64"}
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
# integers every JSON reader keeps exactly (a float64 holds them; OpenAPI tools store bounds as floats)
SAFE_INTEGER = {"type": "integer", "minimum": -(2**53 - 1), "maximum": 2**53 - 1}


class PayloadTooLarge(TooLargeError):
    """A request over a size limit (HTTP 413)."""


class ServiceLimits(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

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


def _type(value) -> str:
    return "null" if value is None else type(value).__name__


def _object(value, path: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{path}: expected an object, got {_type(value)}")
    return value


def _unknown(item: dict, allowed: set[str], path: str) -> None:
    unknown = sorted(str(k) for k in item if k not in allowed)
    if unknown:
        raise InputError(f"{path}.{unknown[0][:64]}: unknown field; expected some of {', '.join(sorted(allowed))}")


def _identifier(value, path: str, limits: ServiceLimits) -> str:
    """A name or id: a string of at most max_name_chars, or an integer within +-(2**53 - 1); as a string."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not SAFE_INTEGER["minimum"] <= value <= SAFE_INTEGER["maximum"]:
            raise InputError(f"{path}: expected an integer within +-{SAFE_INTEGER['maximum']:,} (or a string), got {value}"[:200])
        return str(value)
    if not isinstance(value, str):
        raise InputError(f"{path}: expected a string or an integer, got {_type(value)}")
    if len(value) > limits.max_name_chars:
        raise InputError(f"{path}: {len(value)} characters; at most {limits.max_name_chars}")
    return value


def _script(item: dict, path: str, limits: ServiceLimits) -> tuple[str, bytes | str, int]:
    """(name, script, size in bytes) of one script object, checked and bounded."""
    name = _identifier(item.get("name", ""), f"{path}.name", limits)
    given = [k for k in ("text", "base64") if k in item]
    if len(given) != 1:
        raise InputError(f"{path}: give exactly one of 'text' or 'base64'")
    key = given[0]
    value = item[key]
    if not isinstance(value, str):
        raise InputError(f"{path}.{key}: expected a string, got {_type(value)}")
    if key == "text":
        if len(value) > limits.max_script_bytes:  # characters: a lower bound of the bytes
            raise PayloadTooLarge(f"{path}.text: over {limits.max_script_bytes:,} bytes")
        size = len(value.encode("utf-8", errors="surrogatepass"))
        if size > limits.max_script_bytes:
            raise PayloadTooLarge(f"{path}.text: {size:,} bytes; at most {limits.max_script_bytes:,}")
        return name, value, size
    if len(value) // 4 * 3 > limits.max_script_bytes + 3:
        raise PayloadTooLarge(f"{path}.base64: over {limits.max_script_bytes:,} bytes once decoded")
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{path}.base64: not valid base64") from None
    if len(data) > limits.max_script_bytes:
        raise PayloadTooLarge(f"{path}.base64: {len(data):,} bytes; at most {limits.max_script_bytes:,}")
    return name, data, len(data)


def _top(payload: dict, limits: ServiceLimits) -> int:
    top = payload.get("top", 5)
    if not isinstance(top, int) or isinstance(top, bool):
        raise InputError(f"top: expected an integer, got {_type(top)}")
    if not 0 <= top <= limits.max_top:
        raise InputError(f"top: expected 0 to {limits.max_top}, got {top}")
    return top


def _script_properties(limits: ServiceLimits) -> dict:
    return {"text": {"type": "string", "maxLength": limits.max_script_bytes,
                     "description": f"the script (at most {limits.max_script_bytes:,} bytes in UTF-8)"},
            "base64": {"type": "string", "pattern": BASE64_PATTERN,
                       "maxLength": limits.max_script_bytes // 3 * 4, "description": "or its bytes, base64-encoded"}}


def _name(limits: ServiceLimits, description: str) -> dict:
    return {"oneOf": [{"type": "string", "maxLength": limits.max_name_chars}, SAFE_INTEGER], "description": description}


def classify_schema(limits: ServiceLimits | None = None) -> dict:
    """The JSON schema of a /classify body, from the limits `parse_classify` checks (the service's OpenAPI
    document shows it): one script, or `scripts`; the bytes of all scripts together are bounded beyond it."""
    limits = limits or ServiceLimits()
    script = {"type": "object", "properties": {"name": _name(limits, "the script's name"), **_script_properties(limits)},
              "oneOf": [{"required": ["text"]}, {"required": ["base64"]}], "additionalProperties": False}
    single_fields = {"anyOf": [{"required": ["name"]}, {"required": ["text"]}, {"required": ["base64"]}]}
    return {"type": "object",
            "properties": {"scripts": {"type": "array", "items": script, "minItems": 1, "maxItems": limits.max_scripts},
                           **script["properties"],
                           "top": {"type": "integer", "minimum": 0, "maximum": limits.max_top,
                                   "description": "how many deciding features to report per script"}},
            "oneOf": [{"required": ["scripts"], "not": single_fields},
                      {"required": ["text"], "not": {"required": ["scripts"]}},
                      {"required": ["base64"], "not": {"required": ["scripts"]}}],
            "additionalProperties": False,
            "description": f"one script, or a batch of them (at most {limits.max_total_bytes:,} bytes of scripts in all)"}


def pairing_schema(limits: ServiceLimits | None = None) -> dict:
    """The JSON schema of a /pairing body, from the limits `parse_pairing` checks; job ids must also differ."""
    limits = limits or ServiceLimits()
    job = {"type": "object",
           "properties": {"id": _name(limits, "the job's id, unique in the request"),
                          "class": {"type": "string", "enum": [*CLASSES, NOT_A_JOB]}, **_script_properties(limits)},
           "required": ["id"],
           "oneOf": [{"required": ["class"], "not": {"anyOf": [{"required": ["text"]}, {"required": ["base64"]}]}},
                     {"required": ["text"], "not": {"anyOf": [{"required": ["class"]}, {"required": ["base64"]}]}},
                     {"required": ["base64"], "not": {"anyOf": [{"required": ["class"]}, {"required": ["text"]}]}}],
           "additionalProperties": False}
    return {"type": "object",
            "properties": {"jobs": {"type": "array", "items": job, "minItems": 2, "maxItems": limits.max_jobs},
                           "threshold": {"type": "number", "minimum": 0, "maximum": 1,
                                         "description": "the least score of a recommended pair (default 0.5)"}},
            "required": ["jobs"], "additionalProperties": False}


def parse_classify(payload, limits: ServiceLimits | None = None) -> tuple[list[tuple[str, bytes | str, int]], int]:
    """The scripts of a /classify body (name, script, bytes) and how many features to report."""
    limits = limits or ServiceLimits()
    payload = _object(payload, "body")
    top = _top(payload, limits)
    if "scripts" in payload:
        _unknown(payload, {"scripts", "top"}, "body")
        items = payload["scripts"]
        if not isinstance(items, list):
            raise InputError(f"scripts: expected a list of scripts, got {_type(items)}")
        if not items:
            raise InputError("scripts: empty list; give at least one script")
        if len(items) > limits.max_scripts:
            raise PayloadTooLarge(f"scripts: {len(items)} scripts; at most {limits.max_scripts} per request")
        paths = [f"scripts[{i}]" for i in range(len(items))]
    else:
        _unknown(payload, SCRIPT_FIELDS | {"top"}, "body")
        items, paths = [payload], ["body"]
    scripts, total = [], 0
    for item, path in zip(items, paths, strict=True):
        item = _object(item, path)
        if path != "body":
            _unknown(item, SCRIPT_FIELDS, path)
        scripts.append(_script(item, path, limits))
        total += scripts[-1][2]
        if total > limits.max_total_bytes:
            raise PayloadTooLarge(f"{path}: request over {limits.max_total_bytes:,} bytes of scripts in all")
    return scripts, top


def _answer(name: str, size: int, result: dict) -> dict:
    return {"name": name, "class": result["class"], "probabilities": result["probabilities"],
            "top_features": result["top_features"], "parse_status": result["parse_status"],
            "parse_detail": result["parse_detail"] or None, "kind": result["kind"],
            "not_a_job": result["not_a_job"], "not_a_job_reason": result["not_a_job_reason"], "n_bytes": size,
            "complete": result["complete"], "decode_errors": result["decode_errors"]}


def classify_request(payload, bundle: ResourceBundle, model_version: str | None = None,
                     limits: ServiceLimits | None = None, trained: dict | None = None) -> dict:
    """Answer a /classify body; `fit` says where the scripts are unlike what the model was `trained` on (its
    profile, `jobaware.fit`)."""
    limits = limits or ServiceLimits()
    scripts, top = parse_classify(payload, limits)
    features = analyse_within(bundle, [(name, script) for name, script, _ in scripts], limits.request_seconds)
    results = bundle.classify_features(features, top)
    return {"model_version": model_version, "feature_version": bundle.feature_version,
            "results": [_answer(name, size, r) for (name, _, size), r in zip(scripts, results, strict=True)],
            "fit": _fit(trained, model_version, [size for _, _, size in scripts])}


def _fit(trained: dict | None, version: str | None, sizes: list[int]) -> list[str]:
    return fit.answer_flags(trained, str(version), {"n_bytes": np.array(sizes, dtype="float64")}) if sizes else []


def analyse_within(bundle: ResourceBundle, scripts: list[tuple[str, bytes | str]], seconds: float) -> list:
    """Each script's features, all within `seconds`: each script may spend an equal share of what is left."""
    end = time.monotonic() + seconds
    features = []
    for i, (name, script) in enumerate(scripts):
        now = time.monotonic()
        features.append(bundle.analyse(script, name, now + max(0.0, end - now) / (len(scripts) - i)))
    return features


def parse_pairing(payload, limits: ServiceLimits | None = None) -> tuple[list[dict], float]:
    """The jobs of a /pairing body: dicts with `id` and either `class` or a script; and the threshold."""
    limits = limits or ServiceLimits()
    payload = _object(payload, "body")
    _unknown(payload, {"jobs", "threshold"}, "body")
    threshold = payload.get("threshold", 0.5)
    if not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0 <= threshold <= 1:
        raise InputError(f"threshold: expected a number from 0 to 1, got {threshold!r}"[:200])
    jobs = payload.get("jobs")
    if not isinstance(jobs, list):
        raise InputError(f"jobs: expected a list of jobs, got {_type(jobs)}")
    if len(jobs) < 2:
        raise InputError(f"jobs: {len(jobs)} job(s); pairing needs at least 2")
    if len(jobs) > limits.max_jobs:
        raise PayloadTooLarge(f"jobs: {len(jobs)} jobs; at most {limits.max_jobs} per request")
    parsed, seen, total = [], {}, 0
    for i, item in enumerate(jobs):
        path = f"jobs[{i}]"
        item = _object(item, path)
        _unknown(item, {"id", "class", "text", "base64"}, path)
        job_id = _identifier(item.get("id"), f"{path}.id", limits)
        if job_id in seen:
            raise InputError(f"{path}.id: duplicate of jobs[{seen[job_id]}].id ({job_id!r})")
        seen[job_id] = i
        if "class" in item:
            if "text" in item or "base64" in item:
                raise InputError(f"{path}: give either 'class' or a script ('text' / 'base64'), not both")
            label = item["class"]
            if label not in (*CLASSES, NOT_A_JOB):
                expected = ", ".join((*CLASSES, NOT_A_JOB))
                raise InputError(f"{path}.class: expected one of {expected}, got {label!r}"[:200])
            parsed.append({"id": job_id, "class": label})
            continue
        _, script, size = _script(item, path, limits)
        total += size
        if total > limits.max_total_bytes:
            raise PayloadTooLarge(f"{path}: request over {limits.max_total_bytes:,} bytes of scripts in all")
        parsed.append({"id": job_id, "script": script})
    return parsed, float(threshold)


def pairing_request(payload, bundle: ResourceBundle | None = None, model_version: str | None = None,
                    limits: ServiceLimits | None = None, trained: dict | None = None) -> dict:
    """Answer a /pairing body: classes (given or classified) and the pairs (`fit` as for /classify, over the
    scripts classified)."""
    limits = limits or ServiceLimits()
    jobs, threshold = parse_pairing(payload, limits)
    scripts = [j for j in jobs if "script" in j]
    sizes = [len(j["script"]) for j in scripts]
    if scripts:
        if bundle is None:
            raise InputError("jobs: scripts given but no model is loaded; give classes instead")
        features = analyse_within(bundle, [(j["id"], j["script"]) for j in scripts], limits.request_seconds)
        for job, result in zip(scripts, bundle.classify_features(features, top=0), strict=True):
            job.update({"class": result["class"], "probabilities": result["probabilities"], "source": "classified"})
    for job in jobs:
        job.pop("script", None)
        if "probabilities" not in job:
            job.update({"probabilities": {c: float(c == job["class"]) for c in (*BINDING, "other")},
                        "source": "given"})
    hints = plan(jobs, threshold, limits.max_pairs)
    return {"model_version": model_version if scripts else None, "threshold": threshold, "jobs": jobs, **hints,
            "fit": _fit(trained, model_version, sizes)}


def classify_files(paths: list[str | Path], bundle: ResourceBundle, detail: bool = False) -> list[dict]:
    """`jobaware resource classify FILE...` (files, globs, folders): one `{"file", "class", "probabilities"}` per file
    (more with `detail`)."""
    if not paths:
        raise InputError("no files given")
    paths = [Path(p) for p in source_files([str(p) for p in paths], recursive=True)]
    limit = bundle.limits.max_token_bytes
    scripts = []
    for path in paths:
        try:
            with open(path, "rb") as handle:
                scripts.append(handle.read(limit))
        except OSError as error:
            raise InputError(f"{path}: cannot read ({error.strerror or error})") from None
    results = bundle.classify(scripts, [str(p) for p in paths], top=5 if detail else 0)
    out = []
    for path, result in zip(paths, results, strict=True):
        row = {"file": str(path), "class": result["class"], "probabilities": result["probabilities"]}
        if detail:
            row.update(parse_status=result["parse_status"], not_a_job_reason=result["not_a_job_reason"],
                       top_features=result["top_features"])
        out.append(row)
    return out


def predict_file(inputs: list[str], output: str | Path, bundle: ResourceBundle, version: str | None = None,
                 progress=None, max_scripts: int = 100_000) -> PredictionSummary:
    """Classify labels.csv files (or folders holding them), folders of scripts or single scripts (globs
    taken); write JSON Lines (`-`: standard output).

    Each line: file, class, probabilities, parse_status, not_a_job (and `label` when the scripts come
    labelled). The counts per class (and the agreement with the labels) go to the summary."""
    from jobaware.resource.reader import read_scripts

    items, labelled, quarantined, problems = [], False, [], []
    sources = [str(s) for s in ([inputs] if isinstance(inputs, str | Path) else inputs)]
    for source in sources:
        path = Path(source)
        if path.name == "labels.csv" or (path.is_dir() and any(path.rglob("labels.csv"))):
            table, bad, report = read_scripts([str(path)])
            quarantined += bad
            problems += [str(p) for p in report.problems]
            items += list(zip(table["file"], table["content"], table["class"], strict=True))
            labelled = True
        else:
            items += [(name, Path(name).read_bytes()[: bundle.limits.max_token_bytes], None)
                      for name in source_files(str(path), recursive=True)[: max_scripts + 1]]
        if len(items) > max_scripts:
            raise InputError(f"{source}: more than {max_scripts:,} scripts; split the input")
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
