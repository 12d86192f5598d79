"""A mail spool delivered over SMTP with retries: no mail is lost silently.

Each mail is one JSON file in `<spool>/queue/`, written whole (a temporary file, synced, renamed) before anything
tries to send it. A delivery (`deliver`, one at a time) sends every mail that is due, and on a failure keeps the
mail with its error and the time of its next try (30 s, then doubling: `TRIES` tries over about an hour), waiting
for it; `send_due` is one pass over the queue (`jobaware mail flush`), which may run beside a delivery. A mail refused for good (a 5xx answer) or out of tries moves to `<spool>/failed/`, with every error, and an error
line goes to the log; `jobaware mail status` lists them and `jobaware mail retry` queues them again. A mail may be
spooled before its text is known (`body` None: the end-of-job mail, whose efficiency lines wait for accounting):
the delivery's `compose` writes it, or says when to ask again (`NotYet`).

An entry: `id`, `created`, `to` (addresses or user names, completed with `JOBAWARE_MAIL_DOMAIN`), `subject`,
`body` (None until composed), `kind`, `request` (what `compose` needs), `tries`, `next_try`, `errors`.
"""

from __future__ import annotations

import contextlib
import email.policy
import fcntl
import json
import logging
import os
import re
import smtplib
import socket
import stat
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from email.errors import MessageError
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path

from jobaware.config import trusted
from jobaware.logs import file_handler
from jobaware.text import ascii_digits, escaped

log = logging.getLogger("jobaware.mail")

TRIES = 8  # tries per mail: at 0, 30 s, 1.5 min, 3.5 min, ... about 64 minutes after the first
FIRST_DELAY = 30.0  # seconds before the second try; each later wait twice the one before
QUEUE, FAILED = "queue", "failed"
PASS, WORKER = ".pass.lock", ".worker.lock"  # held during one pass over the queue; for a delivery's whole life
ENTRY = {"id", "created", "to", "subject", "body", "tries", "next_try", "errors"}  # the keys a spooled mail has
ENTRY_TYPES = {"id": (str,), "created": (int, float), "to": (list,), "subject": (str,), "body": (str, type(None)),
               "tries": (int,), "next_try": (int, float), "errors": (list,), "kind": (str,), "request": (dict,)}
ENTRY_BYTES = 4 * 2**20  # a spooled mail's file at most (a digest of 100 jobs is some kB)
ADDRESS_LIMIT = 254  # characters of a mail address at most (RFC 5321's path, less its brackets)
USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")  # POSIX's portable user names, not led by '-'
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")  # a host name: letters, digits and inner hyphens per label


class NotYet(Exception):
    """Raised by a `compose`: the mail's text cannot be written yet; ask again in `seconds`."""

    def __init__(self, seconds: float):
        super().__init__(f"not yet, again in {seconds:.0f} s")
        self.seconds = seconds


class Undelivered(Exception):
    """The SMTP server did not take the mail; `permanent` when it refused it for good (a 5xx answer)."""

    def __init__(self, reason: str, permanent: bool = False):
        super().__init__(reason)
        self.permanent = permanent


@dataclass(frozen=True)
class Settings:
    """Where and how mail goes: the SMTP server (`JOBAWARE_SMTP`, host[:port], default localhost:25), STARTTLS
    (`JOBAWARE_SMTP_STARTTLS=1`), a login (`JOBAWARE_SMTP_USER`, `JOBAWARE_SMTP_PASSWORD`), the sender
    (`JOBAWARE_MAIL_FROM`; empty: jobaware@<this host>, looked up when a mail is built), the domain completing bare user names
    (`JOBAWARE_MAIL_DOMAIN`) and the spool (`JOBAWARE_MAIL_SPOOL`, default $JOBAWARE_HOME/mail)."""

    host: str = "localhost"
    port: int = 25
    starttls: bool = False
    user: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a message or a log line
    sender: str = ""
    domain: str | None = None
    spool: Path = Path("mail")
    timeout: float = 30.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        from jobaware.errors import InputError

        smtp = env.get("JOBAWARE_SMTP") or "localhost:25"
        host, colon, port = smtp.rpartition(":")
        if not colon:
            host, port = smtp, "25"
        if not ascii_digits(port) or not 0 < int(port) < 65536 or not host:
            raise InputError(f"JOBAWARE_SMTP {env.get('JOBAWARE_SMTP')!r}: expected host[:port]")
        home = Path(env.get("JOBAWARE_HOME") or ".jobaware")
        return cls(host=host, port=int(port), starttls=env.get("JOBAWARE_SMTP_STARTTLS", "") in ("1", "yes", "true"),
                   user=env.get("JOBAWARE_SMTP_USER") or None, password=env.get("JOBAWARE_SMTP_PASSWORD") or None,
                   sender=env.get("JOBAWARE_MAIL_FROM") or "",
                   domain=env.get("JOBAWARE_MAIL_DOMAIN") or None,
                   spool=Path(env.get("JOBAWARE_MAIL_SPOOL") or home / "mail"))

    @property
    def server(self) -> str:
        return f"{self.host}:{self.port}"


def log_to(folder: Path) -> Path:
    """The mail log (`folder/mail.log`): every mail sent, every failed try, every mail given up on."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mail.log"
    if not any(getattr(h, "baseFilename", None) == str(path.resolve()) for h in log.handlers):
        log.addHandler(file_handler(path))
    log.setLevel(logging.INFO)
    log.propagate = False
    return path


def address(recipient: str, domain: str | None) -> str:
    """The mail address of a recipient, read strictly: an address (an RFC 5322 addr-spec, as the standard library's
    parser reads it whole, whose domain is a host name) as it is; a user name (POSIX's portable characters, as
    Slurm's and the system's) completed with the site's mail domain, or as it is without one (a local mailbox). A
    ValueError naming the recipient for anything else: `a@b@c`, `<script>`, a list, a display name."""
    if not isinstance(recipient, str) or not recipient:
        raise ValueError(f"recipient {recipient!r}: expected a mail address or a user name")
    shown = escaped(recipient[:ADDRESS_LIMIT]) + ("..." if len(recipient) > ADDRESS_LIMIT else "")
    if "@" not in recipient:
        if not USER_NAME.fullmatch(recipient):
            raise ValueError(f"recipient '{shown}': neither a mail address nor a user name")
        if not domain:
            return recipient
        recipient = f"{recipient}@{domain}"
        shown = escaped(recipient[:ADDRESS_LIMIT])
    if len(recipient) > ADDRESS_LIMIT:
        raise ValueError(f"address '{shown}...': longer than {ADDRESS_LIMIT} characters")
    try:
        parsed = Address(addr_spec=recipient)
    except (ValueError, IndexError, MessageError) as exc:
        raise ValueError(f"address '{shown}': not a mail address ({escaped(str(exc))})") from None
    if parsed.addr_spec != recipient or not _DOMAIN.fullmatch(parsed.domain):
        raise ValueError(f"address '{shown}': not a mail address (expected user@host.domain)")
    return recipient


def delay(tries: int) -> float:
    """Seconds to wait after the `tries`-th failed try."""
    return FIRST_DELAY * 2 ** (tries - 1)


# ---------------------------------------------------------------- the spool
def _read_entry(path: Path) -> dict:
    """A spooled mail read from `path`: a regular file (not followed if a link, never waited on if a FIFO) of at
    most ENTRY_BYTES, holding an object with ENTRY's keys of their types; ValueError (OSError) saying why not. The
    spool is writable by the group jobaware: what a file in it says is checked like any input."""
    handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with open(handle, "rb") as file:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise ValueError("not a regular file")
        data = file.read(ENTRY_BYTES + 1)
    if len(data) > ENTRY_BYTES:
        raise ValueError(f"larger than {ENTRY_BYTES:,} bytes")
    entry = json.loads(data.decode("utf-8"))
    if not isinstance(entry, dict) or not ENTRY <= entry.keys():
        raise ValueError(f"expected an object with {', '.join(sorted(ENTRY))}")
    for key, types in ENTRY_TYPES.items():
        if key in entry and (not isinstance(entry[key], types) or isinstance(entry[key], bool)):
            raise ValueError(f"{key}: expected {' or '.join(t.__name__ for t in types)}, got "
                             f"{type(entry[key]).__name__}")
    if not all(isinstance(user, str) for user in entry["to"]) or not all(isinstance(e, str) for e in entry["errors"]):
        raise ValueError("to and errors: expected lists of strings")
    return entry


class Spool:
    def __init__(self, folder: str | Path):
        """The spool in `folder`, refused (`jobaware.config.Untrusted`) when another user owns it or every user may
        write it: its mails choose what the delivery asks accounting and whom it writes to."""
        self.folder = trusted(Path(folder).resolve(), "the mail spool")
        self.queue, self.failed = self.folder / QUEUE, self.folder / FAILED

    def put(self, to: list[str], subject: str, body: str | None, kind: str = "mail", request: dict | None = None,
            now: float | None = None, refused: str | None = None) -> Path:
        """Spool a mail (written whole and synced before this returns); its path. A mail `refused` (the reason)
        goes to failed/ at once, with that error, to be seen by `jobaware mail status`."""
        now = time.time() if now is None else now
        entry = {"id": f"{time.strftime('%Y%m%dT%H%M%S', time.localtime(now))}-{uuid.uuid4().hex[:12]}",
                 "created": now, "kind": kind, "to": to, "subject": subject, "body": body, "request": request or {},
                 "tries": 0, "next_try": now, "errors": []}
        if refused:
            entry["errors"] = [f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))} {refused}"]
        return self._write((self.failed if refused else self.queue) / f"{entry['id']}.json", entry)

    def _write(self, path: Path, entry: dict) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a name of its own, created new (never through a link planted at a guessable name)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o660)
        try:
            with open(handle, "w", encoding="utf-8") as file:
                json.dump(entry, file, ensure_ascii=False)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        return path

    def entries(self, folder: Path | None = None) -> list[tuple[Path, dict]]:
        """The mails in the queue (or `folder`), oldest first; a file that cannot be read is moved to failed/."""
        folder = folder or self.queue
        found = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                entry = _read_entry(path)
                found.append((path, entry))
            except (OSError, ValueError) as exc:
                log.error("spool %s: not a spooled mail (%s); moved to %s", path, exc, self.failed)
                if folder == self.queue:
                    self.failed.mkdir(parents=True, exist_ok=True)
                    os.replace(path, self.failed / path.name)
        return found

    def update(self, path: Path, entry: dict) -> None:
        self._write(path, entry)

    def give_up(self, path: Path, entry: dict) -> None:
        self._write(self.failed / path.name, entry)
        path.unlink()

    def retry_failed(self) -> int:
        """Queue every failed mail again, each with its tries counted from zero; how many."""
        moved = 0
        for path, entry in self.entries(self.failed):
            entry.update(tries=0, next_try=time.time())
            self._write(self.queue / path.name, entry)
            path.unlink()
            moved += 1
        return moved

    @contextlib.contextmanager
    def locked(self, name: str, wait: bool = False) -> Iterator[bool]:
        """The spool's lock `name` (PASS or WORKER): True when held; without `wait`, False at once when another
        process holds it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        # read-only: a lock file another user (slurmctld's MailProg, a digest) created is locked all the same
        handle = os.open(self.folder / name, os.O_RDONLY | os.O_CREAT, 0o660)
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            os.close(handle)


# ---------------------------------------------------------------- sending
def message(entry: dict, settings: Settings) -> EmailMessage:
    """The mail of a spooled entry. Lines up to RFC 5322's 998 characters are not folded: Slurm's subjects stay
    on one line, and the text goes as it is (7bit) rather than quoted-printable."""
    mail = EmailMessage(policy=email.policy.default.clone(max_line_length=998))
    # the host's name only when a mail is built (by the delivery, never in MailProg's path: a resolver that does
    # not answer would hold Slurm's mail program for its time-outs)
    mail["From"] = settings.sender or f"jobaware@{socket.getfqdn()}"
    mail["To"] = ", ".join(address(user, settings.domain) for user in entry["to"])
    mail["Subject"] = " ".join(entry["subject"].splitlines())  # a line break in a job's name would end the header
    mail["Date"] = formatdate(entry["created"], localtime=True)
    mail["Message-ID"] = make_msgid(idstring=entry["id"])
    mail["Auto-Submitted"] = "auto-generated"
    mail.set_content(entry["body"] or "")
    return mail


def send(mail: EmailMessage, settings: Settings) -> None:
    """Hand one mail to the SMTP server; `Undelivered` (permanent on a 5xx answer) when it does not take it."""
    try:
        with smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout) as smtp:
            if settings.starttls:
                smtp.starttls()
            if settings.user:
                smtp.login(settings.user, settings.password or "")
            refused = smtp.send_message(mail)
    except smtplib.SMTPRecipientsRefused as exc:
        codes = [code for code, _ in exc.recipients.values()]
        raise Undelivered(f"recipients refused: {exc.recipients}", permanent=all(c >= 500 for c in codes)) from None
    except smtplib.SMTPResponseException as exc:
        message = exc.smtp_error.decode(errors="replace") if isinstance(exc.smtp_error, bytes) else exc.smtp_error
        raise Undelivered(f"{settings.server} answered {exc.smtp_code} {message}", permanent=exc.smtp_code >= 500) from None
    except (OSError, smtplib.SMTPException) as exc:
        raise Undelivered(f"{settings.server}: {type(exc).__name__}: {exc}") from None
    if refused:
        log.warning("mail %s: some recipients refused: %s", mail["Message-ID"], refused)


@dataclass
class Delivered:
    sent: int = 0
    deferred: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def _attempt(spool: Spool, path: Path, entry: dict, settings: Settings, compose, now: float,
             result: Delivered) -> None:
    """One try of one due mail: compose it if needed, send it, and keep what came of it. A mail that cannot be
    composed or written (a ValueError or TypeError: a spooled request or an address that is not what it must be)
    is given up on at once."""
    try:
        if entry["body"] is None and compose is not None:
            try:
                entry["body"] = compose(entry)
            except NotYet as wait:
                entry["next_try"] = now + wait.seconds
                spool.update(path, entry)
                result.deferred += 1
                return
            except (ValueError, TypeError) as exc:
                raise Undelivered(f"cannot be composed: {exc}", permanent=True) from None
            spool.update(path, entry)
        try:
            mail = message(entry, settings)
        except (ValueError, TypeError) as exc:  # an address with a line break, a field of the wrong type
            raise Undelivered(f"cannot be written as a mail: {exc}", permanent=True) from None
        send(mail, settings)
    except Undelivered as exc:
        entry["tries"] += 1
        entry["errors"] = (entry["errors"] + [f"{time.strftime('%Y-%m-%d %H:%M:%S')} {exc}"])[-TRIES:]
        result.errors.append(str(exc))
        if exc.permanent or entry["tries"] >= TRIES:
            spool.give_up(path, entry)
            result.failed += 1
            log.error("mail %s to %s not sent after %d tries (%s); kept in %s", entry["id"], ", ".join(entry["to"]),
                      entry["tries"], exc, spool.failed)
            return
        entry["next_try"] = now + delay(entry["tries"])
        spool.update(path, entry)
        result.deferred += 1
        log.warning("mail %s to %s: try %d failed (%s); next in %.0f s", entry["id"], ", ".join(entry["to"]),
                    entry["tries"], exc, delay(entry["tries"]))
        return
    path.unlink()
    result.sent += 1
    log.info("mail %s sent to %s: %s", entry["id"], ", ".join(entry["to"]), entry["subject"])


def send_due(spool: Spool, settings: Settings, compose: Callable[[dict], str] | None = None, *, every: bool = False,
             clock: Callable[[], float] = time.time) -> Delivered:
    """One pass over the queue, holding the pass lock (waiting for another pass to end): every mail that is due
    (`every`: every mail, due or not) is tried once."""
    result = Delivered()
    with spool.locked(PASS, wait=True):
        for path, entry in spool.entries():
            if entry["body"] is None and compose is None:
                continue  # its text is not written yet: a pass that cannot write it (a digest's) leaves it be
            if every or entry["next_try"] <= clock():
                _attempt(spool, path, entry, settings, compose, clock(), result)
    return result


def deliver(spool: Spool, settings: Settings, compose: Callable[[dict], str] | None = None, *,
            until: float | None = None, clock: Callable[[], float] = time.time,
            sleep: Callable[[float], None] = time.sleep) -> Delivered | None:
    """A delivery: passes over the queue, waiting between them for the next try, until the queue is empty or its
    next try is after `until` (epoch seconds). One delivery at a time (the worker lock; None when another holds
    it: that one sends these mails too); it sleeps without the pass lock, so `send_due` (`jobaware mail flush`)
    can run meanwhile. After letting the worker lock go it looks once more, so that a mail spooled while it was
    ending is not left behind."""
    result = Delivered()
    while True:
        with spool.locked(WORKER) as alive:
            if not alive:
                return None if not result.sent + result.deferred + result.failed else result
            while True:
                done = send_due(spool, settings, compose, clock=clock)
                result.sent, result.deferred, result.failed = (result.sent + done.sent, result.deferred + done.deferred,
                                                               result.failed + done.failed)
                result.errors += done.errors
                waiting = [entry["next_try"] for _, entry in spool.entries()]
                if not waiting or (until is not None and min(waiting) > until):
                    break
                sleep(max(0.0, min(min(waiting) - clock(), 60.0)))
        later = [entry["next_try"] for _, entry in spool.entries()]
        if not later or (until is not None and min(later) > until):
            return result
