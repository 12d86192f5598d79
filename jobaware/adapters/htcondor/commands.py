"""The HTCondor adapter's commands (registered by `register(app)` from jobaware/cli.py):

  jobaware hold follow --input LOG... (--store URI | --audit FILE) [--service URL] [--act] [--policy FILE]
                       [--state FILE] [--once|--seconds N]
  jobaware hold decide --input LOG --job CLUSTER.PROC [--service URL]
  jobaware hold policy --print [--policy FILE]
  jobaware report holds (--store URI | --audit FILE)
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from jobaware.cli_contract import APPEND, FILE, LOG, SERVICE, STORE, argument, check_sources, given, moved, option
from jobaware.console import err, out, show
from jobaware.errors import InputError, JobawareError, UsageError
from jobaware.logs import OneLine, file_handler

DEFAULT_SERVICE = os.environ.get("JOBAWARE_HOLD_URL", "")
Service = Annotated[str, option(role=SERVICE, help="URL of the hold service (env JOBAWARE_HOLD_URL); none: no "
                                "decisions")]
PolicyFile = Annotated[Path | None, option("--policy", role=FILE, help="the site's policy file (YAML or TOML)")]
Year = Annotated[int | None, typer.Option(min=1970, max=2100, help="year of the first event of year-less (MM/DD) "
                                          "logs")]
Timeout = Annotated[float, typer.Option(min=0.1, max=3600, help="seconds to wait for one answer of the service")]
Logs = Annotated[list[Path] | None, option("--input", "-i", role=LOG, help="event log (repeatable); one not written "
                                           "yet is waited for (with --once: refused)")]
OldLogs = Annotated[list[Path] | None, argument(role=LOG, hidden=True, help="old spelling of --input")]
Store = Annotated[str, typer.Option("--store", envvar="JOBAWARE_STORE", metavar="STORE", help="the site's job store "
                                    "(env JOBAWARE_STORE): the audit and the read position kept there, beside what "
                                    "the other daemons keep")]
ReadStore = Annotated[str, option("--store", role=STORE, envvar="JOBAWARE_STORE", help="the site's job store (env "
                                  "JOBAWARE_STORE)")]


def _audit_place(store: str, audit: Path | None) -> str | Path:
    """The audit's place: a JSON Lines file when given, else the site's store; one line when neither is."""
    if audit is None and not store:
        raise UsageError("give the site's job store (--store or JOBAWARE_STORE) or an --audit file")
    return audit if audit is not None else store


def _log_to(path: Path) -> None:
    """The adapter's warnings: one line each on stderr and in `path`."""
    logger = logging.getLogger("jobaware.adapters.htcondor")
    if any(isinstance(handler, logging.FileHandler) for handler in logger.handlers):
        return  # set up already, in this process
    logger.setLevel(logging.INFO)
    stream = logging.StreamHandler()
    stream.setFormatter(OneLine("warning: %(message)s"))
    stream.setLevel(logging.WARNING)
    logger.addHandler(stream)
    logger.addHandler(file_handler(path, delay=True))  # the file only once there is something to say
    logger.propagate = False


def follow_command(
    inputs: Logs = None,
    logs: OldLogs = None,
    store: Store = "",
    audit: Annotated[Path | None, option(role=APPEND, help="a JSON Lines audit (appended) instead of the store")]
    = None,
    service: Service = DEFAULT_SERVICE,
    act: Annotated[bool, typer.Option("--act", help="release/remove (raise_memory: edit RequestMemory, release) through "
                                      "htcondor2 (default: dry-run)")] = False,
    policy: PolicyFile = None,
    state: Annotated[Path | None, option(role=APPEND, help="position file of an --audit file (default: "
                                         "AUDIT.state.json)")] = None,
    once: Annotated[bool, typer.Option("--once", help="read what is there now, then stop")] = False,
    seconds: Annotated[float | None, typer.Option(min=0.1, help="stop after this many seconds (default: run until "
                                                  "stopped)")] = None,
    year: Year = None,
    timeout: Timeout = 5.0,
    metrics_port: Annotated[int | None, typer.Option("--metrics-port", min=0, max=65535, help="serve Prometheus "
                                                     "metrics at http://HOST:PORT/metrics (default: none)")] = None,
    metrics_host: Annotated[str, typer.Option("--metrics-host", help="the address --metrics-port listens on")]
    = "127.0.0.1",
):
    """Follow event logs and decide every new hold over HTTP, audited, acting only as the policy allows.

    The audit goes in the site's store, or an --audit file. A log not written yet (the schedd not started, or
    nothing logged) is waited for, said once; with --once, logs holding no whole event are refused before anything
    is written. With --metrics-port, Prometheus metrics (holds decided, without a decision, acts done and refused,
    the service's back-off, the event window's size and when the position was last kept).

    Example: jobaware hold follow --input EventLog --audit holds.jsonl --once
    """
    from prometheus_client import CollectorRegistry

    from jobaware import config, metrics
    from jobaware.adapters.htcondor.adapter import HoldAdapter, refuse_synthetic
    from jobaware.adapters.htcondor.client import DecisionClient
    from jobaware.adapters.htcondor.policy import load_policy
    from jobaware.store import open_store

    logs = given(inputs, logs)
    place = _audit_place(store, audit)
    rules = load_policy(policy)
    acting = act or rules.mode == "act"
    if acting and not service:
        raise UsageError("--act: give --service (acting needs the model's decision)")
    if once:  # one pass: reading nothing is not success
        check_sources([str(log) for log in logs])
        _some_event(logs, year)
    series = metrics.Group(metrics.ADAPTER, CollectorRegistry())
    client = DecisionClient(service, timeout=timeout, series=series) if service else None
    if acting:
        refuse_synthetic(client)
    _log_to(Path(str(audit) + ".log") if audit is not None else config.logs_dir() / "hold-follow.log")
    opened = open_store(place) if audit is None else None
    exposition = None
    try:
        exposition = metrics.serve(series.registry, metrics_port, metrics_host)
        adapter = HoldAdapter(logs, audit, state, store=opened, client=client, policy=rules, act=act, year=year,
                              on_line=lambda line: out.print(line, highlight=False, soft_wrap=True), series=series)
        unverified = "" if client is None or client.services.verified else \
            "; the hold service's answers NOT verified (no JOBAWARE_SERVICE_TOKEN_FILE)"
        err.print(f"following {', '.join(map(str, logs))} ({'acting' if acting else 'dry-run'}){unverified}; audit "
                  f"{place}", highlight=False, soft_wrap=True)
        for log in adapter.follower.unwritten():
            err.print(f"waiting for {log} to be written", highlight=False, soft_wrap=True)
        try:
            total = adapter.run(seconds=seconds, once=once)
        finally:
            adapter.close()
    finally:
        if opened is not None:
            opened.close()
        if exposition is not None:
            exposition.close()
    err.print(f"done: {total.events} events, {total.holds} new holds ({total.decided} decided, {total.acted} acted), "
              f"{total.outcomes} outcomes, {total.seen_before} holds audited before; bad records "
              f"{adapter.follower.bad_records}", highlight=False, soft_wrap=True)


def _some_event(logs: list[Path], year: int | None) -> None:
    """Logs that hold no whole event are refused (one poll from their beginnings, nothing kept)."""
    from jobaware.adapters.htcondor.follower import Follower

    with tempfile.TemporaryDirectory() as scratch:
        follower = Follower(logs, Path(scratch) / "state.json", year=year)
        if follower.poll():
            return
    bad = f"{follower.bad_records:,} bad record(s)" if follower.bad_records else "no event ending with a `...` line"
    raise InputError(f"{', '.join(map(str, logs))}: no whole HTCondor event ({bad})")


HeldJob = Annotated[str, typer.Option("--job", metavar="CLUSTER.PROC", help="the held job, as HTCondor names it: 4242 "
                                      "(proc 0), 4242.3, or 4242.3.0 with its subproc")]
_MOVED = "the held job's cluster, proc and subproc ids, as one: 4242.3"


def decide_command(
    job: HeldJob,
    inputs: Annotated[Path | None, option("--input", "-i", role=FILE, metavar="LOG",
                                          help="the event log holding the job")] = None,
    log: Annotated[Path | None, argument(role=FILE, hidden=True, help="old spelling of --input")] = None,
    service: Service = DEFAULT_SERVICE,
    year: Year = None,
    timeout: Timeout = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (errors too)")] = False,
    _cluster: Annotated[str | None, moved("--cluster", "--job", _MOVED)] = None,
    _proc: Annotated[str | None, moved("--proc", "--job", _MOVED)] = None,
    _subproc: Annotated[str | None, moved("--subproc", "--job", _MOVED)] = None,
):
    """One decision for one held job: its last hold in LOG, with the same window `follow` sends.

    Example: jobaware hold decide --input EventLog --job 4242.0 --service http://127.0.0.1:3001
    """
    from jobaware.adapters.htcondor.client import DecisionClient
    from jobaware.adapters.htcondor.follower import Follower
    from jobaware.adapters.htcondor.window import Window

    cluster, proc, subproc = _held_job(job)
    log = inputs or log
    if log is None:
        raise UsageError("missing option '--input'")
    if not service:
        raise UsageError("missing option '--service' (the hold service's URL; or set JOBAWARE_HOLD_URL)")
    window, request = Window(), None
    with tempfile.TemporaryDirectory() as scratch:
        follower = Follower([log], Path(scratch) / "state.json", year=year)
        while events := follower.poll():
            for event in events:
                seq = window.add(event)
                if event.job == (cluster, proc, subproc) and event.code == 12:
                    request = window.request_log(event.job, seq)  # the last hold's wins
    if request is None:
        raise InputError(f"{log}: job {cluster}.{proc}.{subproc} has no hold (012 event) in this log")
    client = DecisionClient(service, timeout=timeout)
    try:
        reply = client.decide(cluster, proc, subproc, request)
    finally:
        client.close()
    if reply.status != "ok":
        raise JobawareError(f"no decision for {cluster}.{proc}.{subproc}: {reply.status}: {reply.reason}")
    answer = reply.answer
    trained = answer.get("trained_on") or {}
    row = {"job": f"{cluster}.{proc}.{subproc}", "hold_time": answer.get("hold_time"),
           "hold_reason": answer.get("hold_reason"), "p_release": answer.get("p_release"),
           "decision": answer.get("decision"), "decided_by": answer.get("decided_by"),
           "reasons": answer.get("reasons"), "model_version": answer.get("model_version"),
           "trained_on": f"{trained.get('source', 'unrecorded')} ({trained.get('labelled_holds', '?')} holds)"}
    show(answer if as_json else row, as_json)


def _held_job(text: str) -> tuple[int, int, int]:
    """`--job 4242[.3[.0]]` as (cluster, proc, subproc); a usage error otherwise."""
    parts = text.strip().split(".")
    if not 1 <= len(parts) <= 3 or not all(part.isascii() and part.isdigit() and len(part) <= 10 for part in parts):
        raise UsageError(f"--job {text[:40]!r}: expected an HTCondor job id: CLUSTER, CLUSTER.PROC or "
                         "CLUSTER.PROC.SUBPROC (4242.3)")
    numbers = [int(part) for part in parts] + [0] * (3 - len(parts))
    return numbers[0], numbers[1], numbers[2]


def policy_command(
    print_config: Annotated[bool, typer.Option("--print", help="print the site rule as HTCondor configuration")] = False,
    policy: PolicyFile = None,
):
    """The site's policy: checked, and with --print written as SYSTEM_PERIODIC_RELEASE / _REMOVE.

    Example: jobaware hold policy --policy policy.yaml --print
    """
    from jobaware.adapters.htcondor.policy import condor_config, load_policy

    rules = load_policy(policy)
    if print_config:
        out.print(condor_config(rules), soft_wrap=True, end="")
    else:
        show(rules.model_dump(), False)


def report_holds_command(
    store: ReadStore = "",
    audit: Annotated[Path | None, option(role=FILE, help="the follower's audit (JSON Lines) instead of the store")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (errors too)")] = False,
):
    """Holds by week: the model's recommendations, the site rule's calls, how they really ended, re-holds.

    Example: jobaware report holds --audit holds.jsonl
    """
    from jobaware.adapters.htcondor.report import summarize
    from jobaware.store import open_store

    place = _audit_place(store, audit)
    if audit is not None:
        rows = summarize(audit)
    else:
        with open_store(store) as opened:
            rows = summarize(opened, where=store)
    show(rows, as_json, rows=rows, title=f"holds in {place}")


def _group(app: typer.Typer, name: str) -> typer.Typer:
    for info in app.registered_groups:
        if info.name == name:
            return info.typer_instance
    raise JobawareError(f"the CLI has no `{name}` command group")


def register(app: typer.Typer) -> None:
    """`jobaware hold follow|decide|policy` and `jobaware report holds`."""
    hold = _group(app, "hold")
    hold.command("follow")(follow_command)
    hold.command("decide")(decide_command)
    hold.command("policy")(policy_command)
    _group(app, "report").command("holds")(report_holds_command)
