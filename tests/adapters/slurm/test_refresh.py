"""A pending job's card asked again while it waits, against a recorded Slurm and a loopback service, the clock injected.

Two throw-away capabilities are registered at runtime (as `tests/jobaware/test_card.py` does): `eta`, whose card
part ages (`refresh_s` 300 s, as `wait`'s), and `kind`, whose part does not. The adapter asks a pending job's card
again once its newest verdict is 300 s old, and not before; keeps each refresh as a new verdict; rewrites the comment
only when the words changed; keeps to the rate limit; and a pass repeated in the same refresh bucket after a crash
acts on nothing twice. Without a part that ages, a job keeps its one verdict per model versions.
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from jobaware import capabilities
from jobaware import card as cards
from jobaware.adapters.slurm.adapter import PendingJobAdapter, Policy
from jobaware.adapters.slurm.verdicts import read_cache
from jobaware.capabilities import CardPart, Ref
from jobaware.errors import JobawareError
from jobaware.store import open_store
from tests.adapters.slurm.test_collector import NO_ACCOUNTING, Replay
from tests.conftest import SQUEUE
from tests.loopback import JsonServer

REFRESH_S = 300.0
PENDING = [3, 4]  # the pending jobs of the captured squeue


# ---------------------------------------------------------------- the throw-away capabilities' card parts
def eta_answer(context: dict, ask) -> dict:
    return ask.post("/eta", {"job_id": context["job_id"]})


def eta_words(part: dict, history: dict) -> str | None:
    return f"starts in {part['minutes']} min" if part["status"] == "ok" else None


def kind_answer(context: dict, ask) -> dict:
    return ask.post("/kind", {"job_id": context["job_id"]})


def kind_words(part: dict, history: dict) -> str | None:
    return f"{part['kind']}-bound" if part["status"] == "ok" else None


def shown(part: dict) -> str:
    return json.dumps(part)


ETA = CardPart(answer=Ref(f"{__name__}:eta_answer"), shown=Ref(f"{__name__}:shown"), words=Ref(f"{__name__}:eta_words"),
               refresh_s=REFRESH_S)
KIND = CardPart(answer=Ref(f"{__name__}:kind_answer"), shown=Ref(f"{__name__}:shown"),
                words=Ref(f"{__name__}:kind_words"))


class Said:
    """What the loopback service answers: `/eta` the minutes set now, `/kind` always `cpu`."""

    def __init__(self):
        self.minutes = 40

    def __call__(self, method: str, path: str, body) -> tuple[int, object]:
        if path == "/eta":
            return 200, {"minutes": self.minutes, "model_version": "1"}
        return 200, {"kind": "cpu", "model_version": "2"}


@pytest.fixture
def registered(monkeypatch):
    real = capabilities.registry()
    base = real["resource"]  # the rest of the record; the card part is the test's own
    added = {**real, "eta": dataclasses.replace(base, key="eta", card=ETA),
             "kind": dataclasses.replace(base, key="kind", card=KIND)}
    monkeypatch.setattr(capabilities, "registry", lambda: added)


@pytest.fixture
def site(registered, tmp_path):
    """A store, a recorded Slurm, the loopback service, and a clock the test moves (aligned on a refresh bucket)."""
    store = open_store(str(tmp_path / "store"))
    said = Said()
    clock = [REFRESH_S * (time.time() // REFRESH_S)]
    with JsonServer(said) as server:
        yield {"store": store, "said": said, "clock": clock, "server": server, "tmp": tmp_path,
               "slurm": Replay(squeue=SQUEUE.read_text(), scontrol_update="", **NO_ACCOUNTING)}
    store.close()


def adapter(site, *keys: str, **policy) -> PendingJobAdapter:
    """An acting adapter asking only the parts of `keys` (every other one switched off), on the site's clock."""
    off = {key: False for key in cards.declared() if key not in keys}
    tick = site["clock"]
    return PendingJobAdapter(site["store"], "c", {key: site["server"].url for key in keys},
                             Policy(capabilities=off, **policy), act=True, audit=site["tmp"] / "audit.jsonl",
                             cache=site["tmp"] / "verdicts.tsv", slurm=site["slurm"],
                             clock=lambda: tick[0], now=lambda: tick[0])


def comments(site) -> list[str]:
    return [c[3] for c in site["slurm"].commands if c[:2] == ("scontrol", "update")]


def asked(site, route: str) -> int:
    return sum(1 for _, path, _ in site["server"].requests if path == route)


def audited(site) -> list[dict]:
    return [json.loads(line) for line in (site["tmp"] / "audit.jsonl").read_text().splitlines()]


def verdicts(site, job_id: int) -> dict[str, dict]:
    key = next(k for k in site["store"].keys() if k.job_id == job_id)
    return site["store"].predictions(key)


def test_a_part_that_ages_is_asked_again_after_its_interval_and_the_comment_rewritten_only_when_its_words_change(site):
    start = site["clock"][0]
    with adapter(site, "eta", "kind") as a:
        assert a.refresh_s == REFRESH_S
        first = a.run_pass()
        assert (first.pending, first.judged, first.acted) == (2, 2, 2)
        assert comments(site) == ["Comment=jobaware: starts in 40 min; cpu-bound"] * 2

        site["clock"][0] = start + REFRESH_S - 1  # not yet: nothing asked, nothing done
        site["said"].minutes = 25
        assert (a.run_pass().judged, asked(site, "/eta"), len(comments(site))) == (0, 2, 2)

        site["clock"][0] = start + REFRESH_S  # due: asked again, the new words written
        second = a.run_pass()
        assert (second.judged, second.acted, asked(site, "/eta")) == (2, 2, 4)
        assert comments(site)[2:] == ["Comment=jobaware: starts in 25 min; cpu-bound"] * 2
        assert {v.comment for v in read_cache(site["tmp"] / "verdicts.tsv").verdicts} == {
            "starts in 25 min; cpu-bound"}  # the cache: the newest cards

        site["clock"][0] = start + 2 * REFRESH_S  # due again, the same words: a new verdict, no act
        third = a.run_pass()
        assert (third.judged, third.acted, asked(site, "/eta"), len(comments(site))) == (2, 0, 6, 4)

        site["clock"][0] = start + 3 * REFRESH_S  # and again: this refresh replaces the one before (no act in either)
        fourth = a.run_pass()
        assert (fourth.judged, fourth.acted, asked(site, "/eta"), len(comments(site))) == (2, 0, 8, 4)

    for job in PENDING:
        kept = verdicts(site, job)
        bucket = int(start // REFRESH_S)
        assert sorted(kept) == [f"adapter:eta=1,kind=2@{bucket + n}" for n in range(3)]  # one per change of words
        assert [len(kept[f"adapter:eta=1,kind=2@{bucket + n}"]["acts"]) for n in range(3)] == [1, 1, 0]
        assert cards.kept_cards(kept)[-1]["created"] == start + 3 * REFRESH_S
    ids = [record["id"] for record in audited(site)]
    assert len(ids) == len(set(ids)) == 4  # one comment act per job and refresh whose words changed


def test_refreshes_that_act_on_nothing_never_replace_the_first_verdict(site):
    """With no comment written (nothing to act on), each refresh replaces the newest one but never the job's first
    verdict: the one made at submission, which live accuracy judges on its own."""
    start = site["clock"][0]
    with adapter(site, "eta", comment=False) as a:
        for n in range(4):
            site["clock"][0] = start + n * REFRESH_S
            site["said"].minutes = 40 - n
            assert (a.run_pass().judged, len(comments(site))) == (2, 0)
    bucket = int(start // REFRESH_S)
    for job in PENDING:
        kept = verdicts(site, job)
        assert sorted(kept) == [f"adapter:eta=1@{bucket}", f"adapter:eta=1@{bucket + 1}"]
        assert [card["parts"]["eta"]["minutes"] for card in cards.kept_cards(kept)] == [40, 37]


def test_a_refresh_keeps_to_the_rate_limit(site):
    start = site["clock"][0]
    with adapter(site, "eta", max_acts_per_minute=1) as a:
        assert (a.run_pass().acted, a.run_pass().acted) == (1, 0)  # the second job's act waits a minute
        site["clock"][0] = start + 61
        assert a.run_pass().acted == 1
        site["clock"][0] = start + REFRESH_S + 61  # both due, new words: one act a minute still
        site["said"].minutes = 10
        first = a.run_pass()
        assert (first.judged, first.acted, first.deferred) == (1, 1, 1)
        site["clock"][0] += 30
        second = a.run_pass()
        assert (second.judged, second.acted, second.deferred) == (0, 0, 1)
        site["clock"][0] += 31
        assert a.run_pass().acted == 1
    assert comments(site)[2:] == ["Comment=jobaware: starts in 10 min"] * 2


def test_a_pass_repeated_in_the_same_bucket_after_a_crash_acts_on_nothing_twice(site, monkeypatch):
    start = site["clock"][0]
    with adapter(site, "eta") as a:
        a.run_pass()
    site["clock"][0] = start + REFRESH_S + 1
    site["said"].minutes = 5
    store = site["store"]
    keep = store.put_prediction

    def crash(key, name, answer):
        raise RuntimeError("the adapter died after its acts, before it kept the verdict")

    monkeypatch.setattr(store, "put_prediction", crash)
    with adapter(site, "eta") as a, pytest.raises(RuntimeError):
        a.run_pass()
    assert len(comments(site)) == 3  # the first job's new comment written and audited, then the crash
    monkeypatch.setattr(store, "put_prediction", keep)

    site["clock"][0] = start + 2 * REFRESH_S - 1  # the same bucket: what was audited is not done again
    with adapter(site, "eta") as a:
        again = a.run_pass()
        assert (again.judged, again.acted) == (2, 2)
        assert len(comments(site)) == 4  # only the second job's, which the crash cut off
        assert a.run_pass().judged == 0  # and a pass repeated now asks nothing
    first = verdicts(site, PENDING[0])[f"adapter:eta=1@{int(start // REFRESH_S) + 1}"]
    assert first["acts"][0]["audited_before"] is True
    ids = [record["id"] for record in audited(site)]
    assert len(ids) == len(set(ids)) == 4


def test_without_a_part_that_ages_a_job_keeps_one_verdict_per_model_versions(site):
    start = site["clock"][0]
    with adapter(site, "kind") as a:
        assert a.refresh_s is None
        assert a.run_pass().judged == 2
        site["clock"][0] = start + 100 * REFRESH_S
        assert (a.run_pass().judged, asked(site, "/kind"), len(comments(site))) == (0, 2, 2)
    assert sorted(verdicts(site, PENDING[0])) == ["adapter:kind=2"]


def test_a_part_that_ages_states_positive_seconds():
    with pytest.raises(JobawareError, match="refresh_s must be positive"):
        CardPart(answer=Ref(f"{__name__}:eta_answer"), shown=Ref(f"{__name__}:shown"), refresh_s=0)
