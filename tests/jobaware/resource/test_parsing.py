"""Any bytes are input: every script gets a status and features; nothing crashes or hangs."""

import codecs
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobaware.resource.features import extract
from jobaware.resource.parsing import STATUSES, ParseLimits, decode, parse_script

LIMITS = ParseLimits(seconds=2.0)


def analyse(data, name=""):
    started = time.monotonic()
    features = extract(parse_script(data, name, LIMITS))
    assert time.monotonic() - started < 4 * LIMITS.seconds
    assert features.status in STATUSES
    assert all(math.isfinite(v) for v in features.rich.values()) and all(v >= 0 for v in features.seed.values())
    return features


def test_python3_tree():
    f = analyse(b"import numpy as np\nfor i in range(3):\n    np.zeros(10)\n")
    assert f.status == "ok" and f.seed["loops"] == 1 and f.rich["api:alloc"] == 1


def test_python2_is_repaired_and_read_as_a_tree():
    f = analyse(b"import urllib2\nfor u in urls:\n    print u, urllib2.urlopen(u).read()\n")
    assert f.status == "py2_repaired" and f.seed["loops"] == 1 and f.rich["api:http"] >= 1
    assert "SyntaxError" in f.detail


def test_syntax_errors_fall_back_to_tokens_with_the_features_that_can_be_read():
    f = analyse(b"import socket\ns = socket.socket()\nfor i in range(10):\n    s.recv(1024\nx = = 1\n")
    assert f.status == "tokens_only" and "SyntaxError line" in f.detail
    assert f.rich["import:socket"] == 1 and f.rich["api:socket"] >= 1 and f.seed["loops"] == 1
    assert f.tokens and "mod:socket" in f.tokens


@pytest.mark.parametrize("source", [
    "-" * 100_000 + "1",          # MemoryError in the parser
    "a" + "+a" * 100_000,         # RecursionError during AST construction
    "f" + "()" * 100_000,
    "x" + "[0]" * 100_000,
    "lambda: " * 40_000 + "1",
])
def test_pathological_nesting_is_too_deep_not_a_crash(source):
    f = analyse(source.encode())
    assert f.status in ("too_deep", "too_large") and f.complete is not None
    assert f.seed["fcalls"] >= 0


def test_nesting_the_parser_refuses_outright():
    assert analyse(b"(" * 30_000 + b")" * 30_000).status == "tokens_only"  # within max_parse_bytes
    deep = "".join(" " * i + "if x:\n" for i in range(200)) + " " * 200 + "pass\n"
    assert analyse(deep.encode()).status == "tokens_only"


def test_large_scripts_are_bounded_in_size_and_time():
    data = b"x = [i for i in range(10)]\n" * 40_000  # ~1 MB
    started = time.monotonic()
    f = extract(parse_script(data, "", ParseLimits(max_parse_bytes=64 * 1024)))
    assert f.status == "too_large" and "max_parse_bytes" in f.detail and time.monotonic() - started < 10
    assert f.seed["asmts"] > 1000  # the token estimate still counts


def test_time_limit_marks_the_result_incomplete():
    data = ("def f():\n" + "    x = y\n" * 30_000).encode()
    f = extract(parse_script(data, "", ParseLimits(seconds=0.01, max_parse_bytes=4 * 1024 * 1024)))
    assert f.status in ("ok", "tokens_only") and not f.complete  # the tree walk, or the tree itself, cut short
    late = extract(parse_script(data, "", ParseLimits(max_parse_bytes=4 * 1024 * 1024), deadline=time.monotonic() - 1))
    assert late.status == "tokens_only" and late.detail == "out of time before parsing" and not late.complete


@pytest.mark.parametrize("data, status", [
    (b"", "empty"), (b"   \n\t\n", "empty"), (b"# just a comment\n", "empty"),
    (b"\x00\x01\x02ELF\x00\x00", "binary"), (bytes(range(256)) * 4, "binary"),
])
def test_empty_and_binary(data, status):
    assert analyse(data).status == status


def test_encodings():
    declared = b"# -*- coding: latin-1 -*-\ns = '\xe9'\n"
    assert decode(declared) == (declared.decode("latin-1"), "iso-8859-1", False)
    text, encoding, errors = decode(codecs.BOM_UTF16_LE + "x = 1\n".encode("utf-16-le"))
    assert (text.lstrip("\ufeff"), encoding, errors) == ("x = 1\n", "utf-16", False)
    f = analyse(b"# caf\xe9 (latin-1, no coding line)\nimport os\nos.listdir('.')\n")
    assert f.status == "ok" and f.rich["decode_errors"] == 1 and f.rich["api:file_io"] == 1
    assert analyse(b"# -*- coding: no-such-codec -*-\nx = 1\n").status == "ok"


def test_a_multibyte_character_cut_by_the_size_limit_is_not_a_decoding_error():
    data = ("x = 'é'\n" * 200).encode()
    parsed = parse_script(data, "", ParseLimits(max_token_bytes=1024 + 1, max_parse_bytes=1024))
    assert not parsed.decode_errors


def test_str_input_with_lone_surrogates():
    f = analyse("x = '\ud800'\nprint(x)\n")
    assert f.status in ("ok", "tokens_only")


def test_batch_scripts_are_read_as_shell_with_their_python():
    f = analyse(b"#!/bin/bash\n#SBATCH --mem=500G\npython - <<EOF\nimport h5py\nh5py.File('a.h5')\nEOF\n")
    assert f.kind == "shell" and f.status == "shell"
    assert f.rich["sbatch:mem_gb_log2"] > 8 and f.rich["api:hdf_netcdf"] == 1
    assert analyse(b"echo hi\n", "run.sh").kind == "shell"
    assert analyse(b"#!/usr/bin/env python3\nprint(1)\n").kind == "python"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000))
def test_any_bytes(data):
    analyse(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(list("()[]{}:'\"\\#\n\t =+-*`<>@.,;")),
               max_size=2000))
def test_any_text(text):
    analyse(text)


_PIECES = ["def f(x):\n", "    ", "for i in range(n):\n", "while True:\n", "print ", "return x\n", "'''", '"',
           "import numpy as np\n", "np.zeros((10, 10))\n", "#SBATCH -N 2\n", "\\\n", "(", ")", "[", "]", ":",
           "lambda: ", "x = ", "yield\n", "break\n", "\t", "\r\n", "async def g():\n", "await h()\n", "\x00"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=200))
def test_code_like_fragments(pieces):
    analyse("".join(pieces).encode("utf-8"))


@pytest.mark.parametrize("source", [
    "x = 1" + "0" * 1000 + "\nprint(x)\n",
    "import numpy as np\nnp.zeros((" + "9" * 500 + ", 9))\n",
    "range(" + "9" * 500 + ")\n",
    "x = 1" + "0" * 1000 + "\nprint(x\n",
    "x = 1e999\n",
    "#!/bin/bash\n#SBATCH --nodes=" + "9" * 500 + "\n#SBATCH --mem=" + "9" * 500 + "G\n#SBATCH -t " + "9" * 500
    + "-1\nsrun -n " + "9" * 500 + " ./x\n",
])
def test_huge_numbers_stay_finite(source):
    analyse(source.encode())


_NUMBERS = st.one_of(st.integers(min_value=-(10**600), max_value=10**600).map(str),
                     st.floats(allow_nan=True, allow_infinity=True).map(repr),
                     st.text("0123456789.eE+-xXj_", max_size=40))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_NUMBERS, min_size=1, max_size=6), st.sampled_from(["python", "batch"]))
def test_any_numbers_in_code_and_directives(numbers, kind):
    if kind == "python":
        source = "import numpy as np\n" + "".join(f"np.zeros(({n}, {n}))\nrange({n})\nx = {n}\n" for n in numbers)
    else:
        directives = "".join(f"#SBATCH --mem={n}G\n#SBATCH -N {n}\n#SBATCH -t {n}:{n}\n" for n in numbers)
        source = f"#!/bin/bash\n{directives}srun -n {numbers[0]} python - <<E\nrange({numbers[0]})\nE\n"
    analyse(source.encode())
