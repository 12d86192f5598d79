import copy
import json

import pytest
from typer.testing import CliRunner

from jobaware import card as cards
from jobaware.bodies import parse_body
from jobaware.card import NotApplicable
from jobaware.errors import InputError
from jobaware.model import Served
from jobaware.wait.card import answer, duration, shown, words
from jobaware.wait.service import WaitRequest, wait
from tests.adapters.slurm.test_collector import NO_ACCOUNTING, Replay
from tests.conftest import SQUEUE
from tests.loopback import JsonServer


class Ask:
    """The card's `ask` over the route function itself, keeping the bodies it posted."""

    def __init__(self, bundle):
        self.bundle, self.bodies = bundle, []

    def post(self, route: str, body: dict) -> dict:
        assert route == "/wait"
        self.bodies.append(body)
        return wait(parse_body(WaitRequest, body), Served(self.bundle, "7"))


def _snapshot():
    """The real squeue --json of the test cluster with job 2 running on 8 of its processors: job 3 pending
    (Resources) behind it, job 4 held."""
    records = copy.deepcopy(json.loads(SQUEUE.read_text())["jobs"])
    running = records[1]
    running.update(job_state="RUNNING", start_time=records[1]["submit_time"] + 5, cpus=8, time_limit=120)
    return records


def test_a_pending_job_is_told_when_it_is_likely_to_start_from_the_queue_around_it(trained):
    records = _snapshot()
    ask = Ask(trained[0])
    part = answer({"job_id": 3, "job": records[2], "queue": records}, ask)
    [body] = ask.bodies
    assert [j["job_id"] for j in body["jobs"]] == [3] and [j["job_id"] for j in body["running"]] == [2]
    assert [j["job_id"] for j in body["pending"]] == [3]  # the held job 4 is not ahead of anyone
    assert part["model_version"] == "7" and part["why"] == "nothing ahead; 0 of 8 processors free"
    assert 0 <= part["low_s"] <= part["wait_s"] <= part["high_s"] <= part["bound_s"]
    ok = {"status": "ok", **part}
    said = words(ok, {})
    assert said.startswith("likely to start ") and said.endswith(" (80%)")
    assert shown(ok).endswith(part["why"]) and "(95%)" in shown(ok)


def test_a_job_that_can_never_start_as_asked_has_no_wait_part_and_says_why(trained):
    records = _snapshot()
    records[2]["cpus"] = 16

    class Sized(Ask):  # a snapshot that states the cluster's size, 8 processors
        def post(self, route: str, body: dict) -> dict:
            return super().post(route, {**body, "capacity": 8})

    with pytest.raises(NotApplicable, match="^asks 16 processors, more than the cluster's 8: it cannot start as asked$"):
        answer({"job_id": 3, "job": records[2], "queue": records}, Sized(trained[0]))


def test_the_part_is_on_the_card_by_its_registration(trained):
    records = _snapshot()
    assert "wait" in cards.declared()
    assert cards.declared()["wait"].answer({"job_id": 3, "job": records[2], "queue": records}, Ask(trained[0]))


def test_jobaware_card_part_wait_tells_a_live_job_when_it_is_likely_to_start(trained, monkeypatch, capsys):
    """`jobaware card JOBID --part wait`: squeue --json read live (a recorded Slurm), the card's context, and wait's
    service over HTTP (the real route on a trained bundle); one line, or the part as JSON."""
    from jobaware.adapters.slurm import collector
    from jobaware.cli import app

    squeue = json.dumps({**json.loads(SQUEUE.read_text()), "jobs": _snapshot()})
    monkeypatch.setattr(collector, "Slurm", lambda timeout=30: Replay(squeue=squeue, **NO_ACCOUNTING))

    def serve(method: str, path: str, body) -> tuple[int, object]:
        if path != "/wait":
            return 404, {"error": f"no route {path}"}
        return 200, wait(parse_body(WaitRequest, body), Served(trained[0], "7"))

    runner = CliRunner()
    with JsonServer(serve) as server:
        line = runner.invoke(app, ["card", "3", "--part", "wait", "--service", f"wait={server.url}"])
        assert line.exit_code == 0, line.output
        assert line.stdout.startswith("job 3: wait: start ") and line.stdout.count("\n") == 1
        assert "(80%), within " in line.stdout and line.stdout.rstrip().endswith(
            "nothing ahead; 0 of 8 processors free; model 7")
        as_json = runner.invoke(app, ["card", "3", "--part", "wait", "--service", f"wait={server.url}", "--json"])
        assert as_json.exit_code == 0, as_json.output
        answer = json.loads(as_json.stdout)
        assert list(answer["parts"]) == ["wait"] and answer["missing"] == []  # no other part was asked
        part = answer["parts"]["wait"]
        assert part["status"] == "ok" and part["model_version"] == "7"
        assert 0 <= part["low_s"] <= part["wait_s"] <= part["high_s"] <= part["bound_s"]
        assert answer["short"].startswith("jobaware: likely to start ")
        assert [path for _, path, _ in server.requests] == ["/wait", "/wait"]
        # a running job has no wait: said in one line, exit 0 (an answer), the service not asked
        running = runner.invoke(app, ["card", "2", "--part", "wait", "--service", f"wait={server.url}"])
        assert running.exit_code == 0 and running.stdout == "job 2: wait: not applicable: not pending (running)\n"
        assert len(server.requests) == 2
    # the service down: one error line naming the part and why, exit 1; with --json the card says it, exit 1
    from jobaware import cli, cli_contract

    capsys.readouterr()
    assert cli_contract.run(cli.command(), ["card", "3", "--part", "wait", "--service", "wait=http://127.0.0.1:9"]) == 1
    said = capsys.readouterr()
    assert said.out == "" and said.err.count("\n") == 1 and "job 3: no wait part: unavailable: " in said.err
    assert cli_contract.run(cli.command(), ["card", "3", "--part", "wait", "--service", "wait=http://127.0.0.1:9",
                                            "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["missing"] == ["wait"]
    # a part no registration declares is a usage error (exit 2), in one line
    assert cli_contract.run(cli.command(), ["card", "3", "--part", "nosuch"]) == 2
    said = capsys.readouterr()
    assert said.err.count("\n") == 1 and "--part 'nosuch': expected one of " in said.err and "wait" in said.err


def test_jobaware_wait_jobid_prints_the_line_of_card_part_wait(trained, monkeypatch):
    """`jobaware wait JOBID` (the platform's command for every capability with a card part) is `jobaware card JOBID
    --part wait`: the same line, the same JSON, the same refusal; the clock the part reads "now" from held still."""
    import time
    from types import SimpleNamespace

    from jobaware import cli, cli_contract
    from jobaware.adapters.slurm import collector

    squeue = json.dumps({**json.loads(SQUEUE.read_text()), "jobs": _snapshot()})
    monkeypatch.setattr(collector, "Slurm", lambda timeout=30: Replay(squeue=squeue, **NO_ACCOUNTING))
    monkeypatch.setattr("jobaware.wait.card.time", SimpleNamespace(time=lambda now=time.time(): now))

    def serve(method: str, path: str, body) -> tuple[int, object]:
        return 200, wait(parse_body(WaitRequest, body), Served(trained[0], "7"))

    runner = CliRunner()
    with JsonServer(serve) as server:
        service = ["--service", f"wait={server.url}"]
        for args in (["3"], ["3", "--json"], ["2"]):
            part = runner.invoke(cli.app, ["wait", *args, *service])
            card = runner.invoke(cli.app, ["card", *args, "--part", "wait", *service])
            assert part.exit_code == card.exit_code == 0, part.output + card.output
            if "--json" in args:
                assert {**json.loads(part.stdout), "created": 0} == {**json.loads(card.stdout), "created": 0}
            else:
                assert part.stdout == card.stdout and part.stdout.count("\n") == 1
                assert part.stdout.startswith(f"job {args[0]}: wait: ")
        assert "(80%), within " in runner.invoke(cli.app, ["wait", "3", *service]).stdout
        assert part.stdout == "job 2: wait: not applicable: not pending (running)\n"
        assert len(server.requests) == 5  # only for the pending job
    down = ["--service", "wait=http://127.0.0.1:9"]
    assert cli_contract.run(cli.command(), ["wait", "3", *down]) == cli_contract.run(
        cli.command(), ["card", "3", "--part", "wait", *down]) == 1


@pytest.mark.parametrize("change, reason", [
    (lambda r: r[3], "held (JobHeldUser)"),
    (lambda r: r[0], "not pending (completed)"),
    (lambda r: {k: v for k, v in r[2].items() if k != "job_state"}, "no squeue record of the job"),
])
def test_a_job_that_does_not_wait_for_the_queue_has_no_wait_part(trained, change, reason):
    records = _snapshot()
    with pytest.raises(NotApplicable, match=reason.replace("(", r"\(").replace(")", r"\)")):
        answer({"job_id": 0, "job": change(records), "queue": records}, Ask(trained[0]))
    with pytest.raises(NotApplicable, match="the queue around it is not known"):
        answer({"job_id": 3, "job": records[2], "queue": []}, Ask(trained[0]))


def test_words_for_a_range():
    part = {"status": "ok", "wait_s": 3600.0, "low_s": 2400.0, "high_s": 10800.0, "bound_s": 32400.0, "why": "w"}
    assert words(part, {}) == "likely to start in 40 min - 3 h (80%)"
    assert shown(part) == "start in 40 min - 3 h (80%), within 9 h (95%); w"
    assert words({**part, "low_s": 0.0, "high_s": 30.0}, {}) == "likely to start within 1 min (80%)"
    assert words({**part, "status": "unavailable"}, {}) is None
    assert [duration(s) for s in (45, 2400, 9000, 46800, 3 * 86400, 30 * 86400)] == [
        "45 s", "40 min", "2.5 h", "13 h", "3 days", "30 days"]


@pytest.mark.parametrize("unlimited", [4294967295, 4294967294, 0])
def test_a_time_limit_slurm_22_05_writes_for_no_limit_is_no_limit_not_eight_thousand_years(trained, unlimited):
    """Slurm 22.05's squeue --json writes a job without a time limit as the raw 32-bit INFINITE (NO_VAL when unset),
    and `--time=0` asks for no limit: none of them is a limit in minutes. A running job so written in the queue once
    made /wait refuse the snapshot (the wait part lost for every pending job of the cluster); the job itself was read
    as asking 8,000 years, or 0 s."""
    records = _snapshot()
    records[1]["time_limit"] = unlimited  # the running job ahead
    ask = Ask(trained[0])
    part = answer({"job_id": 3, "job": {**records[2], "time_limit": unlimited}, "queue": records}, ask)
    [body] = ask.bodies
    assert "wallclock_req" not in body["jobs"][0] and "wallclock_req" not in body["running"][0]
    assert part["wait_s"] >= 0 and part["why"] == "nothing ahead; 0 of 8 processors free"


def test_a_queue_mate_with_a_huge_name_leaves_every_other_job_its_wait_part(trained):
    """Found by the command sweep: one queue-mate with a 5,000-character user name refused the whole snapshot, so
    every job on the card lost its wait part. The queue-mate's names are cut (to 256 characters) for the features;
    the asked job's own stay checked."""
    records = _snapshot()
    mate = copy.deepcopy(records[2])
    mate.update(job_id=5, user_name="m" * 5000, account="a" * 5000, partition="p" * 5000, name="n" * 5000)
    cut = copy.deepcopy(mate)
    cut.update(user_name="m" * 256, account="a" * 256, partition="p" * 256)
    huge, short = Ask(trained[0]), Ask(trained[0])
    part = answer({"job_id": 3, "job": records[2], "queue": [*records, mate]}, huge)
    assert part == answer({"job_id": 3, "job": records[2], "queue": [*records, cut]}, short)
    assert [j["job_id"] for j in huge.bodies[0]["pending"]] == [3, 5]
    records[2]["user_name"] = "u" * 5000  # the asked job's own name: refused as before
    with pytest.raises(InputError, match=r"^jobs\[0\]\.user: "):
        answer({"job_id": 3, "job": records[2], "queue": records}, Ask(trained[0]))
