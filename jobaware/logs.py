"""The log files jobaware writes: one record, one line. Every handler jobaware sets up formats with `OneLine`, which
escapes control characters (a job name `x\\nFAKE LINE` cannot forge a line, an ESC cannot reach the terminal
that shows the log) and hides URI passwords, in the message, its arguments and any traceback."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from jobaware.text import escaped, redacted

FORMAT = "%(asctime)s %(levelname)s %(message)s"


class OneLine(logging.Formatter):
    """A formatter whose every record is one line: control characters escaped (a traceback's line breaks too, as
    `\\n`), URI passwords written `***`."""

    def format(self, record: logging.LogRecord) -> str:
        return escaped(redacted(super().format(record)))


class _AppendOnly(logging.FileHandler):
    """A FileHandler that appends only to a regular file at `path` itself: never through a symbolic link planted at
    its name (root's daemons would append to whatever it names), never blocking on a FIFO."""

    def _open(self):
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        descriptor = os.open(self.baseFilename, flags, 0o640)
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise OSError(f"{self.baseFilename}: not a regular file; not written")
        return os.fdopen(descriptor, "a", encoding=self.encoding, errors=self.errors)


def file_handler(path: Path, fmt: str = FORMAT, delay: bool = False) -> logging.FileHandler:
    """A handler appending to the regular file `path` (never through a link), formatted by `OneLine`."""
    handler = _AppendOnly(path, delay=delay)
    handler.setFormatter(OneLine(fmt))
    return handler
