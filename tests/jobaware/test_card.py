"""The job card as a client of registrations, against a real loopback HTTP server.

A throw-away capability, `tally`, is registered at runtime with a card part whose functions live in this module
(its "slice"); with no other edit it appears in the card, `jobaware card`, the gateway's answer, the adapter's
comment, the verdict cache and the advice `cli_filter.lua` prints. The same run holds failure's flag to one
decision: the service answers P(fail) 0.26 at its registered threshold 0.24, and the comment, the card, the advice
and the accuracy report all say it the same way, never "likely".
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from jobaware import capabilities
from jobaware import card as cards
from jobaware.adapters.slurm.adapter import PendingJobAdapter, Policy
from jobaware.adapters.slurm.verdicts import read_cache
from jobaware.capabilities import CardPart, Ref
from jobaware.card import NotApplicable
from jobaware.store import open_store
from tests.adapters.slurm.test_collector import NO_ACCOUNTING, Replay
from tests.conftest import SQUEUE
from tests.loopback import JsonServer


# ---------------------------------------------------------------- the throw-away capability's card part
def tally_answer(context: dict, ask) -> dict:
    """How many jobs of the queue are ahead of this one, and what failure would say of it asking no time."""
    if not context.get("queue"):
        raise NotApplicable("no queue")
    answer = ask.post("/ahead", {"job_id": context["job_id"], "queue": [j["job_id"] for j in context["queue"]]})
    shorter = ask.part("failure", {**context, "job": {**context["job"], "time_limit": 0}})
    return {"ahead": answer["ahead"], "p_fail_if_shorter": shorter.get("p_fail"),
            "model_version": answer["model_version"]}


def tally_words(part: dict, history: dict) -> str | None:
    return f"{part['ahead']} ahead in the queue" if part["status"] == "ok" else None


def tally_advice(part: dict, history: dict) -> str | None:
    return f"{part['ahead']} ahead of this one[ asking {{cpus}} CPUs]." if part["status"] == "ok" else None


def tally_shown(part: dict) -> str:
    return f"{part['ahead']} ahead"


TALLY = CardPart(answer=Ref(f"{__name__}:tally_answer"), shown=Ref(f"{__name__}:tally_shown"),
                 words=Ref(f"{__name__}:tally_words"), advice=Ref(f"{__name__}:tally_advice"))


# ---------------------------------------------------------------- the services
def answer(method: str, path: str, body) -> tuple[int, object]:
    """failure's `/predict` (P(fail) 0.26 at threshold 0.24; 0.05 for a job asking no time) and tally's `/ahead`."""
    if path == "/predict":
        job = body["jobs"][0]
        p = 0.05 if job.get("time_limit") == 0 else 0.26
        return 200, {"model_version": "7", "predictions": [{
            "job_id": job["job_id"], "p_fail": p, "most_likely_failure": "FAILED", "likely_fail": p >= 0.24,
            "threshold": 0.24}]}
    return 200, {"ahead": len(body["queue"]) - 1, "model_version": "1"}


@pytest.fixture
def registered(monkeypatch):
    """The registry with `tally` added (resource's registration as the base of the record, its own card part)."""
    real = capabilities.registry()
    with_tally = {**real, "tally": dataclasses.replace(real["resource"], key="tally", card=TALLY)}
    monkeypatch.setattr(capabilities, "registry", lambda: with_tally)
    return with_tally


def slurm() -> Replay:
    return Replay(squeue=SQUEUE.read_text(), scontrol_update="", **NO_ACCOUNTING)


@pytest.fixture
def judged(registered, tmp_path):
    """One adapter pass over the pending jobs of a captured squeue, acting (on a recorded Slurm), with a cache."""
    from jobaware.adapters.slurm.collector import Collector

    store = open_store(str(tmp_path / "store"))
    replay = slurm()
    Collector(store, "c", replay).poll()
    with JsonServer(answer) as services:
        # only failure and tally are deployed here: every other card part is switched off, never asked
        policy = Policy(capabilities={key: False for key in cards.declared() if key not in ("failure", "tally")})
        with PendingJobAdapter(store, "c", {"failure": services.url, "tally": services.url}, policy, act=True,
                               audit=tmp_path / "audit.jsonl", cache=tmp_path / "verdicts.tsv", slurm=replay) as adapter:
            result = adapter.run_pass()
        yield {"store": store, "slurm": replay, "result": result, "cache": tmp_path / "verdicts.tsv",
               "url": services.url}
    store.close()


def test_a_registered_card_part_reaches_the_comment_and_the_cache(judged):
    result = judged["result"]
    assert (result.pending, result.judged, result.missing, result.cached) == (2, 2, [], 2)
    comments = [c[3] for c in judged["slurm"].commands if c[:2] == ("scontrol", "update")]
    assert comments and all(c.startswith("Comment=jobaware: failure risk 26% (threshold 24%)") for c in comments)
    assert sorted(comments) == [  # two of the four jobs listed are pending: one ahead of the other
        "Comment=jobaware: failure risk 26% (threshold 24%); 1/2 similar failed; model 7; 1 ahead in the queue",
        "Comment=jobaware: failure risk 26% (threshold 24%); model 7; 1 ahead in the queue"]
    cached = read_cache(judged["cache"]).verdicts
    assert sorted(v.comment for v in cached) == [c.removeprefix("Comment=jobaware: ") for c in sorted(comments)]
    assert all(v.advice.endswith(" 1 ahead of this one[ asking {cpus} CPUs].") for v in cached)
    kept = cards.kept_cards(judged["store"].predictions(next(k for k in judged["store"].keys() if k.job_id == 3)))
    assert kept[-1]["parts"]["tally"] == {"status": "ok", "reason": None, "ahead": 1, "p_fail_if_shorter": 0.05,
                                          "model_version": "1"}  # it asked failure's part about a shorter job
    assert set(kept[-1]["parts"]) == {"failure", "tally"}  # resource and similarity switched off: not asked


def test_the_plugin_prints_the_registered_advice(judged, tmp_path):
    from tests.adapters.slurm.test_lua_plugins import LUA, run

    if LUA is None:
        pytest.skip("lua5.1 is not installed here")
    from jobaware.adapters.slurm.plugins import write_plugins

    write_plugins(tmp_path / "etc", cache=str(judged["cache"]))
    _, stderr = run(tmp_path / "etc" / "cli_filter.lua", ["advise\ttype=sbatch\tpartition=debug\tntasks=2"],
                    user="root")
    assert stderr.startswith("jobaware: failure risk 26% (threshold 24%): ")
    assert stderr.endswith(" (model 7). 1 ahead of this one asking 2 CPUs.\n") and "likely" not in stderr


def test_jobaware_card_and_the_gateway_show_the_registered_part(judged, monkeypatch):
    from jobaware.adapters.slurm import collector
    from jobaware.cli import app
    from jobaware.serving.card import CardRequest

    monkeypatch.setattr(collector, "Slurm", lambda timeout=30: slurm())
    url = judged["url"]
    shown = CliRunner().invoke(app, ["card", "3", "--service", f"failure={url}", "--service", f"tally={url}",
                                     "--service", "resource=http://127.0.0.1:9", "--json"])
    assert shown.exit_code == 0, shown.output
    answer = json.loads(shown.stdout)
    assert answer["parts"]["tally"]["ahead"] == 1 and answer["parts"]["resource"]["status"] == "unavailable"
    assert answer["short"] == "jobaware: failure risk 26% (threshold 24%); model 7; 1 ahead in the queue"
    table = CliRunner().invoke(app, ["card", "3", "--service", f"failure={url}", "--service", f"tally={url}",
                                     "--service", "resource=http://127.0.0.1:9"])
    assert "1 ahead" in table.stdout and "failure risk 26% (threshold 24%)" in table.stdout
    assert "likely" not in table.stdout
    bad = CliRunner().invoke(app, ["card", "3", "--service", "nosuch=http://x"])
    assert bad.exit_code != 0 and f"expected KEY=URL with KEY one of {', '.join(cards.declared())}" in str(
        bad.exception)
    # the gateway's body is the card's context
    record = json.loads(SQUEUE.read_text())["jobs"][2]
    body = CardRequest.model_validate({"job_id": 3, "job": record, "queue": [record]}).model_dump(by_alias=True)
    with cards.Services({"failure": url, "tally": url}) as services:
        gateway = cards.make_card(body, services)
    assert gateway["parts"]["tally"]["ahead"] == 0 and gateway["short"].endswith("; 0 ahead in the queue")


def test_the_flag_is_the_models_and_every_text_says_it_alike(judged):
    """P(fail) 0.26 at the model's threshold 0.24: flagged, said as a raised risk, never "likely"."""
    from jobaware.failure.accuracy import accuracy_report

    store = judged["store"]
    for key in store.keys():
        if key.job_id in (3, 4):
            store.put_final(key, "FAILED" if key.job_id == 3 else "COMPLETED", "sacct", 1 if key.job_id == 3 else 0)
    [row] = accuracy_report(store)
    assert (row["jobs"], row["failed"], row["flagged"], row["likely"]) == (2, 1, 2, 0)
    assert row["accuracy"] == 0.5  # both flagged, one failed
    texts = [c[3] for c in judged["slurm"].commands if c[:2] == ("scontrol", "update")]
    texts += [v.comment + " " + v.advice for v in read_cache(judged["cache"]).verdicts]
    assert all("failure risk 26% (threshold 24%)" in text and "likely" not in text for text in texts)


def test_a_part_whose_code_fails_is_an_error_part_and_the_card_goes_on(registered, monkeypatch):
    def broken(context, ask):
        raise KeyError("predictions")

    monkeypatch.setitem(registered, "tally", dataclasses.replace(registered["tally"], card=dataclasses.replace(
        TALLY, answer=broken)))
    with cards.Services({}) as services:
        card = cards.make_card({"job_id": 1, "job": {"job_id": 1}, "queue": [{"job_id": 1}]}, services)
    assert card["parts"]["tally"] == {"status": "error", "reason": "KeyError: 'predictions'"}
    assert card["parts"]["failure"]["status"] == "unavailable" and card["missing"] == ["failure", "tally"]
    assert card["parts"]["resource"] == {"status": "not_applicable", "reason": "no batch script"}
    assert card["short"] == "jobaware: failure risk unknown"


def test_a_part_may_ask_another_part_which_may_not_ask_on(registered, monkeypatch):
    def asks_itself(context, ask):
        return {"inner": ask.part("tally", context)}

    monkeypatch.setitem(registered, "tally", dataclasses.replace(registered["tally"], card=dataclasses.replace(
        TALLY, answer=asks_itself)))
    with cards.Services({}) as services:
        card = cards.make_card({"job_id": 1}, services, keys=["tally"])
    assert list(card["parts"]) == ["tally"] and card["missing"] == []
    assert card["parts"]["tally"]["inner"] == {"status": "ok", "reason": None, "inner": {
        "status": "unavailable", "reason": "tally may not ask tally (parts ask at most 1 deep)"}}


def test_jobaware_card_part_shows_only_the_parts_asked_for_from_the_services_or_the_gateway(judged, monkeypatch):
    """`--part KEY`, which names no capability: one line per part asked, the others never asked; from the gateway,
    its card cut to those parts (a part it lacks is unavailable, exit 1)."""
    from jobaware.adapters.slurm import collector
    from jobaware.cli import app

    monkeypatch.setattr(collector, "Slurm", lambda timeout=30: slurm())
    url, runner = judged["url"], CliRunner()
    shown = runner.invoke(app, ["card", "3", "--part", "tally", "--part", "failure", "--service", f"tally={url}",
                                "--service", f"failure={url}"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == [  # registry order, each with its model version
        "job 3: failure: failure risk 26% (threshold 24%); model 7", "job 3: tally: 1 ahead; model 1"]
    whole = {"job_id": 3, "created": 1.0, "missing": [], "short": "jobaware: x",
             "parts": {"failure": {"status": "ok", "reason": None, "p_fail": 0.26, "likely": "FAILED",
                                   "model_version": "7"},
                       "tally": {"status": "ok", "reason": None, "ahead": 4, "model_version": "1"}}}
    with JsonServer(lambda method, path, body: (200, whole) if path == "/card" else (404, {})) as gateway:
        cut = runner.invoke(app, ["card", "3", "--part", "tally", "--gateway", gateway.url, "--json"])
        assert cut.exit_code == 0, cut.output
        answer = json.loads(cut.stdout)
        assert list(answer["parts"]) == ["tally"] and answer["short"] == "jobaware: 4 ahead in the queue"
        lacking = runner.invoke(app, ["card", "3", "--part", "resource", "--gateway", gateway.url])
        assert lacking.exit_code == 1 and str(lacking.exception) == (
            "job 3: no resource part: unavailable: the card gateway gave no such part")
