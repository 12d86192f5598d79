from jobaware.sizing.advice import (
    card_part,
    clock,
    comment,
    failure_advice,
    remedies,
    sbatch_message,
    sooner,
    suggested_time,
)

ROW = {"job_id": 1, "time_s": 11_400, "time_asked_s": 86_400.0, "time_fit": 0.92, "mem_per_cpu_mb": 2390,
       "mem_asked_per_cpu_mb": 4096.0, "mem_fit": 0.97, "coverage": 0.95, "model_version": "2"}
# sizing gave the job its request back: it recommends nothing above a request
KEPT = {**ROW, "time_s": 86_400, "time_fit": 1.0, "mem_per_cpu_mb": 4096, "mem_fit": 0.99}


def test_the_sbatch_message_has_the_exact_values_and_the_jobs_own_probability():
    assert sbatch_message(ROW, sooner_s=7_300) == (
        "jobs like this asking 24:00:00: 92 % ended within 3:10:00; --time=3:30:00 would likely start ~2 h sooner")
    assert sbatch_message(ROW) == "jobs like this asking 24:00:00: 92 % ended within 3:10:00; --time=3:30:00 would do"
    assert sbatch_message({**ROW, "time_fit": None}).startswith("jobs like this asking 24:00:00: 95 % ended")  # older answers
    assert sbatch_message(KEPT) is None and sbatch_message({**ROW, "time_s": 86_000}) is None  # nothing smaller
    assert sbatch_message({**ROW, "time_s": None, "note": "no history: no recommendation"}) is None


def test_times_are_spelled_as_slurm_spells_them_and_rounded_up_but_never_past_the_request():
    assert clock(11_400) == "3:10:00" and clock(90_061) == "1-01:01:01" and clock(86_400) == "24:00:00" and clock(59.2) == "0:01:00"
    assert suggested_time(11_400) == 12_600 and suggested_time(610) == 900 and suggested_time(40_000) == 43_200
    assert suggested_time(950, asked=1000) == 960 and suggested_time(995, asked=1000) == 1000


def test_card_comment_and_failure_advice_give_values_not_directions():
    assert comment(ROW) == "fits --time=3:30:00 (92 %) --mem-per-cpu=2390M (97 %)"
    assert card_part(ROW)["summary"] == comment(ROW) and card_part(ROW)["time_s"] == 11_400
    assert card_part(ROW)["time_fit"] == 0.92 and card_part(ROW)["coverage"] == 0.95
    assert comment({"time_s": None, "note": "no history: no recommendation"}) == "no history: no recommendation"
    assert failure_advice("TIMEOUT", {**ROW, "time_asked_s": 28_800.0}) == (
        "check that it makes progress: 92 % of jobs like this ended within 3:10:00 (asked 8:00:00), so running out of "
        "time is more likely a hang than too short a limit")
    assert failure_advice("OUT_OF_MEMORY", ROW) == (
        "ask for --mem-per-cpu=2390M: 97 % of jobs like this used less (asked 4096M)")
    assert failure_advice("NODE_FAIL", ROW) is None


def test_where_the_request_is_given_back_the_advice_says_so_and_asks_for_nothing_larger():
    assert comment(KEPT) == "no smaller request is sure enough"
    assert failure_advice("TIMEOUT", KEPT) == (
        "ask for more --time (asked 24:00:00): no shorter limit is safe for jobs like this, and a job stopped at its "
        "limit never shows how much more it needed")
    assert failure_advice("OUT_OF_MEMORY", KEPT).startswith(
        "ask for more --mem-per-cpu (asked 4096M): no smaller value is safe")
    assert remedies(KEPT) == {"TIMEOUT": failure_advice("TIMEOUT", KEPT),
                              "OUT_OF_MEMORY": failure_advice("OUT_OF_MEMORY", KEPT)}
    assert remedies({"time_s": None, "note": "no history: no recommendation"}) == {}
    assert set(remedies({**ROW, "mem_per_cpu_mb": None})) == {"TIMEOUT"}  # no memory history: no memory value


def test_a_start_sooner_is_said_only_where_it_is_meaningful():
    assert sooner({**ROW, "wait_asked_s": 10_000.0, "wait_recommended_s": 2_700.0}) == 7_300.0
    assert sooner(ROW) is None and sooner({**ROW, "wait_asked_s": 10_000.0}) is None  # wait said nothing
    assert sooner({**ROW, "wait_asked_s": 200.0, "wait_recommended_s": 0.0}) is None  # under 5 minutes
    assert sooner({**ROW, "wait_asked_s": 90_000.0, "wait_recommended_s": 82_000.0}) is None  # under a tenth
    assert sooner({**ROW, "wait_asked_s": 600.0, "wait_recommended_s": 900.0}) is None  # later, not sooner
    assert comment({**KEPT, "mem_per_cpu_mb": 2390}) == "fits --mem-per-cpu=2390M (99 %)"
