"""What a registered `hold` model carries, and how it decides holds from event-log rows.

The bundle serves one decision-maker (`decided_by`, chosen by jobaware.hold.train on real holds): a plain
policy (release all, remove all, the site's rule), an adaptive one (jobaware.hold.adaptive: the outcomes fitted
on real holds as its prior and the prior's strength), or a learned one with what it needs (the network's weights
and shape with the tensor parameters and the static encoder's vocabulary; the trees; the calibration to real
outcomes). It releases when P(release) is at least 1 / (1 + wrong_remove_cost) (jobaware.hold.deciders).
`predict` builds the same features from the events it is given as training did (jobaware.hold.features), so a
service never re-implements a feature. Every decision carries `decided_by` and `reasons`, a short line of what
drove it: the hold code and how real holds of that code ended, how this log's earlier holds ended, how often
this job and its siblings (its cluster's other jobs) were held and what happened after, and how long it is held.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from jobaware.errors import InputError
from jobaware.hold import adaptive
from jobaware.hold import features as F
from jobaware.hold.baselines import PolicyRule, TreeBaseline
from jobaware.hold.capability import FEATURE_VERSION
from jobaware.hold.deciders import Calibrator, threshold
from jobaware.hold.labels import current_holds, decisions, describe_hold
from jobaware.hold.model import HoldNetwork, StaticEncoder, predict_proba, threads
from jobaware.hold.outcomes import Outcomes
from jobaware.model import Bundle

# Bump whenever the features a model is fed change: a bundle built with other feature code is refused.
INPUT_COLUMNS = ("seq", "cluster", "proc", "subproc", "event_code", "time", "code", "subcode", "reason",
                 "terminated_normally", "return_value", "decide")
REQUIRED = ("cluster", "proc", "event_code", "time")
OUTPUT_COLUMNS = ("cluster", "proc", "subproc", "hold_seq", "hold_time", "hold_code", "hold_subcode", "hold_reason",
                  "p_release", "decision", "decided_by", "reasons")


def as_events(frame: pd.DataFrame) -> pd.DataFrame:
    """Event rows as the canonical columns the features need (seq from row order when absent)."""
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(f"events: missing column(s) {', '.join(missing)}; expected {', '.join(INPUT_COLUMNS)}")
    out = pd.DataFrame({
        "seq": frame["seq"].astype("int64") if "seq" in frame.columns else np.arange(len(frame), dtype=np.int64),
        "cluster": frame["cluster"].astype("int64"),
        "proc": frame["proc"].astype("int64"),
        "subproc": frame["subproc"].fillna(0).astype("int64") if "subproc" in frame.columns else 0,
        "event_code": frame["event_code"].astype("int64"),
        "time": pd.to_datetime(frame["time"]).astype("datetime64[ms]"),
    })
    for column, dtype in (("code", "Int64"), ("subcode", "Int64"), ("return_value", "Int64"),
                          ("terminated_normally", "boolean"), ("reason", "string")):
        out[column] = frame[column].astype(dtype) if column in frame.columns else pd.array([pd.NA] * len(frame), dtype)
    if out["seq"].duplicated().any():
        raise InputError("events: seq must be unique (the order of the events in the log)")
    return out.reset_index(drop=True)


@dataclass
class HoldBundle(Bundle):
    params: dict
    decided_by: str = "remove_all"  # jobaware.hold.deciders: a plain policy, an adaptive or a learned model
    why: str = ""  # why it serves, in one line (its score against the others on real holds)
    scores: dict = field(default_factory=dict)  # each decision-maker's metrics where it was chosen
    outcomes: dict = field(default_factory=dict)  # how real holds ended by code (jobaware.hold.outcomes)
    prior_strength: float = 1.0  # the adaptive decision-makers' prior, in holds (jobaware.hold.adaptive)
    network_state: dict | None = None
    static_pairs: list = field(default_factory=list)
    tree: TreeBaseline | None = None
    calibrator: Calibrator | None = None
    synthetic_weight: float = 0.0
    example: pd.DataFrame = field(default_factory=pd.DataFrame)
    feature_version: str = FEATURE_VERSION
    # what it learnt from and was measured on (jobaware.hold.train.trained_on)
    trained_on: dict = field(default_factory=dict)

    @property
    def threshold(self) -> float:
        """Release when the served P(release) is at least this: 1 / (1 + wrong_remove_cost)."""
        return threshold(self.params.get("wrong_remove_cost", 3.0))

    def network(self) -> HoldNetwork:
        if getattr(self, "_network", None) is None:
            p = self.params
            network = HoldNetwork(p["network"], p["j"], StaticEncoder(self.static_pairs).width, p["embedding_dim"],
                                  p["hidden_size"], p["layers"], p["dropout"])
            network.load_state_dict(self.network_state)
            network.eval()
            self._network = network
        return self._network

    def outcomes_fitted(self) -> Outcomes | None:
        return Outcomes.from_dict(self.outcomes) if self.outcomes else None

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_network", None)
        return state

    def chances(self, index: F.EventIndex, table: pd.DataFrame, counts: pd.DataFrame) -> np.ndarray:
        """The served P(release) of the decisions in `table` (rows of jobaware.hold.labels.decisions) over `index`;
        `counts` are their count features."""
        if self.feature_version != FEATURE_VERSION:
            raise InputError(f"model built with feature version {self.feature_version}, this code has "
                             f"{FEATURE_VERSION}: retrain it")
        n, p = len(table), self.params
        rule = PolicyRule(tuple(p["policy_codes"]), p["policy_max_releases"])
        if self.decided_by in ("release_all", "remove_all"):
            return np.full(n, 1.0 if self.decided_by == "release_all" else 0.0)
        if self.decided_by == "site_rule":
            return rule.predict_proba(F.static_features(table))
        if self.decided_by in adaptive.ADAPTIVE:
            return adaptive.chances(self.decided_by, counts, self.outcomes_fitted(), self.prior_strength, rule)
        if n == 0:
            return np.zeros(0)
        parts = []
        if self.decided_by in ("lstm", "blend"):
            states = F.build_tensors(index, table, p["m"], p["j"], p["timeframe_len"], p["seed"])
            static = StaticEncoder(self.static_pairs).transform(F.static_features(table).to_numpy())
            with threads(p.get("threads", 1)):
                parts.append(predict_proba(self.network(), states, static))
        if self.decided_by in ("gbt", "blend"):
            parts.append(self.tree.predict_proba(counts))
        return self.calibrator.predict(np.column_stack(parts) if len(parts) > 1 else parts[0])

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        """One row per decided hold: the job, the hold, P(release), the decision, who decided and what drove it.

        Decides the holds whose row has `decide` true when the column is given, else every hold that still
        stands at the end of the rows. Only events before each hold enter its features."""
        events = as_events(frame)
        table = decisions(events)
        if "decide" in frame.columns and len(table):
            marked = events.loc[frame["decide"].fillna(False).astype(bool).to_numpy(), "seq"]
            chosen = table["hold_seq"].isin(marked).to_numpy()
        else:
            chosen = current_holds(events, table) if len(table) else np.zeros(0, bool)
        table = table[chosen].reset_index(drop=True)
        index = F.build_index(events)
        counts = F.count_features(index, table) if len(table) else pd.DataFrame(columns=list(F.COUNT_FEATURES))
        p_release = self.chances(index, table, counts) if len(table) else np.zeros(0)
        held_hours = (events["time"].max() - table["hold_time"]).dt.total_seconds().to_numpy() / 3600 \
            if len(table) else np.zeros(0)
        return pd.DataFrame({
            "cluster": table["cluster"].astype("int64"),
            "proc": table["proc"].astype("int64"),
            "subproc": table["subproc"].astype("int64"),
            "hold_seq": table["hold_seq"].astype("int64"),
            "hold_time": table["hold_time"].astype("datetime64[ms]"),
            "hold_code": table["hold_code"].astype("float64"),
            "hold_subcode": table["hold_subcode"].astype("float64"),
            "hold_reason": [describe_hold(c, s) for c, s in zip(table["hold_code"], table["hold_subcode"])],
            "p_release": p_release.astype("float64"),
            "decision": np.where(p_release < self.threshold, "remove", "release"),
            "decided_by": [self.decided_by] * len(table),
            "reasons": reasons(table, counts, held_hours, self.outcomes_fitted()),
        })


def reasons(table: pd.DataFrame, counts: pd.DataFrame, held_hours: np.ndarray, fitted: Outcomes | None) -> list[str]:
    """What drove each decision, in a line an operator reads."""
    out = []
    for i, row in enumerate(table.itertuples(index=False)):
        c = counts.iloc[i]
        code = "?" if pd.isna(row.hold_code) else int(row.hold_code)
        key = f"{code}/{'?' if pd.isna(row.hold_subcode) else int(row.hold_subcode)}"
        line = [f"hold {key} ({describe_hold(row.hold_code, row.hold_subcode)})", adaptive.evidence_words(c),
                f"this job held {int(c['n_held_before'])} time(s) before, released {int(c['n_released'])}",
                f"its cluster's other jobs: {int(c['sib_held'])} held, {int(c['sib_released'])} released, "
                f"{int(c['sib_removed'])} removed, {int(c['sib_terminated'])} ended",
                f"held {held_hours[i]:.1f} h"]
        if fitted is not None:
            known = fitted.lookup(row.hold_code, row.hold_subcode)
            which = key if key in fitted.codes else str(code) if str(code) in fitted.codes else "all codes"
            low, high = known.intervals.get("p_release", [float("nan")] * 2)
            line.append(f"{fitted.fitted_on.get('source', 'real')} holds of {which}: {known.holds} in "
                        f"{known.workflows} workflow(s), P(release) {known.p_release():.2f} [{low:.2f}, {high:.2f}]")
        out.append("; ".join(line))
    return out


def signature():
    """The pyfunc signature: event rows in (cluster, proc, event_code, time required), decisions out."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    kinds = {"seq": "long", "cluster": "long", "proc": "long", "subproc": "long", "event_code": "long",
             "time": "datetime", "code": "double", "subcode": "double", "reason": "string",
             "terminated_normally": "boolean", "return_value": "double", "decide": "boolean"}
    inputs = Schema([ColSpec(kinds[c], c, required=c in REQUIRED) for c in INPUT_COLUMNS])
    outputs = Schema([ColSpec("long", "cluster"), ColSpec("long", "proc"), ColSpec("long", "subproc"),
                      ColSpec("long", "hold_seq"), ColSpec("datetime", "hold_time"), ColSpec("double", "hold_code"),
                      ColSpec("double", "hold_subcode"), ColSpec("string", "hold_reason"),
                      ColSpec("double", "p_release"), ColSpec("string", "decision"), ColSpec("string", "decided_by"),
                      ColSpec("string", "reasons")])
    return ModelSignature(inputs=inputs, outputs=outputs)


def input_example(bundle: HoldBundle) -> pd.DataFrame:
    """The events of one held job from the training data, in the signature's plain types."""
    return bundle.example.copy()


def example_rows(events: pd.DataFrame, table: pd.DataFrame, limit: int = 12) -> pd.DataFrame:
    """A few event rows that end in a hold (the last rows of one held job), typed for the signature."""
    if len(table) == 0:
        return pd.DataFrame(columns=list(INPUT_COLUMNS))
    hold = table.iloc[-1]
    mine = events[(events["cluster"] == hold["cluster"]) & (events["proc"] == hold["proc"])
                  & (events["seq"] <= hold["hold_seq"])].sort_values("seq").tail(limit)
    out = pd.DataFrame({
        "seq": mine["seq"].astype("int64"), "cluster": mine["cluster"].astype("int64"),
        "proc": mine["proc"].astype("int64"), "subproc": mine["subproc"].astype("int64"),
        "event_code": mine["event_code"].astype("int64"), "time": mine["time"].astype("datetime64[ns]"),
        "code": mine["code"].astype("float64"), "subcode": mine["subcode"].astype("float64"),
        "reason": mine["reason"].astype(object), "terminated_normally": mine["terminated_normally"].astype(object),
        "return_value": mine["return_value"].astype("float64"), "decide": mine["seq"] == hold["hold_seq"],
    })
    return out.reset_index(drop=True)
