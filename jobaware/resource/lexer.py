"""Token-level reading of Python source for scripts whose syntax tree cannot be built.

`python_tokens` uses the standard `tokenize` module; where it stops (an unterminated string or bracket, a
bad dedent, NUL bytes) the rest of the text is read by `scan_tokens`, a line-by-line regular-expression
scanner that never backtracks across lines, so its time is linear in the text. Both stop at `max_tokens`
and at the `deadline` (a `time.monotonic()` value) and say so.
"""

from __future__ import annotations

import io
import re
import time
import tokenize
from dataclasses import dataclass

NAME, NUMBER, STRING, OP, NEWLINE = "NAME", "NUMBER", "STRING", "OP", "NEWLINE"

_LINE_TOKEN = re.compile(
    r"""
    (?P<comment>\#.*)
  | (?P<string>[rRbBuUfF]{0,2}(?:'[^'\\\n]*(?:\\.[^'\\\n]*)*'?|"[^"\\\n]*(?:\\.[^"\\\n]*)*"?))
  | (?P<number>(?:0[xXoObB][0-9a-fA-F_]+|\d[\d_]*\.?[\d_]*(?:[eE][+-]?\d+)?|\.\d[\d_]*(?:[eE][+-]?\d+)?)[jJlL]?)
  | (?P<name>[^\W\d]\w*)
  | (?P<op>\*\*=?|//=?|>>=?|<<=?|<>|!=|==|<=|>=|->|:=|[-+*/%&|^@]=|[-+*/%&|^~<>()\[\]{},:;.=@`!])
  | (?P<space>\s+)
  | (?P<other>.)
    """,
    re.VERBOSE,
)
_TRIPLE_START = re.compile(r"""[rRbBuUfF]{0,2}('''|\"\"\")""")


@dataclass(frozen=True)
class Token:
    kind: str  # NAME, NUMBER, STRING, OP, NEWLINE
    text: str
    line: int


@dataclass
class TokenRead:
    tokens: list[Token]
    complete: bool  # False when max_tokens or the deadline cut the read short


def scan_tokens(lines: list[str], first_line: int, max_tokens: int, deadline: float,
                tokens: list[Token] | None = None) -> bool:
    """Scan `lines` (numbered from `first_line`) into `tokens`; return False if cut short."""
    tokens = [] if tokens is None else tokens
    in_triple: str | None = None
    for number, line in enumerate(lines, start=first_line):
        if time.monotonic() > deadline or len(tokens) >= max_tokens:
            return False
        position = 0
        if in_triple:
            end = line.find(in_triple)
            if end < 0:
                continue
            position, in_triple = end + 3, None
        while position < len(line):
            triple = _TRIPLE_START.match(line, position)
            if triple:
                close = line.find(triple.group(1), triple.end())
                if close < 0:
                    tokens.append(Token(STRING, line[position:].rstrip("\n"), number))
                    in_triple = triple.group(1)
                    break
                tokens.append(Token(STRING, line[position : close + 3], number))
                position = close + 3
                continue
            match = _LINE_TOKEN.match(line, position)
            kind = match.lastgroup
            if kind == "name":
                tokens.append(Token(NAME, match.group(), number))
            elif kind == "number":
                tokens.append(Token(NUMBER, match.group(), number))
            elif kind == "string":
                tokens.append(Token(STRING, match.group(), number))
            elif kind == "op":
                tokens.append(Token(OP, match.group(), number))
            position = match.end()
        if in_triple is None and tokens and tokens[-1].kind != NEWLINE and not line.rstrip().endswith("\\"):
            tokens.append(Token(NEWLINE, "\n", number))
        if len(tokens) >= max_tokens:
            del tokens[max_tokens:]
            return False
    return True


_KEEP = {tokenize.NAME: NAME, tokenize.NUMBER: NUMBER, tokenize.STRING: STRING, tokenize.OP: OP,
         tokenize.NEWLINE: NEWLINE}


def python_tokens(text: str, max_tokens: int, deadline: float) -> TokenRead:
    """Tokens of Python source: `tokenize` while it can, the line scanner for the rest."""
    tokens: list[Token] = []
    lines = text.splitlines(keepends=True)
    if "\x00" in text:
        complete = scan_tokens(lines, 1, max_tokens, deadline, tokens)
        return TokenRead(tokens, complete)
    reader = io.StringIO(text).readline
    done_line = 0
    try:
        for token in tokenize.generate_tokens(reader):
            kind = _KEEP.get(token.type)
            if token.type == tokenize.ERRORTOKEN and token.string.strip():
                kind = OP
            if kind:
                tokens.append(Token(kind, token.string, token.start[0]))
            done_line = token.end[0] if token.type == tokenize.NEWLINE else done_line
            if len(tokens) >= max_tokens or (len(tokens) % 256 == 0 and time.monotonic() > deadline):
                return TokenRead(tokens[:max_tokens], False)
        return TokenRead(tokens, True)
    except (tokenize.TokenError, SyntaxError, ValueError):
        # keep what tokenize read up to the last complete logical line; scan the rest
        del tokens[_after_line(tokens, done_line):]
        complete = scan_tokens(lines[done_line:], done_line + 1, max_tokens, deadline, tokens)
        return TokenRead(tokens, complete)


def _after_line(tokens: list[Token], line: int) -> int:
    for i in range(len(tokens) - 1, -1, -1):
        if tokens[i].line <= line:
            return i + 1
    return 0
