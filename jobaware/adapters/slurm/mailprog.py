"""Slurm's `MailProg`: the usual job mail, with the job's efficiency lines and the values to ask for next time.

slurmctld runs `MailProg -s SUBJECT USER` for a job's `--mail-type` events, with the job's `SLURM_*` variables as
its only environment (`SLURM_JOB_ID`, `SLURM_JOB_MAIL_TYPE`, `SLURM_ARRAY_JOB_ID`, `SLURM_CLUSTER_NAME`, ...; no
PATH), reading its output through a pipe and waiting for it. So this program only spools the request (one file,
written whole and synced, `jobaware.usage.spool`) and starts a delivery in a session of its own, with no file of
slurmctld's open, then returns: slurmctld never waits on accounting or on a mail server. A request it cannot
spool is said on its output with exit status 1, which slurmctld logs ("MailProg returned error"). Of slurmctld's
variables the spool keeps those in REQUEST, each of its form (checked again when the delivery reads it back: the
spool is writable by the group jobaware); `sacct` and `squeue` run with jobaware's own settings only.

The delivery (`--deliver`) writes each mail when it is due: for the end of a job (`Ended`, `Failed`, `Reached time
limit`) it asks accounting for the job's use (`sacct -j`, asked again every 5 s for up to 2 minutes while the
job's record is not final or, for an array's summary, while it lacks the final record of a task slurmctld still
holds: `squeue --array --states=all`), reads what jobaware said before the run from the job store, and writes the
usual subject with the efficiency lines (`jobaware.usage.mail`); other mails keep Slurm's subject and empty body. It
sends over SMTP with retries (about an hour), then stops; what it could not send stays in the spool (`jobaware
mail status`, `jobaware mail flush`). Its log: `$JOBAWARE_HOME/logs/mail.log`.

Settings come from the environment file the jobaware units read (`/etc/jobaware/jobaware.env`, or the file named
by `JOBAWARE_CONFIG`, with the credentials file it names): `JOBAWARE_SMTP`, `JOBAWARE_MAIL_FROM`,
`JOBAWARE_MAIL_DOMAIN`, `JOBAWARE_MAIL_SPOOL`, `JOBAWARE_HOME`, `JOBAWARE_STORE`, `SLURM_CONF`, `PATH` (where `sacct` and `squeue` are; default the system's).

    jobaware-mail -s SUBJECT USER...            as slurm.conf's MailProg
    jobaware-mail --dry-run -s SUBJECT USER     the mail it would send, on standard output (nothing spooled)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from jobaware.text import ascii_digits, escaped

PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
USAGE = """\
usage: jobaware-mail -s SUBJECT USER...         as slurm.conf's MailProg: spool the job's mail, start its delivery
       jobaware-mail --dry-run -s SUBJECT USER  print the mail it would send (nothing spooled)
       jobaware-mail --deliver                  send what the spool holds (what the program starts by itself)
Settings: /etc/jobaware/jobaware.env, or the file JOBAWARE_CONFIG names (JOBAWARE_SMTP, JOBAWARE_MAIL_FROM,
JOBAWARE_MAIL_DOMAIN, JOBAWARE_MAIL_SPOOL, JOBAWARE_HOME, JOBAWARE_STORE, SLURM_CONF, PATH). The spool:
`jobaware mail status`, `jobaware mail flush`."""
ACCOUNTING_WAIT = 120.0  # seconds after the job's mail that accounting is asked again for its final record
ASK_AGAIN = 5.0
LIFE = 75 * 60.0  # a delivery stops after this: the mails' tries (about an hour) fit in it
USE_TYPES = ("Ended", "Failed", "Reached time limit")  # mails that carry the job's use
# never JobName: `sacct -P` prints a job's name as it is, and a name holding a line break or a `|` forges records
# (`sbatch -J $'x\n2|0:0||...'`); the name comes from slurmctld's SLURM_JOB_NAME, one variable
TIMES = ("Submit", "Start", "End", "User", "Account", "Partition")


def environment(environ: dict | None = None) -> dict[str, str]:
    """The settings every jobaware command reads (`jobaware.config.site_settings`: JOBAWARE_CONFIG, default
    /etc/jobaware/jobaware.env, and the credentials file it names), under the process's own environment."""
    from jobaware.config import site_settings

    return site_settings(environ)


# the variables of slurmctld's MailProg environment that a mail keeps in the spool, each with the only form Slurm
# gives it; checked when MailProg spools the mail and again when the delivery reads it back (the spool is the
# group jobaware's: a file in it is untrusted input). None of them ever reaches a command's environment.
MAIL_TYPES = frozenset({"Began", "Ended", "Failed", "Requeued", "Invalid dependency", "Staged Out", "StageOut/Teardown",
                        "Reached time limit", "Reached 50% of time limit", "Reached 80% of time limit",
                        "Reached 90% of time limit"})
_ID = re.compile(r"[0-9]{1,10}")  # a 32-bit job or task id
_CLUSTER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
NAME_LIMIT = 1024  # characters of a job name at most (slurmctld refuses a longer one)
REQUEST = {
    "SLURM_JOB_ID": ("ASCII digits", _ID.fullmatch),
    "SLURM_ARRAY_JOB_ID": ("ASCII digits", _ID.fullmatch),
    "SLURM_ARRAY_TASK_ID": ("ASCII digits", _ID.fullmatch),
    "SLURM_JOB_MAIL_TYPE": ("one of Slurm's mail types", MAIL_TYPES.__contains__),
    "SLURM_CLUSTER_NAME": ("a cluster name (letters, digits, _.-, at most 64)", _CLUSTER.fullmatch),
    "SLURM_JOB_NAME": (f"a job name of at most {NAME_LIMIT} characters", lambda name: len(name) <= NAME_LIMIT),
}


def slurm_request(values: Mapping[str, str]) -> dict[str, str]:
    """What a mail keeps of slurmctld's variables (`values`: MailProg's environment, or a spooled request read
    back): the names of REQUEST only, each of its form; a ValueError naming the first that is not. Any other name
    (PATH, LD_PRELOAD, SLURM_CONF, ...) is left out."""
    if not isinstance(values, Mapping):
        raise ValueError(f"the request: expected an object, got {type(values).__name__}")
    kept = {}
    for name, (form, valid) in REQUEST.items():
        value = values.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not valid(value):
            raise ValueError(f"{name} {str(value)[:80]!r}: expected {form}")
        kept[name] = value
    return kept


def command_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment `sacct` and `squeue` run with: jobaware's own settings only (`env`: the environment file
    under the process's environment, never a spooled request): PATH (default a fixed system PATH), SLURM_CONF,
    and epoch times."""
    return {"PATH": env.get("PATH") or PATH, "SLURM_TIME_FORMAT": "%s",
            **({"SLURM_CONF": env["SLURM_CONF"]} if env.get("SLURM_CONF") else {})}


def parse(argv: list[str]) -> tuple[str, list[str], set[str]]:
    """(subject, recipients, flags) of a mail(1)-like command line: `-s SUBJECT`, recipients, `--dry-run`,
    `--deliver`; other mail(1) options are passed over (with their value for `-a -b -c -r`)."""
    subject, recipients, flags = "", [], set()
    words = iter(argv)
    for word in words:
        if word == "-s":
            subject = next(words, "")
        elif word in ("--dry-run", "--deliver"):
            flags.add(word)
        elif word in ("-a", "-b", "-c", "-r"):
            next(words, None)
        elif not word.startswith("-"):
            recipients.append(word)
    return subject, recipients, flags


# ---------------------------------------------------------------- writing the mail (in the delivery)
def _sacct(job: str, env: dict[str, str]) -> str | None:
    from jobaware.adapters.slurm.usage import USAGE_FIELDS
    from jobaware.failure.reader.slurm import SACCT_ENDS

    fields = SACCT_ENDS + tuple(f for f in (*USAGE_FIELDS, *TIMES) if f not in SACCT_ENDS)
    try:
        done = subprocess.run(["sacct", "-j", job, "-P", "-o", ",".join(fields)], capture_output=True, text=True,
                              env=command_environment(env), timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def array_tasks(array: str, env: dict[str, str]) -> set[int]:
    """The task ids slurmctld still holds of array job `array` (finished ones too, for MinJobAge); empty when it
    cannot say."""
    try:
        done = subprocess.run(["squeue", "--array", "--states=all", "--noheader", "--format=%K", f"--jobs={array}"],
                              capture_output=True, text=True, env=command_environment(env), timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {int(word) for word in done.stdout.split() if ascii_digits(word)} if done.returncode == 0 else set()


def _epoch(text: str | None) -> int | None:
    return int(text) if ascii_digits(text) else None


def records(parsable: str, cluster: str, name: str | None = None) -> list[dict]:
    """The job-store records (row, final state, usage) of the jobs of `sacct -P` output with times as epochs (a
    line of another number of fields than the header is no record), each named `name`."""
    from jobaware.adapters.slurm.usage import sacct_usage
    from jobaware.failure.reader.slurm import end_state, sacct_ends

    lines = parsable.splitlines()
    header = lines[0].split("|") if lines else []
    usage, ends, found = sacct_usage(parsable), sacct_ends(parsable), []
    for line in lines[1:]:
        values = line.split("|")
        if len(values) != len(header):
            continue
        fields = dict(zip(header, values, strict=True))
        job = fields.get("JobIDRaw", "")
        if not ascii_digits(job) or int(job) not in usage:
            continue
        used = usage[int(job)]
        end = ends.get(int(job))
        state = end_state(used["state"], used["signal"], end.rss_share if end else None)
        start, stop = _epoch(fields.get("Start")), _epoch(fields.get("End"))
        found.append({"cluster": cluster, "job_id": int(job), "submit_time": _epoch(fields.get("Submit")) or 0,
                      "row": {"user": fields.get("User") or None, "account": fields.get("Account") or None,
                              "partition": fields.get("Partition") or None, "name": name or None,
                              "start_time": start, "end_time": stop, "state": state},
                      "final": {"state": state, "source": "sacct", "exit_code": used["exit_code"],
                                "signal": used["signal"]}, "usage": used})
    return found


def _predictions(records_: list[dict], env: dict[str, str]) -> dict:
    """Each record's predictions in the job store (`JOBAWARE_STORE`), where there is one."""
    from jobaware.store import JobKey, is_store, open_store

    uri = env.get("JOBAWARE_STORE")
    if not uri or not is_store(uri):
        return {}
    with open_store(uri) as store:
        return {r["job_id"]: store.predictions(JobKey(r["cluster"], r["job_id"], r["submit_time"])) for r in records_}


FINAL = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED")


def compose(entry: dict, env: dict[str, str] | None = None, now: float | None = None) -> str:
    """The body of a spooled Slurm mail (`NotYet` while accounting has not closed the job, up to ACCOUNTING_WAIT);
    a ValueError when its spooled request is not what MailProg spools."""
    from jobaware.usage.jobs import facts, summarize
    from jobaware.usage.mail import end_of_job
    from jobaware.usage.spool import NotYet

    env = environment() if env is None else env
    request, now = slurm_request(entry.get("request") or {}), time.time() if now is None else now
    if request.get("SLURM_JOB_MAIL_TYPE") not in USE_TYPES:
        return ""
    summary = "Array Summary" in entry["subject"] and request.get("SLURM_ARRAY_JOB_ID")
    job = request.get("SLURM_ARRAY_JOB_ID") if summary else request.get("SLURM_JOB_ID")
    if not job:
        return end_of_job([], "jobaware: Slurm named no job id; no efficiency lines.")
    found = records(_sacct(job, env) or "", request.get("SLURM_CLUSTER_NAME") or "", request.get("SLURM_JOB_NAME"))
    if not summary:
        found = [r for r in found if str(r["job_id"]) == job]
    closed = bool(found) and all(r["final"]["state"] in FINAL and r["usage"]["elapsed_s"] is not None for r in found)
    if summary and closed:  # accounting may not have every task yet: wait for those slurmctld knows
        closed = array_tasks(job, env) <= {r["usage"].get("array_task_id") for r in found}
    if not closed and now - entry["created"] < ACCOUNTING_WAIT:
        raise NotYet(ASK_AGAIN)
    note = None if closed else (f"jobaware: accounting had no final record of job {job} {ACCOUNTING_WAIT:.0f} s after "
                                "Slurm's mail; its use is not known yet (`jobaware report jobs` shows it later).")
    predictions = _predictions(found, env) if found else {}
    rows = summarize(((facts(r), predictions.get(r["job_id"], {})) for r in found if r["final"]["state"] in FINAL),
                     limit=10_000).rows
    return end_of_job(rows, note)


# ---------------------------------------------------------------- the program
def log_folder(env: dict[str, str], spool: Path) -> Path:
    """Where the mail log goes: `$JOBAWARE_HOME/logs`, or the spool without a home."""
    return Path(env["JOBAWARE_HOME"]) / "logs" if env.get("JOBAWARE_HOME") else spool


def deliver(env: dict[str, str]) -> int:
    """The delivery: every due mail of the spool, with retries, for at most LIFE seconds."""
    from jobaware.usage.spool import Settings, Spool, log_to
    from jobaware.usage.spool import deliver as deliver_spool

    settings = Settings.from_env(env)
    log_to(log_folder(env, settings.spool))
    deliver_spool(Spool(settings.spool), settings, lambda entry: compose(entry, env), until=time.time() + LIFE)
    return 0


def start_delivery(settings: dict[str, str]) -> None:
    """A delivery in a session of its own, holding none of this process's files (slurmctld's pipe), with
    `settings` (absolute paths) over this process's environment less the job's variables (slurmctld gives no
    PATH: the environment file's, else the system's, is the delivery's)."""
    own = {name: value for name, value in os.environ.items() if not name.startswith("SLURM_") or name == "SLURM_CONF"}
    subprocess.Popen([sys.executable, "-P", "-m", "jobaware.adapters.slurm.mailprog", "--deliver"], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True,
                     cwd="/", env={**own, **settings})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--help" in argv or argv == ["-h"]:  # slurmctld passes neither
        print(USAGE)
        return 0
    subject, recipients, flags = parse(argv)
    os.umask(0o007)  # as the jobaware units: the spool and the log stay writable by the group jobaware
    try:
        env = environment()
        if "--deliver" in flags:
            return deliver(env)
        from jobaware.usage.spool import WORKER, Settings, Spool, address, message

        if env.get("JOBAWARE_HOME"):  # the spool and the log where a delivery started in / finds them
            env["JOBAWARE_HOME"] = str(Path(env["JOBAWARE_HOME"]).resolve())
        settings = Settings.from_env(env)
        if not recipients:
            raise ValueError("no recipient given (expected: -s SUBJECT USER)")
        if "--dry-run" in flags:
            entry = {"id": "dry-run", "created": time.time() - ACCOUNTING_WAIT, "to": recipients,
                     "subject": subject, "body": None, "request": slurm_request(os.environ)}
            entry["body"] = compose(entry, env)
            print(message(entry, settings).as_string())
            return 0
        spool = Spool(settings.spool.resolve())
        try:
            request, refused = slurm_request(os.environ), None
        except ValueError as exc:
            request, refused = {}, f"slurmctld's variables: {exc}"
        for recipient in recipients:
            try:
                address(recipient, settings.domain)
            except ValueError as exc:
                refused = refused or str(exc)
        kept = spool.put(recipients, subject, None, kind="slurm", request=request, refused=refused)
        if refused:
            print(escaped(f"jobaware-mail: the mail to {', '.join(recipients)} ({subject!r}) is kept in "
                          f"{kept.parent}: {refused}"), file=sys.stderr)
            return 1
        with spool.locked(WORKER) as free:
            running = not free  # a delivery is running: it sends this mail too (it looks again before it ends)
        if not running:
            start_delivery({"JOBAWARE_MAIL_SPOOL": str(spool.folder),
                            **({"JOBAWARE_HOME": env["JOBAWARE_HOME"]} if env.get("JOBAWARE_HOME") else {})})
        return 0
    except Exception as exc:  # noqa: BLE001 - slurmctld logs this line; nothing else may escape
        print(escaped(f"jobaware-mail: the mail to {', '.join(recipients) or '?'} ({subject!r}) was not spooled: "
                      f"{type(exc).__name__}: {exc}"), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
