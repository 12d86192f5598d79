"""Read any script as data: decode it, decide its kind, build its syntax tree or fall back to its tokens.

Scripts are parsed, never executed or imported. Every script gets a result and one parse status:

| status | meaning |
|---|---|
| `ok` | Python 3 syntax tree |
| `py2_repaired` | syntax tree after rewriting Python 2 statements (`python2.repair`) |
| `tokens_only` | syntax error: features come from the token stream |
| `too_large` | above `max_parse_bytes`: features from the tokens of the first `max_token_bytes` |
| `too_deep` | the parser gave up (RecursionError / MemoryError on pathological nesting): tokens only |
| `binary` | not text (NUL bytes or more than 10 % control characters): size only |
| `empty` | no code (empty, blank or only comments) |
| `shell` | a batch / shell script (`shell.parse_shell`), with any Python it embeds parsed as Python |

Decoding: a UTF-8/16/32 byte-order mark wins, then a PEP 263 `coding:` line, else UTF-8; bytes the codec
cannot decode are replaced (U+FFFD) and `decode_errors` is set. Time and size are bounded: the syntax tree
is built only for at most `max_parse_bytes` (the parser's time and memory grow with the size, and building the
tree cannot be cut short: 256 KiB of dense code took 1.1 s on a busy 2-core machine, 64 KiB a quarter of that),
tokens are read from at most `max_token_bytes`, and every Python-level loop stops at
`seconds` (the result is then marked incomplete).
"""

from __future__ import annotations

import ast
import codecs
import re
import time
import tokenize
import warnings
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from jobaware.resource import python2
from jobaware.resource.lexer import Token, python_tokens
from jobaware.resource.shell import ShellScript, looks_like_batch, parse_shell

STATUSES = ("ok", "py2_repaired", "tokens_only", "too_large", "too_deep", "binary", "empty", "shell")
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_CODE_LINE = re.compile(r"^[ \t]*[^\s#]", re.MULTILINE)


class ParseLimits(BaseModel):
    """Bounds on the work spent reading one script."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    max_parse_bytes: int = Field(64 * 1024, ge=1024, le=4 * 1024 * 1024)
    max_token_bytes: int = Field(2 * 1024 * 1024, ge=1024, le=16 * 1024 * 1024)
    max_tokens: int = Field(400_000, ge=1_000, le=4_000_000)
    seconds: float = Field(5.0, gt=0, le=60)
    max_embedded: int = Field(16, ge=0, le=256)


@dataclass
class ParsedScript:
    kind: str  # "python" or "shell"
    status: str
    detail: str
    encoding: str
    decode_errors: bool
    n_bytes: int
    text: str
    tree: ast.Module | None = None
    tokens: list[Token] | None = None
    shell: ShellScript | None = None
    embedded: list[ParsedScript] = field(default_factory=list)
    complete: bool = True
    deadline: float = 0.0


def decode(data: bytes) -> tuple[str, str, bool]:
    """Text, the encoding used and whether any byte had to be replaced."""
    encoding = "utf-8"
    for bom, name in _BOMS:
        if data.startswith(bom):
            encoding = name
            break
    else:
        try:
            encoding = tokenize.detect_encoding(iter(data.splitlines(keepends=True)[:2]).__next__)[0]
            codecs.lookup(encoding)
        except (SyntaxError, LookupError, StopIteration):
            encoding = "utf-8"
    try:
        return data.decode(encoding), encoding, False
    except (UnicodeDecodeError, LookupError):
        return data.decode(encoding, errors="replace"), encoding, True


def _is_binary(text: str) -> bool:
    head = text[:8192]
    return "\x00" in head or (len(head) > 0 and len(_CONTROL.findall(head)) > 0.1 * len(head))


def parse_script(data: bytes | str, name: str = "", limits: ParseLimits | None = None,
                 deadline: float | None = None) -> ParsedScript:
    """Parse one script (bytes or already-decoded text); never raises on any content."""
    limits = limits or ParseLimits()
    deadline = deadline if deadline is not None else time.monotonic() + limits.seconds
    if isinstance(data, str):
        text, encoding, errors = data, "utf-8", False
        n_bytes = len(data.encode("utf-8", errors="surrogatepass"))
    else:
        n_bytes = len(data)
        chunk = data[: limits.max_token_bytes]
        text, encoding, errors = decode(chunk)
        for cut in (1, 2, 3):  # a cut through a multi-byte character is not a decoding error
            if not errors or len(chunk) == n_bytes:
                break
            shorter = decode(chunk[:-cut])
            if not shorter[2]:
                text, encoding, errors = shorter
    if len(text) > limits.max_token_bytes:
        text = text[: limits.max_token_bytes]
    text = text.lstrip("\ufeff")
    base = dict(encoding=encoding, decode_errors=errors, n_bytes=n_bytes, text=text, deadline=deadline)
    if _is_binary(text):
        return ParsedScript("python", "binary", "not text: NUL bytes or control characters", **base)
    if not _CODE_LINE.search(text):
        return ParsedScript("python", "empty", "no code", tree=ast.Module(body=[], type_ignores=[]), tokens=[],
                            **base)
    if looks_like_batch(text) or re.search(r"\.(sh|bash|slurm|sbatch|pbs|job)(\.txt)?$", name):
        return _parse_batch(text, base, limits, deadline)
    return _parse_python(text, base, limits, deadline, n_bytes)


def _parse_python(text: str, base: dict, limits: ParseLimits, deadline: float, n_bytes: int) -> ParsedScript:
    if n_bytes > limits.max_parse_bytes:
        return _tokens_only(text, "too_large", f"{n_bytes:,} bytes > max_parse_bytes {limits.max_parse_bytes:,}",
                            base, limits, deadline)
    if time.monotonic() > deadline:  # building the tree cannot be cut short: with no time left, tokens only
        return _tokens_only(text, "tokens_only", "out of time before parsing", base, limits, deadline)
    tree, error = _ast(text)
    if tree is not None:
        return ParsedScript("python", "ok", "", tree=tree, **base)
    if error.startswith(("RecursionError", "MemoryError")):
        return _tokens_only(text, "too_deep", error, base, limits, deadline)
    repaired = python2.repair(text, deadline) if not error.startswith("ValueError") else None
    if repaired is not None:
        tree, _ = _ast(repaired)
        if tree is not None:
            return ParsedScript("python", "py2_repaired", error, tree=tree, **{**base, "text": repaired})
    return _tokens_only(text, "tokens_only", error, base, limits, deadline)


def _ast(text: str) -> tuple[ast.Module | None, str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text), ""
    except SyntaxError as e:
        return None, f"{type(e).__name__} line {e.lineno}: {e.msg}"
    except (RecursionError, MemoryError) as e:
        return None, f"{type(e).__name__}: nesting too deep for the parser"
    except ValueError as e:
        return None, f"ValueError: {e}"


def _tokens_only(text: str, status: str, detail: str, base: dict, limits: ParseLimits,
                 deadline: float) -> ParsedScript:
    read = python_tokens(text, limits.max_tokens, deadline)
    return ParsedScript("python", status, detail, tokens=read.tokens, complete=read.complete, **base)


def _parse_batch(text: str, base: dict, limits: ParseLimits, deadline: float) -> ParsedScript:
    script = parse_shell(text, deadline)
    embedded = [
        _parse_python(code, {**base, "text": code, "n_bytes": len(code.encode("utf-8", "surrogatepass"))},
                      limits, deadline, len(code.encode("utf-8", "surrogatepass")))
        for _, code in script.embedded_python[: limits.max_embedded]
    ]
    detail = f"{script.scheduler or 'shell'}: {len(script.directives)} directive(s), {len(script.commands)} command(s)"
    return ParsedScript("shell", "shell", detail, shell=script, embedded=embedded,
                        complete=script.complete and all(e.complete for e in embedded), **base)
