"""The site's stated policy: its own rule for holds, when the model may act, and the act itself.

The policy file (YAML or TOML) states:
  mode: dry-run                # or act (the `--act` flag also turns acting on)
  release_codes: [12, 13, 21, 26, 34]   # the site rule releases these hold codes (CODE or CODE/SUBCODE)...
  max_job_starts: 10           # ... while NumJobStarts is below this
  max_holds: 3                 # ... and NumHolds (this hold included) at most this
  remove_codes: []             # the site rule removes these (and allow-listed holds past the caps)
  manual_codes: [1, 15, 16]    # never acted upon, by the rule or the model (a person decides)
  release_above: 0.9           # the model releases at P(release) >= this (allow-listed codes, within the caps)
  remove_below: 0.05           # the model removes at P(release) <= this (any code not manual)
  acts_per_minute: 10          # at most this many acts in any 60 seconds; the rest are recorded, not done
  raise_memory: {margin: 0.2, cap_mb: 65536}   # absent: off. A job held for memory (code 34, its reason naming
                               # its limit and peak), not manual and within the caps: RequestMemory raised to its
                               # peak + margin (at most cap_mb) with condor_qedit, then released; where that is no
                               # more than its limit, or its peak is above cap_mb, the other decisions stand
The site rule is what `jobaware hold policy --print` writes as SYSTEM_PERIODIC_RELEASE / SYSTEM_PERIODIC_REMOVE
(with their _NAMES), so a site can compare the model with its rule. Codes not listed are left to a person. The defaults above are the typical rule the hold slice's baseline
(jobaware.hold.baselines) scores: release transfer, startd and policy holds, at most three holds per job.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from jobaware import settings
from jobaware.adapters.htcondor.memory import HELD_FOR_MEMORY, condor_request_memory

Code = tuple[int, int | None]
_CODE = re.compile(r"^(\d{1,4})(?:/(-?\d{1,10}))?$")


def _codes(values: list) -> list[Code]:
    out = []
    for value in values:
        text = str(value).strip() if not isinstance(value, bool) else ""
        match = _CODE.match(text)
        if not match:
            raise ValueError(f"{value!r} is not a hold code (CODE or CODE/SUBCODE, e.g. 13 or 26/103)")
        out.append((int(match.group(1)), int(match.group(2)) if match.group(2) is not None else None))
    return out


CodeList = list[int | str]


class RaiseMemory(BaseModel):
    """`raise_memory`: the margin over a memory hold's peak and the most RequestMemory (MB) it raises a job to."""

    model_config = ConfigDict(extra="forbid")

    margin: Annotated[float, Field(ge=0.0, le=10.0, allow_inf_nan=False)] = 0.2
    cap_mb: Annotated[int, Field(ge=1, le=1 << 30, strict=True)]


class Policy(BaseModel):
    """The site rule and the model's licence to act (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["dry-run", "act"] = "dry-run"
    release_codes: CodeList = Field(default_factory=lambda: [12, 13, 21, 26, 34])
    max_job_starts: Annotated[int, Field(ge=1, le=1000, strict=True)] = 10
    max_holds: Annotated[int, Field(ge=1, le=1000, strict=True)] = 3
    remove_codes: CodeList = Field(default_factory=list)
    manual_codes: CodeList = Field(default_factory=lambda: [1, 15, 16])
    release_above: Annotated[float, Field(gt=0.5, le=1.0, allow_inf_nan=False)] = 0.9
    remove_below: Annotated[float, Field(ge=0.0, lt=0.5, allow_inf_nan=False)] = 0.05
    acts_per_minute: Annotated[int, Field(ge=1, le=10_000, strict=True)] = 10
    raise_memory: RaiseMemory | None = None

    @field_validator("release_codes", "remove_codes", "manual_codes")
    @classmethod
    def _valid_codes(cls, values: list) -> list:
        _codes(values)
        return values

    @model_validator(mode="after")
    def _lists_do_not_overlap(self) -> Policy:
        lists = {"release_codes": self.release_codes, "remove_codes": self.remove_codes,
                 "manual_codes": self.manual_codes}
        seen: dict[Code, str] = {}
        for name, values in lists.items():
            for code in _codes(values):
                if code in seen:
                    raise ValueError(f"hold code {_show(code)} is in both {seen[code]} and {name}")
                seen[code] = name
        return self

    def parsed(self, name: str) -> list[Code]:
        return _codes(getattr(self, name))


def _show(code: Code) -> str:
    return str(code[0]) if code[1] is None else f"{code[0]}/{code[1]}"


def load_policy(path: str | Path | None) -> Policy:
    """The policy of a YAML or TOML file (the defaults when None); bad fields refused with one line."""
    return Policy() if path is None else settings.load(Policy, Path(path), "policy")


def _matches(code: int | None, subcode: int | None, codes: list[Code]) -> bool:
    return code is not None and any(c == code and (s is None or s == subcode) for c, s in codes)


@dataclass(frozen=True)
class Hold:
    """What the policy knows of a hold: the job, the hold's code and subcode, NumJobStarts and NumHolds."""

    cluster: int
    proc: int
    code: int | None
    subcode: int | None
    job_starts: int
    holds: int


@dataclass(frozen=True)
class Call:
    """A decision: release, remove, raise (RequestMemory to `memory_mb`, then release) or none, and the rule or
    threshold that fired."""

    action: Literal["release", "remove", "raise", "none"]
    fired: str
    memory_mb: int | None = None


def site_rule(policy: Policy, hold: Hold) -> Call:
    """What the site's own rule (the SYSTEM_PERIODIC_* pair of `condor_config`) does with this hold."""
    if _matches(hold.code, hold.subcode, policy.parsed("manual_codes")):
        return Call("none", "manual_codes")
    if _matches(hold.code, hold.subcode, policy.parsed("remove_codes")):
        return Call("remove", "remove_codes")
    if _matches(hold.code, hold.subcode, policy.parsed("release_codes")):
        if hold.job_starts >= policy.max_job_starts:
            return Call("remove", "max_job_starts")
        if hold.holds > policy.max_holds:
            return Call("remove", "max_holds")
        return Call("release", "release_codes")
    return Call("none", "not listed")


def model_call(policy: Policy, hold: Hold, p_release: float | None) -> Call:
    """What the model may do with this hold under the policy (before the mode, the model's training and the rate)."""
    if _matches(hold.code, hold.subcode, policy.parsed("manual_codes")):
        return Call("none", "manual_codes")
    if p_release is None:
        return Call("none", "no decision")
    if p_release <= policy.remove_below:
        return Call("remove", f"P(release) {p_release:.3f} <= remove_below {policy.remove_below}")
    if p_release >= policy.release_above:
        if not _matches(hold.code, hold.subcode, policy.parsed("release_codes")):
            return Call("none", f"P(release) {p_release:.3f} >= release_above, but code {hold.code} is not in "
                                "release_codes")
        if hold.job_starts >= policy.max_job_starts or hold.holds > policy.max_holds:
            return Call("none", f"P(release) {p_release:.3f} >= release_above, but past max_job_starts/max_holds")
        return Call("release", f"P(release) {p_release:.3f} >= release_above {policy.release_above}")
    return Call("none", f"P(release) {p_release:.3f} between remove_below and release_above")


def memory_call(policy: Policy, hold: Hold, request_mb: int | None, peak_mb: int | None) -> Call:
    """What the policy's `raise_memory` does with a job held at `request_mb` with a peak of `peak_mb` (MB): raise
    (RequestMemory to the peak with the margin, at most the cap) and release; or none and why (off, another code,
    no limit or peak named, a manual code, past max_job_starts/max_holds, a peak above the cap, no more to give),
    and the other decisions stand."""
    rule = policy.raise_memory
    if rule is None:
        return Call("none", "raise_memory off")
    if hold.code != HELD_FOR_MEMORY:
        return Call("none", f"code {hold.code} is not a memory hold ({HELD_FOR_MEMORY})")
    if request_mb is None:
        return Call("none", "the hold names no memory limit")
    if _matches(hold.code, hold.subcode, policy.parsed("manual_codes")):
        return Call("none", "manual_codes")
    if hold.job_starts >= policy.max_job_starts or hold.holds > policy.max_holds:
        return Call("none", "past max_job_starts/max_holds")
    if peak_mb is None:
        return Call("none", f"held at {request_mb} MB; no event names the job's peak")
    if peak_mb > rule.cap_mb:
        return Call("none", f"held at {request_mb} MB with a peak of {peak_mb} MB, above the cap of {rule.cap_mb} MB: "
                            "raising it to the cap would not help")
    new = condor_request_memory(request_mb, peak_mb, rule.margin, rule.cap_mb)
    if new is None:
        return Call("none", f"held at {request_mb} MB with a peak of {peak_mb} MB: no more to give (peak + "
                            f"{rule.margin:.0%}, cap {rule.cap_mb} MB)")
    return Call("raise", f"raise_memory: held at {request_mb} MB with a peak of {peak_mb} MB; RequestMemory {new} MB "
                         f"(peak + {rule.margin:.0%}, cap {rule.cap_mb} MB)", memory_mb=new)


def condor_config(policy: Policy) -> str:
    """The site rule as HTCondor configuration (SYSTEM_PERIODIC_RELEASE / _REMOVE and their _NAMES)."""
    def over(codes: list[Code]) -> str:
        terms = [f"HoldReasonCode == {c}" if s is None else f"(HoldReasonCode == {c} && HoldReasonSubCode == {s})"
                 for c, s in codes]
        return "(" + " || ".join(terms) + ")" if terms else "false"

    release, remove, manual = (policy.parsed(n) for n in ("release_codes", "remove_codes", "manual_codes"))
    not_manual = f"!{over(manual)}" if manual else "true"
    caps = f"NumJobStarts < {policy.max_job_starts} && NumHolds <= {policy.max_holds}"
    removes = (["jobaware_remove_codes"] if remove else []) + ["jobaware_max_job_starts", "jobaware_max_holds"]
    lines = [
        "# jobaware hold policy: the site rule, for comparison with the model (condor_config)",
        f"# manual (never released or removed by a rule): {', '.join(map(_show, manual)) or 'none'}",
        "SYSTEM_PERIODIC_RELEASE_NAMES = $(SYSTEM_PERIODIC_RELEASE_NAMES) jobaware_release_codes",
        f"SYSTEM_PERIODIC_RELEASE_jobaware_release_codes = JobStatus == 5 && {not_manual} && {over(release)} "
        f"&& {caps}",
        f"SYSTEM_PERIODIC_REMOVE_NAMES = $(SYSTEM_PERIODIC_REMOVE_NAMES) {' '.join(removes)}",
    ]
    if remove:
        lines.append(f"SYSTEM_PERIODIC_REMOVE_jobaware_remove_codes = JobStatus == 5 && {not_manual} && {over(remove)}")
    lines += [
        f"SYSTEM_PERIODIC_REMOVE_jobaware_max_job_starts = JobStatus == 5 && {not_manual} && {over(release)} "
        f"&& NumJobStarts >= {policy.max_job_starts}",
        f"SYSTEM_PERIODIC_REMOVE_jobaware_max_holds = JobStatus == 5 && {not_manual} && {over(release)} "
        f"&& NumHolds > {policy.max_holds}",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the act
def constraint(cluster: int, proc: int) -> str:
    return f"ClusterId == {cluster} && ProcId == {proc}"


def command_line(call: Call, cluster: int, proc: int, reason: str) -> str:
    """The condor_release / condor_rm / condor_qedit command line equivalent to the act."""
    if call.action == "release":
        return f"condor_release {cluster}.{proc}"
    if call.action == "raise":
        return f"condor_qedit {cluster}.{proc} RequestMemory {call.memory_mb} && condor_release {cluster}.{proc}"
    return f"condor_rm -reason {json.dumps(reason)} {cluster}.{proc}"


def bindings_call(call: Call, cluster: int, proc: int, reason: str) -> str:
    """The htcondor2 calls equivalent to the act."""
    job = constraint(cluster, proc)
    release = f"Schedd.act(JobAction.Release, {job!r}, reason={reason!r})"
    if call.action == "raise":
        return f"Schedd.edit({job!r}, 'RequestMemory', '{call.memory_mb}'); {release}"
    return release if call.action == "release" else f"Schedd.act(JobAction.Remove, {job!r}, reason={reason!r})"


class Actor:
    """Releases, removes or raises the memory of a job through an htcondor2 `Schedd` (or an object with the same
    `act` and `edit` methods)."""

    def __init__(self, schedd=None):
        if schedd is None:
            import htcondor2

            schedd = htcondor2.Schedd()
        self.schedd = schedd

    def act(self, action: str, cluster: int, proc: int, reason: str) -> str:
        """Do it; the schedd's answer in a few words. Raises what the bindings raise."""
        import htcondor2

        kind = htcondor2.JobAction.Release if action == "release" else htcondor2.JobAction.Remove
        answer = self.schedd.act(kind, constraint(cluster, proc), reason=reason)
        try:
            return ", ".join(f"{k}={answer[k]}" for k in ("TotalSuccess", "TotalError", "TotalNotFound")
                             if k in answer)
        except TypeError:
            return str(answer)[:200]

    def raise_memory(self, cluster: int, proc: int, memory_mb: int, reason: str) -> str:
        """Set RequestMemory to `memory_mb`, then release; the schedd's answers in a few words. Raises what the
        bindings raise, and before the release where no job took the new value (it would only be held again)."""
        edited = self.schedd.edit(constraint(cluster, proc), "RequestMemory", str(memory_mb))
        if not edited:
            raise LookupError(f"RequestMemory not set: no job matched {constraint(cluster, proc)}")
        return f"RequestMemory={memory_mb} on {edited} job(s); " + self.act("release", cluster, proc, reason)
