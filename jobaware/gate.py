"""The promotion gate and rollback: the `champion` alias of `jobaware-<key>` moves only here.

`promote` moves `champion` to a candidate version only when all of these hold:
- the registry answered every question (an error other than "no such alias" stops the gate; nothing moves);
- both models' files are the ones their training logged (`tracking.load_bundle` checks the digest recorded on
  each version before it deserialises anything; a mismatch, or no digest, stops the gate, `--force` included);
- both models can be scored by this jobaware: each bundle records the feature-code version it was trained
  with, and a bundle from other feature code is never scored through this code;
- each evaluation set the decision rests on holds at least the capability's `min_eval_rows` rows;
- the candidate's score on the primary metric is defined and at least as good as the champion's on the
  candidate's evaluation data and, when the champion was evaluated on other data (another source or another
  split), on the champion's evaluation data too: a model is never promoted on its own test set alone. Public traces
  are not a site: when one of the two was evaluated on public traces (`jobaware.fit`'s kind `public`) and the other
  on a site's own jobs, the site's evaluation data alone decides;
- "at least as good": where the capability registers `compare`, the confidence interval of the difference
  (candidate - champion) reaches no lower than -`gate_margin` (not worse beyond the margin, at the interval's
  confidence; a smaller evaluation set gives a wider interval, and the reason says about how many more rows would
  decide); else the candidate's point score is at least the champion's;
- the candidate is not older than the champion (a lower version number): going back is `rollback`'s, so that of
  two pipelines promoting at once the newer version stays champion whichever finishes last;
- or the person forced it (`--force`), which is logged as such.
Every promotion and rollback is an MLflow run of its own; the registered model keeps the list of earlier
champions (a tag) for `rollback`.

Promotions and rollbacks of one model happen one at a time (`tracking.registry_lock`: a file lock beside the
embedded store), so that the champion and its history stay true when two pipelines promote at once. A tracking
server has no lock to offer: there the champion is read again right before it is moved, and a promotion that finds
it moved meanwhile moves nothing. What stays racy on a server: two promotions that both pass that last read within
the same moment (one request apart), and the history tag, written after that read (MLflow has no compare-and-set);
run one pipeline of a capability at a time there.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

from jobaware import capabilities
from jobaware.errors import JobawareError
from jobaware.tracking import (
    EVAL_DIR,
    EVAL_TAG,
    TRAINED_ON_TAG,
    IntegrityError,
    RegistryError,
    alias_version,
    experiment_id,
    load_bundle,
    mlflow_client,
    model_version,
    registry_call,
    registry_lock,
    run_tags,
    version_score,
)

HISTORY_TAG = "jobaware.champion_history"


def _eval_folder(client, name: str, version: str, into: Path) -> Path:
    mlflow, _ = mlflow_client()
    run_id = model_version(client, name, version).run_id
    path = registry_call(lambda: mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=EVAL_DIR,
                                                                     dst_path=str(into)), f"the evaluation data of version {version}")
    return Path(path)


def _eval_sha(client, name: str, version: str) -> str | None:
    run_id = model_version(client, name, version).run_id
    return registry_call(lambda: client.get_run(run_id), f"the run of version {version}").data.tags.get(EVAL_TAG)


def _history(client, name: str) -> list[str]:
    tags = registry_call(lambda: client.get_registered_model(name), name).tags
    return json.loads(tags.get(HISTORY_TAG, "[]"))


def _log_action(key: str, action: str, params: dict, metrics: dict) -> None:
    mlflow, _ = mlflow_client()
    with mlflow.start_run(experiment_id=experiment_id(key), run_name=action,
                          tags=run_tags(**{"jobaware.action": action})):
        mlflow.log_params(params)
        mlflow.log_metrics({k: v for k, v in metrics.items() if isinstance(v, float) and math.isfinite(v)})


def _gate(key: str, client, candidate: str, champion: str | None) -> tuple[list[dict], list[str]]:
    """Score candidate and champion on every evaluation set the decision needs; return the checks and
    the reasons (if any) not to promote."""
    capability = capabilities.get(key)
    name = capability.model_name
    reasons: list[str] = []
    try:
        bundles = {candidate: load_bundle(key, candidate)[0]}
        if champion is not None:
            bundles[champion] = load_bundle(key, champion)[0]
    except (RegistryError, IntegrityError):  # a registry that does not answer, files not as recorded: nothing moves
        raise
    except JobawareError as exc:
        return [], [str(exc)]
    sets = [candidate]
    if champion is not None and _eval_sha(client, name, champion) != _eval_sha(client, name, candidate):
        sets.append(champion)  # evaluated on other data: the candidate must be as good on the champion's too
        public = {owner: _trained_kind(client, name, owner) == "public" for owner in sets}
        if public[candidate] != public[champion]:  # the site's own jobs decide, not other sites'
            sets = [owner for owner in sets if not public[owner]]
    checks = []
    with tempfile.TemporaryDirectory() as tmp:
        for owner in sets:
            folder = _eval_folder(client, name, owner, Path(tmp) / owner)
            check = {"eval_data_of": owner, "rows": 0, "candidate": float("nan"), "champion": float("nan")}
            check["candidate"], check["rows"] = capability.score(bundles[candidate], folder)
            if champion is not None:
                check["champion"], _ = capability.score(bundles[champion], folder)
            checks.append(check)
            where = f"the evaluation data of version {owner}"
            if check["rows"] < capability.min_eval_rows:
                reasons.append(f"{where} has {check['rows']:,} rows; the gate needs at least "
                               f"{capability.min_eval_rows:,} to decide")
            elif not math.isfinite(check["candidate"]):
                reasons.append(f"{capability.primary_metric} of version {candidate} is undefined on {where}")
            elif champion is not None and math.isfinite(check["champion"]) and capability.compare is not None:
                check.update(capability.compare(bundles[candidate], bundles[champion], folder))
                if not check["low"] >= -capability.gate_margin:
                    reasons.append(_interval_reason(capability, candidate, check, where))
            elif champion is not None and math.isfinite(check["champion"]) and not capability.better(
                    check["candidate"], check["champion"]):
                reasons.append(f"version {candidate} scores {check['candidate']:.4f} against the champion's "
                               f"{check['champion']:.4f} ({capability.primary_metric}) on {where}")
    return checks, reasons


def _interval_reason(capability, candidate: str, check: dict, where: str) -> str:
    """Why a candidate is not shown to be within the margin of the champion, and what would decide it: the
    interval narrows as 1/sqrt(rows), so the rows at which it would clear the margin if the difference held."""
    margin, difference, low, high = capability.gate_margin, check["difference"], check["low"], check["high"]
    said = (f"version {candidate} scores {check['candidate']:.4f} against the champion's {check['champion']:.4f} "
            f"({capability.primary_metric}) on {where}: difference {difference:+.4f}, {check['level']:.0%} interval "
            f"{low:+.4f}..{high:+.4f}, which reaches below -{margin:g}")
    if not math.isfinite(low) or difference + margin <= 0:
        return said
    needed = check["rows"] * ((difference - low) / (difference + margin)) ** 2
    return f"{said}; about {max(needed - check['rows'], 1):,.0f} more rows would decide it if the difference held"


def _trained_kind(client, name: str, version: str) -> str:
    """What a version was trained on, as `jobaware.fit` names it (synthetic, public, real), from its run's tag."""
    run_id = model_version(client, name, version).run_id
    tag = registry_call(lambda: client.get_run(run_id), f"the run of version {version}").data.tags.get(TRAINED_ON_TAG, "")
    return tag.split(" ", 1)[0]


def promote(key: str, version: str | None = None, force: bool = False) -> dict:
    """The promotion gate (see the module docstring); returns the decision, logged as an MLflow run."""
    _, client = mlflow_client()
    with registry_lock(key):
        return _promote(key, client, version, force)


def _promote(key: str, client, version: str | None, force: bool) -> dict:
    capability = capabilities.get(key)
    name = capability.model_name
    candidate = str(version) if version else alias_version(client, name, "challenger")
    if candidate is None:
        raise JobawareError(f"{name} has no challenger to promote")
    found = model_version(client, name, candidate)
    champion = alias_version(client, name, "champion")
    if champion == candidate:  # no gate to run: the scores quoted are the registry's
        score = version_score(client, found, capability.primary_metric)
        checks, reasons = [{"eval_data_of": candidate, "rows": 0, "candidate": score, "champion": score}], []
    elif champion is not None and int(candidate) < int(champion):
        checks, reasons = [], [f"version {candidate} is older than the champion (version {champion}); "
                                f"`jobaware models rollback {key}` goes back, or --force"]
    else:
        checks, reasons = _gate(key, client, candidate, champion)
    promoted = not reasons or force
    if promoted and champion != candidate:
        _unmoved(client, name, champion)
        history = _history(client, name)
        if champion:
            registry_call(lambda: client.set_registered_model_tag(name, HISTORY_TAG, json.dumps(history + [champion])),
                          f"the champion history of {name}")
        try:
            registry_call(lambda: client.set_registered_model_alias(name, "champion", candidate), f"{name}@champion")
        except RegistryError:
            if champion:  # put the history back as it was; the champion did not move
                client.set_registered_model_tag(name, HISTORY_TAG, json.dumps(history))
            raise
    # the scores quoted: those of the first evaluation set on which the candidate's score is defined
    first = next((c for c in checks if math.isfinite(c["candidate"])), checks[0] if checks else {})
    decision = {
        "model": name, "candidate": candidate, "champion_before": champion, "metric": capability.primary_metric,
        "candidate_score": first.get("candidate", float("nan")), "champion_score": first.get("champion", float("nan")),
        "promoted": promoted, "forced": bool(force and reasons), "champion": candidate if promoted else champion,
        "reason": "; ".join(reasons) if reasons else ("already the champion" if champion == candidate else "passed the gate"),
        "checks": checks,
    }
    _log_action(key, "promote", {"candidate": candidate, "champion_before": champion or "none", "forced": force,
                                 "reason": decision["reason"][:490]},
                {"candidate_score": decision["candidate_score"], "champion_score": decision["champion_score"],
                 "promoted": float(promoted)})
    return decision


def _unmoved(client, name: str, champion: str | None) -> None:
    """Refuse to move the champion when it is no longer the one the gate judged against (another promotion or
    rollback moved it meanwhile: only possible on a tracking server, which offers no lock)."""
    now = alias_version(client, name, "champion")
    if now != champion:
        raise RegistryError(f"the champion of {name} moved from version {champion or 'none'} to {now or 'none'} "
                            "while the gate ran; nothing was changed: run the promotion again")


def rollback(key: str) -> dict:
    """Point champion back at the previous champion; logged like a promotion."""
    _, client = mlflow_client()
    with registry_lock(key):
        return _rollback(key, client)


def _rollback(key: str, client) -> dict:
    name = capabilities.get(key).model_name
    history = _history(client, name)
    if not history:
        raise JobawareError(f"{name} has no earlier champion to roll back to")
    current = alias_version(client, name, "champion")
    previous = history.pop()
    registry_call(lambda: client.set_registered_model_alias(name, "champion", previous), f"{name}@champion")
    client.set_registered_model_tag(name, HISTORY_TAG, json.dumps(history))
    _log_action(key, "rollback", {"from_version": current or "none", "to_version": previous}, {})
    return {"model": name, "from": current, "champion": previous}


def last_promotion(key: str, version: str) -> dict | None:
    """The newest gate decision logged for `version` (params candidate, reason, forced), or None."""
    _, client = mlflow_client()
    runs = registry_call(lambda: client.search_runs(
        [experiment_id(key)], f"tags.`jobaware.action` = 'promote' and params.candidate = '{version}'",
        order_by=["attributes.start_time DESC"], max_results=1), f"the promotions of version {version}")
    return dict(runs[0].data.params) if runs else None
