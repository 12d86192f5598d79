"""`jobaware report jobs|waste|digest` through the real console script: tables, JSON, the HTML page rendered by
a real headless chromium, digests printed and mailed through a real SMTP server (and one that is down), and
one-line errors for wrong input."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port
from tests.smtp import smtp_server

JOBAWARE = str(Path(sys.executable).with_name("jobaware"))
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([JOBAWARE, "report", *args], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "COLUMNS": "250", **(env or {})})


def test_report_jobs_as_a_table_and_as_json(store_uri):
    table = run("jobs", "--store", store_uri, "--since", "all")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert any(re.search(r"│ 200_\[0-9\] +│ dave .*│ 9 COMPLETED, 1 FAILED .*│ 50% \[50%-50%\]", line) for line in lines)
    assert any(re.search(r"│ 101 +│ alice .* 90% .*│ 1.0 GiB / 4.0 GiB .*│ 25% .*failure: likely TIMEOUT", line)
               for line in lines), table.stdout
    assert lines[-1].startswith("15 jobs (11 COMPLETED, 2 FAILED, 1 OUT_OF_MEMORY, 1 TIMEOUT); 0.79 node-hours, "
                             "0.08 failed, 0.17 timed out; 1 without accounting data; 1 not finished")
    found = json.loads(run("jobs", "--store", store_uri, "--since", "all", "--json", "--user", "bob").stdout)
    assert [row["job"] for row in found["jobs"]] == ["103", "102"] and found["totals"]["jobs"] == 2
    assert found["jobs"][0]["said"][0]["part"] == "failure"
    none = run("jobs", "--store", store_uri, "--since", "all", "--user", "nobody")
    assert none.returncode == 0 and none.stdout.startswith("no finished job matches")


def test_report_waste_per_group_with_the_top_offenders(store_uri):
    shown = run("waste", "--store", store_uri, "--since", "all", "--top", "2")
    assert shown.returncode == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if line.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows] == ["dave", "bob", "all"]
    by = json.loads(run("waste", "--store", store_uri, "--since", "all", "--by", "partition", "--sort", "timeout",
                        "--json").stdout)
    assert [g["partition"] for g in by["groups"]] == ["long", "debug"] and by["total"]["jobs"] == 15


def test_wrong_input_is_one_line_and_writes_nothing(store_uri, tmp_path):
    """Bad input exits 1, a wrong command line 2 (the command contract), each in one line, before anything is
    written."""
    page = tmp_path / "page.html"
    for code, args, words in (
        (1, ("jobs", "--store", str(tmp_path / "none")), "none: not a job store (no such folder)"),
        (2, ("jobs", "--store", store_uri, "--since", "yesterday"), "--since 'yesterday': expected a time ago"),
        (2, ("jobs", "--store", store_uri, "--since", "1d", "--until", "2d"), "--since 1d is not before --until 2d"),
        (2, ("jobs", "--store", store_uri, "--job", "12_x"), "--job '12_x': expected a job id"),
        (2, ("jobs", "--store", store_uri, "--limit", "0"), "'--limit': Input should be greater than or equal to 1"),
        (2, ("jobs", "--store", store_uri, "--htcondor", "--user", "x"), "--htcondor: HTCondor's terminate events"),
        (2, ("waste", "--store", store_uri, "--by", "qos"), "'--by': 'qos' is not one of 'user', 'account', "
                                                             "'partition'"),
        (2, ("waste", "--store", store_uri, "--sort", "cost"), "'--sort': 'cost' is not one of 'wasted'"),
        (2, ("digest", "--store", store_uri, "--mail", "--by", "account"), "give --to"),
        (2, ("digest", "--store", store_uri, "--dry-run"), "--dry-run: only with --mail"),
        (2, ("digest", "--store", "", "--since", "all"), "missing option '--store'"),
    ):
        done = run(*args, "--html", str(page)) if args[0] == "jobs" else run(*args, env={"JOBAWARE_STORE": ""})
        assert done.returncode == code and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, \
            (args, done.stderr)
        assert words in done.stderr, (args, done.stderr)
    assert not page.exists() and not (tmp_path / "none").exists()


def test_the_page_replaces_a_file_only_with_overwrite(store_uri, tmp_path):
    page = tmp_path / "page.html"
    page.write_text("precious\n")
    kept = run("jobs", "--store", store_uri, "--since", "all", "--html", str(page))
    assert kept.returncode == 1 and f"{page}: exists; give --overwrite to replace it" in kept.stderr.replace("\n", "")
    assert page.read_text() == "precious\n" and kept.stdout == ""
    replaced = run("jobs", "--store", store_uri, "--since", "all", "--html", str(page), "--overwrite")
    assert replaced.returncode == 0 and page.read_text().startswith("<!DOCTYPE html>"), replaced.stderr


def test_a_digest_per_user_printed_and_for_a_user_with_no_jobs(store_uri):
    done = run("digest", "--store", store_uri, "--since", "all", "--user", "alice", "--user", "zed")
    assert done.returncode == 0, done.stderr
    alice, zed = done.stdout.split("== user zed ==")
    assert alice.startswith("== user alice ==\nJobs of user alice from the beginning to ")
    assert "2 (2 COMPLETED); 0.18 node-hours" in alice and "Median efficiency: time 83% of the limit asked" in alice
    assert "without accounting data" in alice and "Next time, ask for: --time=0:15:00 --mem=1280M" in alice
    assert "No job of user zed finished from the beginning to " in zed
    shown = run("digest", "--store", store_uri, "--since", "all", "--user", "alice", "--user", "zed", "--json")
    assert shown.returncode == 0, shown.stderr
    answer = json.loads(shown.stdout)
    assert answer["by"] == "user" and set(answer["digests"]) == {"alice", "zed"}
    assert answer["digests"]["alice"]["totals"]["jobs"] == 2 and answer["digests"]["zed"]["totals"]["jobs"] == 0
    assert answer["digests"]["alice"]["text"].startswith("Jobs of user alice from the beginning to ")
    refused = run("digest", "--store", store_uri, "--json", "--mail")
    assert refused.returncode == 2 and "--json: not with --mail" in refused.stdout  # with --json, errors in JSON too


def test_digests_are_mailed_and_a_mail_server_that_is_down_is_said(store_uri, tmp_path):
    port = free_port()
    env = {"JOBAWARE_SMTP": f"127.0.0.1:{port}", "JOBAWARE_MAIL_DOMAIN": "cluster.example",
           "JOBAWARE_MAIL_FROM": "hpc@cluster.example", "JOBAWARE_MAIL_SPOOL": str(tmp_path / "spool"),
           "JOBAWARE_CONFIG": str(tmp_path / "none.env")}
    dry = run("digest", "--store", store_uri, "--since", "all", "--mail", "--dry-run", "--user", "bob", env=env)
    assert dry.returncode == 0 and "To: bob@cluster.example" in dry.stdout and "Jobs of user bob" in dry.stdout
    assert not (tmp_path / "spool" / "queue").exists()  # a dry run spools nothing
    down = run("digest", "--store", store_uri, "--since", "all", "--mail", "--user", "bob", "--user", "zed", env=env)
    assert down.returncode == 1 and "user zed: no job finished in the period; no digest mailed" in down.stderr
    assert down.stderr.splitlines()[-1].startswith("error: 0 of 1 digest(s) sent through 127.0.0.1:")
    assert "ConnectionRefusedError" in down.stderr and "jobaware mail flush" in down.stderr
    with smtp_server(port) as (inbox, _):
        flushed = subprocess.run([JOBAWARE, "mail", "flush"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                                 env={**os.environ, **env})
        assert flushed.returncode == 0 and "sent 1" in flushed.stdout, flushed.stderr
        sent = run("digest", "--store", store_uri, "--since", "all", "--mail", env=env)
        assert sent.returncode == 0 and "mailed 4 digest(s)" in sent.stdout, sent.stderr
    assert sorted(m["To"] for m in inbox.mails) == ["alice@cluster.example", "bob@cluster.example",
                                                    "bob@cluster.example", "carol@cluster.example",
                                                    "dave@cluster.example"]
    dave = next(m for m in inbox.mails if m["To"] == "dave@cluster.example")
    assert dave["Subject"].startswith("jobaware: your jobs from the beginning to ")
    assert "Array 200_[0-9]" in dave.get_content()


def _chromium(*args, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=90)


@pytest.mark.timeout(240)
def test_the_html_page_renders_in_headless_chromium_and_needs_no_network(store_uri, tmp_path):
    page = tmp_path / "jobs.html"
    done = run("jobs", "--store", store_uri, "--since", "all", "--html", str(page))
    assert done.returncode == 0 and f"page: {page}" in done.stderr.replace("\n", ""), done.stderr
    text = page.read_text()
    assert text.count("data:image/png;base64,") == 2 and not re.search(r"(src|href)=['\"]?(https?:)?//", text)
    assert "<td>200_[0-9]</td>" in text and "Finished jobs submitted from the beginning to " in text
    if CHROMIUM is None:
        if os.environ.get("JOBAWARE_REQUIRE_BROWSER") == "1":
            pytest.fail("JOBAWARE_REQUIRE_BROWSER=1 but no chromium (apt-get install chromium)")
        pytest.skip("chromium is not installed (Debian package 'chromium')")
    dom = _chromium("--virtual-time-budget=10000", "--dump-dom", page.resolve().as_uri(), tmp_path=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    status = re.search(r'id="render-status" data-ok="(\w+)">([^<]*)<', dom.stdout)
    assert status and status.groups() == ("true", "rendered 2 figures"), dom.stdout[-2000:]
    broken = tmp_path / "broken.html"  # the check can fail: a figure that does not decode
    broken.write_text(text.replace("data:image/png;base64,iVBOR", "data:image/png;base64,XXXX", 1))
    dom = _chromium("--virtual-time-budget=10000", "--dump-dom", broken.resolve().as_uri(), tmp_path=tmp_path)
    status = re.search(r'id="render-status" data-ok="(\w+)">([^<]*)<', dom.stdout)
    assert status.group(1) == "false" and status.group(2) == "figures not rendered: efficiency histograms"
