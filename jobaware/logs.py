"""The log files jobaware writes: one record, one line. Every handler jobaware sets up formats with `OneLine`, which
escapes control characters (a job name `x\\nFAKE LINE` cannot forge a line, an ESC cannot reach the terminal
that shows the log) and hides URI passwords, in the message, its arguments and any traceback."""

from __future__ import annotations

import logging
from pathlib import Path

from jobaware.text import escaped, redacted

FORMAT = "%(asctime)s %(levelname)s %(message)s"


class OneLine(logging.Formatter):
    """A formatter whose every record is one line: control characters escaped (a traceback's line breaks too, as
    `\\n`), URI passwords written `***`."""

    def format(self, record: logging.LogRecord) -> str:
        return escaped(redacted(super().format(record)))


def file_handler(path: Path, fmt: str = FORMAT, delay: bool = False) -> logging.FileHandler:
    """A handler appending to `path`, formatted by `OneLine`."""
    handler = logging.FileHandler(path, delay=delay)
    handler.setFormatter(OneLine(fmt))
    return handler
