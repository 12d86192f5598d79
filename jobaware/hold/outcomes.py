"""How real holds ended, per hold code and subcode, fitted with the uncertainty a few dozen holds leave.

What happened next. After a hold, the job's next action is the first 013 (released), 009 (removed) or 005 of
the job in its log; none means it was still held when the log ends. For each hold code and subcode this module
estimates: the shares released, removed and still held; the hours from the hold to the release (and to the
removal) as a log-normal; the chance that a released job is held again before it ends; and the chance that a
released job not held again ends normally. The chance that a hold ends `release` (jobaware.hold.labels: the job
terminates normally afterwards), given that it ends at all, follows from these (`CodeOutcomes.p_release`).

Weights. One workflow can repeat one cause forty times: every hold weighs 1 / (the holds of its workflow), so
that each workflow counts once (`effective` holds is the sum of the weights).

Shrinkage. Each estimate of a code/subcode is pulled towards its code's, each code's towards all holds', and
those towards a weak prior (shares 1/3 each, one half for the two chances, a median of an hour to a release and
six hours to a removal), each with the weight of `PRIOR` workflows: a code seen in one workflow says little.
Intervals are the 5 % and 95 % points of the Beta posteriors (for `p_release`, of draws from them; the shares
released, removed and held are drawn each from its own Beta, an approximation of their joint Dirichlet).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import beta

from jobaware.hold.events import JOB_ABORTED, JOB_RELEASED, JOB_TERMINATED

PRIOR = 2.0  # the weight of the parent estimate, in workflows
ROOT = {"released": 1 / 3, "removed": 1 / 3, "held": 1 / 3, "reheld": 0.5, "ends_normally": 0.5,
        "release_log_hours": 0.0, "release_log_sigma": 1.5, "removal_log_hours": math.log(6.0),
        "removal_log_sigma": 1.5}
ACTIONS = ("released", "removed", "held")
DRAWS = 2000


def hold_ends(events: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """For each decision of `table` (jobaware.hold.labels.decisions over the events of ONE log): `action`, what
    the job's next 013, 009 or 005 says (released, removed; a termination means a release the log did not show,
    its hours unknown; `held` when none follows) and the `hours` to it."""
    ev = events.sort_values("seq", kind="stable")
    acts = ev[ev["event_code"].isin((JOB_RELEASED, JOB_ABORTED, JOB_TERMINATED))]
    keys = ["cluster", "proc", "subproc"]
    left = table[[*keys, "hold_seq", "hold_time"]].astype({k: "int64" for k in (*keys, "hold_seq")})
    right = acts[[*keys, "seq", "event_code", "time"]].astype({k: "int64" for k in (*keys, "seq", "event_code")})
    merged = pd.merge_asof(
        left.reset_index().sort_values("hold_seq"), right.rename(columns={"seq": "act_seq"}).sort_values("act_seq"),
        left_on="hold_seq", right_on="act_seq", by=keys, direction="forward", allow_exact_matches=False,
    ).set_index("index").reindex(table.index)
    code = merged["event_code"].to_numpy(dtype=float)
    action = np.select([(code == JOB_RELEASED) | (code == JOB_TERMINATED), code == JOB_ABORTED],
                       ["released", "removed"], "held")
    hours = (pd.to_datetime(merged["time"]) - pd.to_datetime(merged["hold_time"])).dt.total_seconds() / 3600
    hours = np.where(code == JOB_TERMINATED, np.nan, hours.to_numpy(dtype=float))
    return pd.DataFrame({"action": action, "hours": hours}, index=table.index)


@dataclass
class CodeOutcomes:
    """What became of the holds of one code/subcode (or code, or all holds), shrunk towards its parent."""

    holds: int = 0
    workflows: int = 0
    effective: float = 0.0
    released: float = ROOT["released"]
    removed: float = ROOT["removed"]
    held: float = ROOT["held"]
    reheld: float = ROOT["reheld"]
    ends_normally: float = ROOT["ends_normally"]
    release_log_hours: float = ROOT["release_log_hours"]
    release_log_sigma: float = ROOT["release_log_sigma"]
    removal_log_hours: float = ROOT["removal_log_hours"]
    removal_log_sigma: float = ROOT["removal_log_sigma"]
    intervals: dict = field(default_factory=dict)  # name -> [5 %, 95 %]

    def p_release(self) -> float:
        return release_chance(self.released, self.held, self.reheld, self.ends_normally)


def release_chance(released, held, reheld, ends_normally):
    """P(the hold ends `release` | it ends): a hold is released (r), and then held again (h: the same again) or
    not, and then ends normally (e); or removed; or still held (s: it never ends). q = r(1-h)e / (1 - rh) ends
    `release`, u = s / (1 - rh) never ends; the answer is q / (1 - u)."""
    loop = 1 - np.asarray(released) * np.asarray(reheld)
    q = np.asarray(released) * (1 - np.asarray(reheld)) * np.asarray(ends_normally) / loop
    u = np.asarray(held) / loop
    return np.clip(q / np.maximum(1 - u, 1e-9), 0.0, 1.0)


@dataclass
class Outcomes:
    """Fitted outcomes by key (`"13/2"`, `"13"`, `"all"`), the mix of first holds by code/subcode, and what they
    were fitted on."""

    codes: dict[str, CodeOutcomes]
    mix: dict[str, float]
    fitted_on: dict

    def lookup(self, code, subcode) -> CodeOutcomes:
        """The most specific estimate there is: code/subcode, else code, else all holds."""
        code = None if code is None or pd.isna(code) else int(code)
        subcode = -1 if subcode is None or pd.isna(subcode) else int(subcode)
        return self.codes.get(f"{code}/{subcode}") or self.codes.get(str(code)) or self.codes["all"]

    def p_release(self, codes: np.ndarray, subcodes: np.ndarray) -> np.ndarray:
        """P(release | the hold ends) of each hold, by its code and subcode."""
        return np.array([self.lookup(c, s).p_release() for c, s in zip(codes, subcodes)], dtype=float)

    def as_dict(self) -> dict:
        return {"codes": {k: asdict(v) for k, v in self.codes.items()}, "mix": self.mix, "fitted_on": self.fitted_on}

    @classmethod
    def from_dict(cls, data: dict) -> Outcomes:
        return cls({k: CodeOutcomes(**v) for k, v in data["codes"].items()}, dict(data["mix"]), dict(data["fitted_on"]))


def _estimate(part: pd.DataFrame, parent: CodeOutcomes, intervals: bool) -> CodeOutcomes:
    w = part["weight"].to_numpy(float)
    action = part["action"].to_numpy()
    total = w.sum()
    out = CodeOutcomes(holds=len(part), workflows=int(part["workflow"].nunique()), effective=float(total))
    counts = {a: float(w[action == a].sum()) for a in ACTIONS}
    bounds = {}
    for a in ACTIONS:
        prior = getattr(parent, a)
        setattr(out, a, (counts[a] + PRIOR * prior) / (total + PRIOR))
        bounds[a] = (counts[a] + PRIOR * prior, total - counts[a] + PRIOR * (1 - prior))
    released = action == "released"
    again = part["reheld"].to_numpy(bool)
    normal = (part["label"] == "release").fillna(False).to_numpy(bool)
    chances = (("reheld", released, again), ("ends_normally", released & ~again, normal))
    for name, among, hit in chances:
        n, k, prior = w[among].sum(), w[among & hit].sum(), getattr(parent, name)
        setattr(out, name, (k + PRIOR * prior) / (n + PRIOR))
        bounds[name] = (k + PRIOR * prior, n - k + PRIOR * (1 - prior))
    for name, among in (("release", released), ("removal", action == "removed")):
        hours = part["hours"].to_numpy(float)
        ok = among & np.isfinite(hours)
        x, wx = np.log(np.maximum(hours[ok], 1 / 60)), w[ok]
        mu_p, sigma_p = getattr(parent, f"{name}_log_hours"), getattr(parent, f"{name}_log_sigma")
        mu = (float((wx * x).sum()) + PRIOR * mu_p) / (wx.sum() + PRIOR)
        sigma = math.sqrt((float((wx * (x - mu) ** 2).sum()) + PRIOR * sigma_p ** 2) / (wx.sum() + PRIOR))
        setattr(out, f"{name}_log_hours", mu)
        setattr(out, f"{name}_log_sigma", sigma)
    if intervals:
        out.intervals = {name: _interval(*ab) for name, ab in bounds.items()}
        out.intervals["p_release"] = _p_release_interval(bounds)
    return out


def _interval(a: float, b: float) -> list[float]:
    return [float(beta.ppf(0.05, a, b)), float(beta.ppf(0.95, a, b))]


def _p_release_interval(bounds: dict) -> list[float]:
    """5 % and 95 % of P(release) over draws from the Beta posteriors of its four parts (seeded)."""
    rng = np.random.default_rng(0)
    values = release_chance(*(rng.beta(*bounds[n], DRAWS) for n in ("released", "held", "reheld", "ends_normally")))
    return [float(np.quantile(values, 0.05)), float(np.quantile(values, 0.95))]


def fit(holds: pd.DataFrame, intervals: bool = True) -> Outcomes:
    """Outcomes of real holds: one row per hold with hold_code, hold_subcode, hold_index, reheld, label, workflow,
    action and hours (jobaware.hold.outcomes.hold_ends); `intervals` false leaves them out (faster)."""
    holds = holds.assign(weight=1.0 / holds.groupby("workflow")["workflow"].transform("size"),
                         key_code=holds["hold_code"].astype("Int64").astype(str),
                         key=holds["hold_code"].astype("Int64").astype(str) + "/"
                         + holds["hold_subcode"].astype("Int64").fillna(-1).astype(str))
    root = CodeOutcomes()
    codes = {"all": _estimate(holds, root, intervals) if len(holds) else root}
    for code, part in holds.groupby("key_code", sort=True):
        codes[code] = _estimate(part, codes["all"], intervals)
    for key, part in holds.groupby("key", sort=True):
        codes[key] = _estimate(part, codes[key.split("/")[0]], intervals)
    first = holds[holds["hold_index"] == 0]
    mix = (first.groupby("key")["weight"].sum() / max(first["weight"].sum(), 1e-12)).sort_values(ascending=False)
    return Outcomes(codes, {k: float(v) for k, v in mix.items()},
                    {"holds": int(len(holds)), "workflows": int(holds["workflow"].nunique()),
                     "ended": int(holds["label"].notna().sum())})


def table(outcomes: Outcomes) -> pd.DataFrame:
    """One row per code/subcode: holds, workflows, the shares with their intervals, hours, chances, P(release)."""
    rows = []
    for key, c in outcomes.codes.items():
        if "/" not in key:
            continue
        row = {"code": key, "holds": c.holds, "workflows": c.workflows}
        for name in (*ACTIONS, "reheld", "ends_normally"):
            lo, hi = c.intervals.get(name, [float("nan")] * 2)
            row[name] = f"{getattr(c, name):.2f} [{lo:.2f}, {hi:.2f}]"
        row["hours_to_release"] = f"{math.exp(c.release_log_hours):.2f}"
        lo, hi = c.intervals.get("p_release", [float("nan")] * 2)
        row["p_release"] = f"{c.p_release():.2f} [{lo:.2f}, {hi:.2f}]"
        rows.append(row)
    return pd.DataFrame(rows).sort_values("holds", ascending=False, kind="stable").reset_index(drop=True)
