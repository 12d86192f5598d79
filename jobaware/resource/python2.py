"""Rewrite Python 2 source so that the Python 3 parser can build its syntax tree.

Only what Python 3 cannot parse is rewritten, on the token stream, keeping every other character:
`print x` / `print >>f, x` / bare `print` statements, `exec code [in ns]`, `except E, e:`, `raise E, msg`,
back-ticks, `<>`, `10L` and `0777` numbers, `ur''` strings, and tabs in indentation (expanded to 8 columns,
as Python 2 read them). Hand-written rather than `lib2to3`: lib2to3 is deprecated since Python 3.9 and gone
in 3.13, is far slower, and builds a full concrete tree where a few token edits suffice; the result is only
ever parsed, never run.
"""

from __future__ import annotations

import io
import re
import time
import tokenize
from dataclasses import dataclass

_COMPOUND = {"if", "elif", "else", "for", "while", "try", "except", "finally", "with", "def", "class"}
_SKIP = {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
_LEADING_WS = re.compile(r"^[ \t]+", re.MULTILINE)


@dataclass(frozen=True)
class _Edit:
    start: tuple[int, int]
    end: tuple[int, int]
    text: str


def _expand_indentation(text: str) -> str:
    return _LEADING_WS.sub(lambda m: m.group().expandtabs(8), text) if "\t" in text else text


def _statements(tokens: list[tokenize.TokenInfo]) -> list[list[tokenize.TokenInfo]]:
    """Simple statements as token lists (split at NEWLINE, `;` and a compound header's colon)."""
    out, current, depth = [], [], 0
    for token in tokens:
        if token.type in _SKIP or token.type == tokenize.ENDMARKER:
            continue
        if token.type == tokenize.NEWLINE:
            if current:
                out.append(current)
            current, depth = [], 0
            continue
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth = max(depth - 1, 0)
        if depth == 0 and token.type == tokenize.OP and token.string == ";":
            if current:
                out.append(current)
            current = []
            continue
        if (depth == 0 and token.type == tokenize.OP and token.string == ":" and current
                and current[0].string in _COMPOUND and not any(t.string == "lambda" for t in current)):
            out.append(current + [token])
            current = []
            continue
        current.append(token)
    if current:
        out.append(current)
    return out


def _depth0(statement: list[tokenize.TokenInfo], start: int, predicate) -> int | None:
    depth = 0
    for i in range(start, len(statement)):
        token = statement[i]
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif depth == 0 and predicate(token):
            return i
    return None


def _source(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    if start[0] == end[0]:
        return lines[start[0] - 1][start[1] : end[1]]
    parts = [lines[start[0] - 1][start[1] :]] + lines[start[0] : end[0] - 1] + [lines[end[0] - 1][: end[1]]]
    return "".join(parts)


def _statement_edits(statement: list[tokenize.TokenInfo], lines: list[str]) -> list[_Edit]:
    first, last = statement[0], statement[-1]
    if last.string == ":" and first.string in _COMPOUND:
        body_end = len(statement) - 1
    else:
        body_end = len(statement)
    nxt = statement[1] if len(statement) > 1 else None
    is_op = lambda token, text: token is not None and token.type == tokenize.OP and token.string == text  # noqa: E731
    end = statement[body_end - 1].end
    if first.string == "print" and first.type == tokenize.NAME:
        if nxt is None:
            return [_Edit(first.start, first.end, "print()")]
        if nxt.type == tokenize.OP and nxt.string not in (">>",):
            return []  # print(...), print = ..., print.x: already Python 3
        if is_op(nxt, ">>"):
            comma = _depth0(statement, 2, lambda t: is_op(t, ","))
            if comma is None:
                target = _source(lines, statement[2].start, end) if len(statement) > 2 else ""
                return [_Edit(first.start, end, f"print(file={target.strip()})")]
            target = _source(lines, statement[2].start, statement[comma].start)
            rest = _source(lines, statement[comma].end, end) if comma + 1 < len(statement) else ""
            return [_Edit(first.start, end, f"print({rest.strip()}, file={target.strip()})")]
        return [_Edit(first.start, first.end, "print("), _Edit(end, end, ")")]
    if first.string == "exec" and first.type == tokenize.NAME and nxt is not None and nxt.type != tokenize.OP:
        edits = [_Edit(first.start, first.end, "exec("), _Edit(end, end, ")")]
        where = _depth0(statement, 1, lambda t: t.type == tokenize.NAME and t.string == "in")
        if where is not None:
            edits.insert(1, _Edit(statement[where].start, statement[where].end, ","))
        return edits
    if first.string == "raise" and nxt is not None:
        comma = _depth0(statement, 1, lambda t: is_op(t, ","))
        if comma is not None:
            return [_Edit(statement[comma].start, statement[comma].end, "("), _Edit(end, end, ")")]
    if first.string == "except" and last.string == ":":
        comma = _depth0(statement, 1, lambda t: is_op(t, ","))
        if comma is not None and _depth0(statement, comma + 1, lambda t: is_op(t, ",")) is None:
            return [_Edit(statement[comma].start, statement[comma].end, " as")]
    return []


def _token_edits(tokens: list[tokenize.TokenInfo]) -> list[_Edit]:
    edits, backtick_open = [], True
    for i, token in enumerate(tokens):
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        adjacent = after is not None and after.start == token.end
        if token.type == tokenize.ERRORTOKEN and token.string == "`":
            edits.append(_Edit(token.start, token.end, "repr(" if backtick_open else ")"))
            backtick_open = not backtick_open
        elif token.type == tokenize.OP and token.string == "<" and adjacent and after.string == ">":
            edits.append(_Edit(token.start, after.end, "!="))
        elif token.type == tokenize.NUMBER and adjacent and after.type == tokenize.NAME and after.string in ("L", "l"):
            edits.append(_Edit(after.start, after.end, ""))
        elif token.type == tokenize.NUMBER and token.string == "0" and adjacent and after.type == tokenize.NUMBER \
                and after.string.isdigit():
            edits.append(_Edit(token.start, token.end, "0o"))
        elif token.type == tokenize.NAME and token.string.lower() == "ur" and adjacent \
                and after.type == tokenize.STRING:
            edits.append(_Edit(token.start, token.end, "r"))
    return edits


def _apply(lines: list[str], edits: list[_Edit]) -> str:
    kept: list[_Edit] = []
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        if kept and edit.start < kept[-1].end:
            continue  # overlapping rewrite: keep the first
        kept.append(edit)
    for edit in reversed(kept):
        (r1, c1), (r2, c2) = edit.start, edit.end
        head, tail = lines[r1 - 1][:c1], lines[r2 - 1][c2:]
        lines[r1 - 1 : r2] = [head + edit.text + tail]
    return "".join(lines)


def repair(text: str, deadline: float | None = None) -> str | None:
    """The source with its Python 2 constructs rewritten, or None when there was nothing to rewrite (or no time
    left: reading its tokens stops at `deadline`, a time.monotonic())."""
    expanded = _expand_indentation(text)
    tokens = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(expanded).readline):
            tokens.append(token)
            if deadline is not None and len(tokens) % 512 == 0 and time.monotonic() > deadline:
                return None
    except (tokenize.TokenError, SyntaxError, ValueError):
        return expanded if expanded != text else None
    lines = expanded.splitlines(keepends=True)
    edits = _token_edits(tokens)
    for statement in _statements(tokens):
        edits.extend(_statement_edits(statement, lines))
    if not edits:
        return expanded if expanded != text else None
    return _apply(lines, edits)
