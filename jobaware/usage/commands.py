"""`jobaware report jobs|waste|digest`: what finished jobs used against what they asked for (and against what
jobaware said before they ran), where node-hours went unused, and a digest per user or account to print or mail."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Literal

import typer

from jobaware.cli_contract import OUTPUT, STORE, option, when_option
from jobaware.console import err, out, progress, show
from jobaware.errors import InputError, UsageError
from jobaware.text import escaped

StoreOption = Annotated[str, option("--store", role=STORE, envvar="JOBAWARE_STORE", help="the site's job store (env "
                                    "JOBAWARE_STORE): a folder (SQLite) or redis://host:port/db")]
Since = Annotated[str, when_option("--since", help="jobs submitted from: 7d, 12h, 30m, 2w ago, a date 2026-01-31, a "
                                   "local time 2026-01-31T08:00, or all")]
Until = Annotated[str, when_option("--until", help="jobs submitted before: as --since, or now")]
Cluster = Annotated[str, typer.Option(help="the cluster's name in the store (default: every cluster)")]
JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON")]
Users = Annotated[list[str] | None, typer.Option("--user", help="only this user's jobs (repeat for more)")]
Accounts = Annotated[list[str] | None, typer.Option("--account", help="only this account's jobs (repeat for more)")]
Partitions = Annotated[list[str] | None, typer.Option("--partition", help="only this partition's jobs (repeat)")]


def _filters(since: str, until: str, cluster: str, jobs=None, arrays=None, users=None, accounts=None,
             partitions=None):
    from jobaware.usage.jobs import Filters, job_ids, moment, now

    at = now()
    start, end = moment(since, at, "--since"), moment(until, at, "--until")
    if start is not None and end is not None and start >= end:
        raise UsageError(f"--since {since} is not before --until {until}")
    return Filters(since=start, until=end, cluster=cluster or None, jobs=job_ids(jobs or []),
                   arrays=set(arrays or []), users=set(users or []), accounts=set(accounts or []),
                   partitions=set(partitions or []))


def _store(uri: str):
    from jobaware.store import is_store, open_store

    if not uri:
        raise UsageError("missing option '--store' (the site's job store; or set JOBAWARE_STORE)")
    if not is_store(uri):
        raise InputError(f"--store {uri}: no job store there (the collector creates it: jobaware slurm collect)")
    return open_store(uri)


def _read(store, filters, work, label: str):
    """`work(store, filters, advance)` with a progress count of the jobs read on stderr."""
    total = store.count(filters.cluster, filters.since, filters.until)
    with progress(label) as bar:
        task = bar.add_task("jobs", total=total)
        return work(lambda n: bar.advance(task, n))


def _cell(row: dict) -> dict:
    from jobaware.usage.jobs import said_text
    from jobaware.usage.measures import clock, hours, percent, size

    spread = row.get("distribution")
    if spread:
        def span(name, shown=percent):
            found = spread[name]
            return f"{shown(found['median'])} [{shown(found['p10'])}-{shown(found['p90'])}]" if found else "-"
        ran, time_eff, cpu_eff, mem_eff = span("elapsed_s", clock), span("time_eff"), span("cpu_eff"), span("mem_eff")
        memory = f"max {size((spread['mem_used_mib'] or {}).get('max'))} / {size(row.get('mem_req_mib'))}"
    else:
        ran, time_eff, cpu_eff, mem_eff = (clock(row.get("elapsed_s")), percent(row.get("time_eff")),
                                           percent(row.get("cpu_eff")), percent(row.get("mem_eff")))
        memory = f"{size(row.get('mem_used_mib'))} / {size(row.get('mem_req_mib'))}"
    return {"job": row["job"], "user": row.get("user") or "", "partition": row.get("partition") or "",
            "end": row["state"], "ran": ran, "time eff": time_eff, "CPU eff": cpu_eff, "memory used / asked": memory,
            "mem eff": mem_eff, "node-h": hours(row.get("node_hours")),
            "said before it ran": said_text(row.get("said") or [])}


def report_jobs(
    store: StoreOption = "",
    job: Annotated[list[str] | None, typer.Option("--job", help="a job id, an array's id (the whole array) or an "
                                                  "array task 123_4; repeat or separate by commas")] = None,
    array: Annotated[list[int] | None, typer.Option("--array", min=1, help="an array's id (repeat for more)")] = None,
    user: Users = None, account: Accounts = None, partition: Partitions = None,
    since: Since = "7d", until: Until = "now", cluster: Cluster = "",
    htcondor: Annotated[bool, typer.Option("--htcondor", help="the HTCondor jobs the follower kept (by end time) "
                                           "instead of Slurm's")] = False,
    limit: Annotated[int, typer.Option(min=1, max=100_000, help="rows at most (newest first; the totals and plots "
                                       "count every job)")] = 200,
    as_json: JsonFlag = False,
    html: Annotated[Path | None, option("--html", role=OUTPUT, metavar="PAGE", help="also write an HTML page with "
                                        "plots here")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing page")] = False,
):
    """One row per finished job: its efficiencies, its end, and what jobaware said before it ran.

    Time, CPU and memory efficiency; an array is one row, with the median and 10th-90th percentile of its tasks.

    Example: jobaware report jobs --store /var/lib/jobaware/store --since 7d --html jobs.html
    """
    from jobaware import extras
    from jobaware.usage.jobs import report

    if html is not None:
        extras.require("reports")  # the page's figures are matplotlib's
    if htcondor and (user or account or partition or array):
        raise UsageError("--htcondor: HTCondor's terminate events name no user, account, partition or array; "
                         "give --job, --since and --until only")
    filters = _filters(since, until, cluster, job, array, user, account, partition)
    with _store(store) as opened:
        found = _read(opened, filters, lambda advance: report(opened, filters, limit, "htcondor" if htcondor
                                                              else "slurm", advance), "reading jobs")
    if html is not None:
        from jobaware.usage.mail import period
        from jobaware.usage.page import write

        write(found, html, f"Finished jobs submitted {period(filters.since, filters.until)}"
              + (f" on {cluster}" if cluster else ""))
        err.print(f"page: {html}", highlight=False, soft_wrap=True)
    if as_json:
        show({"since": filters.since, "until": filters.until, "totals": _totals(found), "jobs": found.rows}, True)
        return
    if not found.rows:
        out.print(f"no finished job matches (jobs submitted {since} to {until}; {found.not_finished} not finished "
                  "yet)", highlight=False)
        return
    show(None, False, [_cell(row) for row in found.rows], title="finished jobs (arrays: median [10th-90th "
                                                                 "percentile] of their tasks)")
    from jobaware.usage.measures import hours

    states = ", ".join(f"{n:,} {s}" for s, n in found.states.most_common())
    out.print(f"{found.jobs:,} jobs ({states}); {hours(found.node_hours)} node-hours, {hours(found.failed_node_hours)} "
              f"failed, {hours(found.timeout_node_hours)} timed out; {found.unaccounted:,} without accounting data; "
              f"{found.not_finished:,} not finished; {found.not_listed:,} not listed", highlight=False, soft_wrap=True)


def report_waste(
    store: StoreOption = "",
    by: Annotated[Literal["user", "account", "partition"], typer.Option(help="the groups (a row each)")] = "user",
    since: Since = "30d", until: Until = "now", cluster: Cluster = "",
    top: Annotated[int, typer.Option(min=1, max=10_000, help="groups listed (the most wasteful first)")] = 10,
    sort: Annotated[Literal["wasted", "idle", "failed", "timeout", "unused_limit", "unused_memory", "node_hours"],
                    typer.Option(help="the order (the most first)")] = "wasted",
    as_json: JsonFlag = False,
):
    """Node-hours idle, failed, timed out, or asked for and unused, per user, account or partition.

    The top offenders first; and what the recommendations would have released.

    Example: jobaware report waste --store /var/lib/jobaware/store --by account --since 30d --top 20
    """
    from jobaware.usage.waste import waste

    filters = _filters(since, until, cluster)
    with _store(store) as opened:
        rows, total = _read(opened, filters, lambda advance: waste(opened, filters, by, advance), "reading jobs")
    rows = sorted(rows, key=lambda r: (-(r[sort] or 0), r[by]))[:top]
    if as_json:
        show({"since": filters.since, "until": filters.until, "by": by, "groups": rows, "total": total}, True)
        return
    if not rows:
        out.print(f"no finished job submitted {since} to {until}", highlight=False)
        return
    parts = sorted({part for row in [*rows, total] for part in row["released_by"]})

    def shown(row: dict) -> dict:
        from jobaware.usage.measures import hours, percent

        return {by: row[by], "jobs": f"{row['jobs']:,}", "node-h": hours(row["node_hours"]),
                "CPU eff": percent(row["cpu_eff"]), "wasted node-h": hours(row["wasted"]), "idle": hours(row["idle"]),
                "failed": hours(row["failed"]), "timed out": hours(row["timeout"]),
                "limit unused": hours(row["unused_limit"]), "memory unused GiB-h": hours(row["unused_memory"]),
                "released by own use": hours(row["released_by_use"]),
                **{f"released by {part}": hours(row["released_by"].get(part, 0.0)) for part in parts}}

    show(None, False, [shown(row) for row in rows] + [shown(total)],
         title=f"node-hours by {by}, top {len(rows)} by {sort} (last row: every job)")


def report_digest(
    store: StoreOption = "",
    by: Annotated[Literal["user", "account"], typer.Option(help="the groups (a digest each)")] = "user",
    since: Since = "7d", until: Until = "now", cluster: Cluster = "",
    user: Users = None, account: Accounts = None,
    mail: Annotated[bool, typer.Option("--mail", help="mail each digest (to the user; an account's to --to)")] = False,
    to: Annotated[str, typer.Option(help="where an account's digests go with --mail (an address)")] = "",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="with --mail: print the mails, send nothing")] = False,
    worst: Annotated[int, typer.Option(min=0, max=100, help="jobs listed per digest (those that left most "
                                       "unused)")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON: each digest's totals and text (not with "
                                          "--mail)")] = False,
):
    """A digest per user (or account) of the jobs that finished in a period, printed or mailed.

    Counts, efficiencies, failed work, the jobs that left most unused with the values to ask for next time; mailed
    over SMTP, retried.

    Example: jobaware report digest --store /var/lib/jobaware/store --since 7d --mail --dry-run
    """
    from jobaware.usage.jobs import Filters, finished, summarize
    from jobaware.usage.mail import digest, period

    if mail and by == "account" and not to:
        raise UsageError("--mail --by account: give --to, the address the account digests go to")
    if to and (not mail or by != "account"):
        raise UsageError("--to: only with --mail --by account (a user's digest goes to the user)")
    if dry_run and not mail:
        raise UsageError("--dry-run: only with --mail (without --mail nothing is sent)")
    if as_json and mail:
        raise UsageError("--json: not with --mail (it prints the digests; --mail --dry-run prints the mails)")
    settings = _mail_settings() if mail else None
    if to:
        from jobaware.usage.spool import address

        try:
            address(to, settings.domain)
        except ValueError as exc:
            raise UsageError(f"--to: {exc}") from None
    filters = _filters(since, until, cluster, users=user, accounts=account)
    named = set(user or []) if by == "user" else set(account or [])
    with _store(store) as opened:
        groups: dict[str, list] = {name: [] for name in named}

        def collect(advance) -> None:
            for happened, predictions in finished(opened, filters):
                advance(1)
                if happened is not None:
                    groups.setdefault(happened.get(by) or "(none)", []).append((happened, predictions))

        _read(opened, filters, collect, "reading jobs")
    until_ = filters.until or time.time()
    summaries = {name: summarize(pairs, limit=100_000, grouped=Filters().grouped)
                 for name, pairs in sorted(groups.items())}
    digests = {name: digest(f"{by} {name}", found, filters.since, until_, worst) for name, found in summaries.items()}
    if as_json:
        show({"by": by, "since": filters.since, "until": until_,
              "digests": {name: {"totals": _totals(found), "text": digests[name]} for name, found in summaries.items()}},
             True)
        return
    if not digests:
        out.print(f"no job finished from {since} to {until}: no digest", highlight=False)
        return
    if not mail:
        for name, text in digests.items():
            out.print(f"== {by} {name} ==\n{text}", highlight=False, soft_wrap=True)
        return
    _mail_digests(digests, groups, by, to, settings, dry_run, period(filters.since, until_))


def _totals(found) -> dict:
    """A report's totals (`jobaware.usage.jobs.summarize`), as the reports' JSON gives them."""
    return {"jobs": found.jobs, "states": dict(found.states), "node_hours": found.node_hours,
            "failed_node_hours": found.failed_node_hours, "timeout_node_hours": found.timeout_node_hours,
            "without_accounting": found.unaccounted, "not_finished": found.not_finished,
            "not_listed": found.not_listed}


def _mail_settings():
    from jobaware import config
    from jobaware.usage.spool import Settings, log_to

    log_to(config.logs_dir())
    return Settings.from_env(os.environ)


def _mail_digests(digests: dict, groups: dict, by: str, to: str, settings, dry_run: bool, when: str) -> None:
    """Spool and send each digest; a digest whose address is refused (a user named `<script>`, `a@b@c`) is kept in
    the spool's failed/ and makes the command fail, naming it, after the others are sent."""
    from jobaware.usage.spool import Spool, address, message, send_due

    subject = f"jobaware: your jobs {when}" if by == "user" else f"jobaware: the jobs of account {{name}} {when}"
    spool, sent_to, skipped, refused = Spool(settings.spool), [], [], []
    for name, text in digests.items():
        if not groups[name] or (by == "user" and name == "(none)"):
            skipped.append(name)  # a user with no job gets no mail, nor do the jobs that name no user
            continue
        entry = {"id": f"digest-{name}", "created": time.time(), "to": [name if by == "user" else to],
                 "subject": subject.format(name=name), "body": text, "request": {}}
        try:
            address(entry["to"][0], settings.domain)
        except ValueError as exc:
            refused.append(f"{by} {escaped(name)}: {exc}")
            if not dry_run:
                spool.put(entry["to"], entry["subject"], text, kind="digest", refused=str(exc))
            continue
        if dry_run:
            out.print(message(entry, settings).as_string(), highlight=False, soft_wrap=True)
            continue
        spool.put(entry["to"], entry["subject"], text, kind="digest")
        sent_to.append(name)
    for name in skipped:
        why = "jobs that name no user" if groups[name] else "no job finished in the period"
        err.print(f"{by} {escaped(name)}: {why}; no digest mailed", highlight=False)
    done = send_due(spool, settings) if sent_to else None
    if done is not None and not (done.deferred or done.failed):
        out.print(f"mailed {done.sent} digest(s) through {settings.server}", highlight=False)
    problems = [f"{done.sent} of {len(sent_to)} digest(s) sent through {settings.server}: "
                f"{done.errors[-1] if done.errors else 'not sent'}; the rest stay in {spool.folder} (retried by "
                "`jobaware mail flush`, see `jobaware mail status`)"] if done and (done.deferred or done.failed) else []
    if refused:
        problems.append(f"{len(refused)} digest(s) not mailed, the address refused: {refused[0]}"
                        + ("" if dry_run else f"; kept in {spool.failed}"))
    if problems:
        raise InputError("; ".join(problems))


def register(app: typer.Typer, report_app: typer.Typer) -> None:
    report_app.command("jobs")(report_jobs)
    report_app.command("waste")(report_waste)
    report_app.command("digest")(report_digest)
