"""Small checks and escapes for text a cluster user or a scheduler controls (job names, ids) and for URIs that may
hold a password: standard library only, so that Slurm's mail program and every log handler can use them at no
cost. Each runs in time linear in its text."""

from __future__ import annotations

import re

HIDDEN = "***"
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:password|passwd|pass|pwd)=)[^\s&#]*", re.IGNORECASE)
_URI_REST = re.compile(r"[^\s\"'<>]*")  # what follows `scheme://` up to the end of the URI


def ascii_digits(text) -> bool:
    """Whether `text` is a string of one or more ASCII digits `0-9`: `str.isdigit` also takes `²`, which `int`
    refuses, and `١٢`, which `int` reads as 12."""
    return isinstance(text, str) and text.isascii() and text.isdigit()


def escaped(text: str) -> str:
    """`text` with every character a terminal or a log reader would act on (C0 and C1 control characters, ESC,
    line and paragraph separators, bidirectional overrides) written as a Python escape, so that whatever it held
    shows as text on one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _hidden(rest: str) -> str:
    """What follows `scheme://` in a URI with its password hidden: the user part's (`user:PASSWORD@`, split as
    URL parsers split it: at the last `@` before the path) and the query's (`?password=PASSWORD`)."""
    netloc = rest[:min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))]
    user, at, host = netloc.rpartition("@")
    if at and ":" in user:
        rest = f"{user.partition(':')[0]}:{HIDDEN}@{host}{rest[len(netloc):]}"
    return _QUERY_PASSWORD.sub(lambda m: m["head"] + HIDDEN, rest)


def redacted(text: str) -> str:
    """`text` with the password of every URI in it written `***` (`redis://user:***@host:6379/0`,
    `rediss://:***@host`, `...?password=***`); the rest as it is."""
    if "://" not in text:
        return text
    parts, done = [], 0
    at = text.find("://")
    while at != -1:
        end = _URI_REST.match(text, at + 3).end()
        parts += [text[done:at + 3], _hidden(text[at + 3:end])]
        done = end
        at = text.find("://", end)
    return "".join(parts) + text[done:]
