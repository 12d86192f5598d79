"""`jobaware mail status|flush|retry`: the mail spool that `jobaware-mail` (Slurm's MailProg) and `jobaware report
digest --mail` fill (`jobaware.usage.spool`)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from jobaware.console import out, show
from jobaware.errors import JobawareError

mail_app = typer.Typer(no_args_is_help=True, help="The mail spool: end-of-job mails and digests, sent over SMTP with "
                                                  "retries.")


def _settings(logged: bool = True):
    """The settings (the environment file under the environment, as jobaware-mail reads them); with `logged`, the
    mail log set up (a command that sends)."""
    from jobaware.adapters.slurm.mailprog import environment, log_folder
    from jobaware.usage.spool import Settings, log_to

    env = environment()
    settings = Settings.from_env(env)
    if logged:
        log_to(log_folder(env, settings.spool))
    return env, settings


@mail_app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False):
    """The mails waiting in the spool and those given up on, with their tries and last error.

    Example: jobaware mail status --json
    """
    from jobaware.usage.spool import Spool

    _, settings = _settings(logged=False)
    spool = Spool(settings.spool)
    rows = [{"where": where, "id": entry["id"], "to": ", ".join(entry["to"]), "subject": entry["subject"][:80],
             "tries": entry["tries"],
             "next try": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry["next_try"])) if where == "queue" else "",
             "last error": (entry["errors"] or [""])[-1][:160]}
            for where, folder in (("queue", spool.queue), ("failed", spool.failed))
            for _, entry in spool.entries(folder)]
    if as_json:
        show({"spool": str(spool.folder), "mails": rows}, True)
        return
    if not rows:
        out.print(f"no mail waiting or failed in {spool.folder}", highlight=False)
        return
    show(None, False, rows, title=f"mail spool {spool.folder}")


@mail_app.command("flush")
def flush():
    """Try every spooled mail now, due or not.

    The end-of-job mails' text is written first; exit 1 while any mail is waiting for a retry or was given up on.
    Runs beside a delivery that is waiting for its next try.

    Example: jobaware mail flush
    """
    from jobaware.adapters.slurm.mailprog import compose
    from jobaware.usage.spool import Spool, send_due

    env, settings = _settings()
    spool = Spool(settings.spool)
    done = send_due(spool, settings, lambda entry: compose(entry, env), every=True)
    waiting, failed = len(spool.entries()), len(spool.entries(spool.failed))
    out.print(f"sent {done.sent}; {waiting} waiting for a retry, {failed} given up on (through {settings.server})",
              highlight=False)
    if waiting or failed:
        raise JobawareError(f"mail: {waiting} waiting, {failed} given up on in {spool.folder}"
                            + (f"; last error: {done.errors[-1]}" if done.errors else "")
                            + "; see `jobaware mail status`")


@mail_app.command("retry")
def retry():
    """Queue the mails given up on again (each with its tries counted from zero); `flush` sends them.

    Example: jobaware mail retry
    """
    from jobaware.usage.spool import Spool

    _, settings = _settings()
    out.print(f"queued {Spool(settings.spool).retry_failed()} mail(s) again", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(mail_app, name="mail")
