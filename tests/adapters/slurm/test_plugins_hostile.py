"""The Slurm plugins stay linear in every string a user controls (issue 50: a 64 KB comment held slurmctld for 70 s):
each hook of the rendered Lua plugins under real lua5.1 and the compiled filter (built with AddressSanitizer and
UndefinedBehaviorSanitizer, run outside Slurm by cli_filter_harness.c) are fed 64 KB hostile strings in every field
they read, in the job request and in the verdict cache, and must finish each call within a CPU-time bound far above
their cost (about 0.1 ms) and far below what the backtracking patterns took (seconds to minutes), with the right
answer. The fuzz run (`make fuzz`) feeds the compiled filter generated options and user files."""

import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from jobaware.adapters.slurm.plugins import write_plugins
from jobaware.adapters.slurm.verdicts import Shape, Verdict, users_folder, write_cache
from tests.fuzzing import examples

LUA = shutil.which("lua5.1")
CC = shutil.which("gcc") or shutil.which("cc")
HERE = Path(__file__).parent
DRIVER = HERE / "fake_slurm.lua"
SOURCE = HERE.parents[2] / "jobaware" / "adapters" / "slurm" / "c" / "cli_filter_jobaware.c"
BOUND_S = 1.0  # CPU seconds a call may take; the backtracking patterns took 14 s on 64,000 spaces

pytestmark = pytest.mark.skipif(LUA is None and not os.environ.get("JOBAWARE_REQUIRE_SLURM"),
                                reason="lua5.1 is not installed here; apt-get install lua5.1")

N = 64_000
HOSTILE = {
    "spaces then a verdict": " " * N + "x jobaware: ",
    "bars then a verdict": "|" * N + "x jobaware: ",
    "spaces and bars": " |" * (N // 2) + "x jobaware: old",
    "percents": "%" * N,
    "digits": "9" * N,
    "colons and digits": ":1" * (N // 2) + "x",
    "brackets": "[" * N + "{cpus}",
    "braces": ("{" + "a" * 15) * (N // 16),
    "commas": ",gpu:" * (N // 5),
    "mixed": "".join(random.Random(50).choice(" |%9:[]{},gpux.-") for _ in range(N)),
}
ADVICE = "ask for more --time[ than the {time_minutes} minutes asked] ({cpus} CPUs)"


def verdict(user="ana", account="", comment="failure risk 70%", advice=ADVICE, minutes=60):
    return Verdict(user=user, account=account, partition="debug", comment=comment, advice=advice, n_similar=5,
                   shape=Shape(time_minutes=minutes, nodes=1, cpus=4, mem_mib=4000, gpus=0))


@pytest.fixture
def plugins(tmp_path) -> Path:
    """Both Lua plugins and a cache with one verdict for ana (and one for bob, with a field of each kind hostile)."""
    write_plugins(tmp_path, cache=str(tmp_path / "verdicts.tsv"), stale_after=600)
    write_cache(tmp_path / "verdicts.tsv", [verdict()], default_partition="debug")
    return tmp_path


def lua(folder: Path, plugin: str, commands: list[str], user: str = "ana") -> list[tuple[list[str], float]]:
    """Each command's answer lines and CPU seconds, run by fake_slurm.lua in one lua5.1; what it wrote on stderr (the
    advice) is in LAST_STDERR."""
    script = folder / "commands.txt"
    script.write_text("".join(f"timed\t{c}\n" for c in commands))
    done = subprocess.run([LUA or "lua5.1", str(DRIVER), str(folder / plugin), str(script)], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "USER": user, "XDG_RUNTIME_DIR": str(folder)})
    assert done.returncode == 0, done.stderr[-2000:]
    LAST_STDERR[:] = [done.stderr]
    out, lines = [], []
    for answer in done.stdout.splitlines():
        if answer.startswith("cpu "):
            out.append((lines, float(answer[4:])))
            lines = []
        else:
            lines.append(answer)
    assert len(out) == len(commands)
    return out


LAST_STDERR = [""]


def fast(results: list[tuple[list[str], float]], what: str) -> None:
    slow = [f"{what} {i}: {cpu:.2f} s" for i, (_, cpu) in enumerate(results) if cpu > BOUND_S]
    assert not slow, slow


SHAPE = "time_limit=60\tmin_cpus=4\tmin_nodes=1\tmin_mem_per_node=4000"
VERDICT = "jobaware: failure risk 70%"


@pytest.mark.parametrize("name", HOSTILE)
def test_job_submit_is_linear_in_every_string_of_the_request(plugins, name):
    """A hostile comment longer than Slurm's 1,024 bytes is left as it is (slurmctld refuses the job next), as is
    a request naming a longer partition, account, user or TRES string; the ordinary job after them gets its verdict."""
    text = HOSTILE[name]
    commands = [f"submit\tuser_name=ana\tpartition=debug\t{SHAPE}\tcomment={text}"]
    commands += [f"submit\tuser_name=ana\tpartition=debug\t{SHAPE}\t{field}={text}"
                 for field in ("partition", "account", "user_name", "tres_per_node", "tres_per_job", "tres_per_task")]
    commands += [f"submit\tuser_name=ana\t{SHAPE}\tpartition={text}", f"submit\tuser_name={text}\t{SHAPE}",
                 f"submit\tuser_name=ana\tpartition=debug\t{SHAPE}\tcomment=mine"]
    results = lua(plugins, "job_submit.lua", commands)
    fast(results, name)
    answers = [lines[-1] for lines, _ in results]
    assert answers[0] == f"rc=0 comment={text} admin_comment=nil"
    assert results[0][0][0].startswith("log: jobaware: job_submit no verdict: comment over Slurm's 1024 bytes ")
    assert all(a == "rc=0 comment=nil admin_comment=nil" for a in answers[1:-1]), [a[:80] for a in answers]
    assert answers[-1].startswith(f"rc=0 comment=mine | {VERDICT}")


@pytest.mark.parametrize("name", HOSTILE)
def test_a_users_text_within_the_limit_is_kept_and_the_verdict_merged(plugins, name):
    """The user's own text up to 1,024 bytes (hostile, with an earlier verdict in it) is kept whole, its trailing
    spaces and bars before the earlier verdict dropped; the new verdict follows when it fits within 1,024 bytes, and
    is left out when it does not (the user's text kept, the earlier verdict gone), in a submission and a modify."""
    own = HOSTILE[name][:600].rstrip(" |\t") or "x"
    room, crowded = own + " |  | jobaware: old", own + "y" * (1024 - len(own) - 20) + " | jobaware: old"
    results = lua(plugins, "job_submit.lua", [
        f"submit\tuser_name=ana\tpartition=debug\t{SHAPE}\tcomment={room}",
        f"submit\tuser_name=ana\tpartition=debug\t{SHAPE}\tcomment={crowded}",
        f"modify\ttime_limit=60\t||\tuser_name=ana\tpartition=debug\t{SHAPE}\tcomment={room}",
        f"modify\ttime_limit=60\t||\tuser_name=ana\tpartition=debug\t{SHAPE}\tcomment={HOSTILE[name]}"])
    fast(results, name)
    answers = [lines[-1] for lines, _ in results]
    assert answers[0] == f"rc=0 comment={own} | {VERDICT} admin_comment=nil"
    assert answers[1] == f"rc=0 comment={crowded.split(' | jobaware: ')[0]} admin_comment=nil"
    assert "no verdict: no room beside the" in results[1][0][0]
    assert answers[2] == f"rc=0 comment={own} | {VERDICT}"
    assert answers[3] == "rc=0 comment=nil"  # a record's comment over the limit: left as it is


def test_the_admin_comment_field_is_capped_alike(tmp_path):
    write_plugins(tmp_path, cache=str(tmp_path / "verdicts.tsv"), field="admin_comment")
    write_cache(tmp_path / "verdicts.tsv", [verdict()], default_partition="debug")
    text = HOSTILE["spaces then a verdict"]
    results = lua(tmp_path, "job_submit.lua", [
        f"submit\tuser_name=ana\tpartition=debug\t{SHAPE}\tadmin_comment={text}",
        f"modify\ttime_limit=60\t||\tuser_name=ana\tpartition=debug\t{SHAPE}\tadmin_comment={text}",
        f"submit\tuser_name=ana\tpartition=debug\t{SHAPE}\tcomment={text}"])
    fast(results, "admin_comment")
    assert results[0][0][-1] == f"rc=0 comment=nil admin_comment={text}"
    assert results[1][0][-1] == "rc=0 comment=nil"
    assert results[2][0][-1] == f"rc=0 comment={text} admin_comment={VERDICT}"  # the user's comment is not read


OPTIONS = ["nodes", "ntasks", "ntasks-per-node", "cpus-per-task", "mem", "mem-per-cpu", "gres", "gpus-per-node",
           "gpus", "partition", "account"]


@pytest.mark.parametrize("name", HOSTILE)
def test_cli_filter_is_linear_in_every_option_and_the_user_name(plugins, name):
    """An option longer than Slurm's 1,024 bytes means no advice; a hostile $USER finds no file; the ordinary
    request after them is advised."""
    text = HOSTILE[name]
    results = lua(plugins, "cli_filter.lua", [f"advise\ttype=sbatch\ttime=60\t{option}={text}" for option in OPTIONS])
    results += lua(plugins, "cli_filter.lua", ["advise\ttype=sbatch\ttime=60"], user=text)
    fast(results, name)
    assert all(lines == ["rc=0"] for lines, _ in results), [r[0] for r in results]
    assert LAST_STDERR == [""]
    [(lines, _)] = lua(plugins, "cli_filter.lua", ["advise\ttype=sbatch\ttime=60\tmem=4000"])
    assert lines == ["rc=0"] and LAST_STDERR == ["jobaware: ask for more --time than the 60 minutes asked (1 CPUs)\n"]


FILLED = {"brackets": "[" * N + "4", "braces": HOSTILE["braces"]}
GPUS = {"commas": str(N // 5), "colons and digits": "0", "percents": "0"}


@pytest.mark.parametrize("name", HOSTILE)
def test_fill_and_gpus_are_linear(plugins, name):
    """The advice filler and the TRES reader over 64 KB (the cache and Slurm cap what reaches them far lower)."""
    text = HOSTILE[name]
    results = lua(plugins, "cli_filter.lua", [f"fill\t{text}", f"gpus\t{text}", f"fill\t[{text}]{{cpus}}"])
    fast(results, name)
    if name in FILLED:
        assert results[0][0] == [f"filled={FILLED[name]}"]
    if name in GPUS:
        assert results[1][0] == [f"gpus={GPUS[name]}"]


# the advice filler as it was, with Lua's own balanced match ("%b[]"): the reference for the linear one
REFERENCE_FILL = r"""
local function value(name)
    local v = ({time_minutes = 60, cpus = 4})[name]
    if v == nil then return nil end
    return string.format("%d", math.floor(v + 0.5))
end
for text in io.lines() do
    text = string.gsub(text, "%b[]", function(words)
        local missing = false
        local filled = string.gsub(string.sub(words, 2, -2), "{([%w_]+)}", function(name)
            local v = value(name)
            if v == nil then missing = true end
            return v or ""
        end)
        if missing then return "" end
        return filled
    end)
    print("filled=" .. string.gsub(text, "{([%w_]+)}", function(name) return value(name) or "?" end))
end
"""


def test_the_linear_filler_fills_in_what_luas_balanced_match_did(plugins):
    tokens = ["[", "]", "{", "}", "{cpus}", "{time_minutes}", "{nodes}", "x", " ", "_", "%", "[["]
    rng = random.Random(7)
    texts = ["".join(rng.choice(tokens) for _ in range(rng.randint(1, 16))) for _ in range(2000)]
    reference = subprocess.run([LUA or "lua5.1", "-e", REFERENCE_FILL], input="\n".join(texts) + "\n",
                               capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
    results = lua(plugins, "cli_filter.lua", [f"fill\t{t}" for t in texts])
    assert [lines[-1] for lines, _ in results] == reference


def hostile_user_file(cache: Path, text: str) -> bytes:
    """Rewrites ana's file with lines whose fields in turn are `text`, on both sides of the good line (and a line of
    another shape whose advice is a run of brackets within its cap); returns a file whose header line is `text`."""
    mine = users_folder(cache) / "ana.tsv"
    header, good = mine.read_text().split("\n")[:2]
    fields = good.split("\t")
    bad = ["\t".join(fields[:i] + [text] + fields[i + 1:]) for i in range(len(fields))]
    brackets = "\t".join(fields[:3] + ["9"] + fields[4:11] + ["[" * 3990 + "{cpus}"])
    lines = [*bad, brackets, good, *bad]
    head = header.split("\t")
    head[6] = str(len(lines))
    mine.unlink()
    mine.write_text("\n".join(["\t".join(head), *lines, f"end\t{len(lines)}", ""]))
    return "\n".join([text, good, "end\t1", ""]).encode()


@pytest.mark.parametrize("name", HOSTILE)
def test_the_cache_readers_are_linear_in_every_field(plugins, name):
    """A user file whose lines carry the hostile string in each field in turn: those lines are skipped (each
    field is capped at what verdicts.py writes), the good one serves, in each plugin; a header line of 64 KB is no
    header."""
    cache = plugins / "verdicts.tsv"
    long_header = hostile_user_file(cache, HOSTILE[name])
    results = lua(plugins, "job_submit.lua", [f"submit\tuser_name=ana\tpartition=debug\t{SHAPE}"])
    results += lua(plugins, "cli_filter.lua", ["advise\ttype=sbatch\ttime=60\tmem=4000"])
    fast(results, name)
    assert results[0][0][0] == f"info: jobaware: {cache}: skipped 24 malformed verdict lines of user ana"
    assert results[0][0][-1] == f"rc=0 comment={VERDICT} admin_comment=nil"
    (users_folder(cache) / "ana.tsv").unlink()
    (users_folder(cache) / "ana.tsv").write_bytes(long_header)
    for header_file in (cache, users_folder(cache) / "#header.tsv"):
        header_file.write_bytes(long_header)
    results = lua(plugins, "job_submit.lua", [f"submit\tuser_name=ana\tpartition=debug\t{SHAPE}"])
    results += lua(plugins, "cli_filter.lua", ["advise\ttype=sbatch\ttime=60"])
    fast(results, name)
    for lines, _ in results:
        assert lines[0] == f"info: jobaware: verdict cache {cache} corrupt (not a version 2 jobaware verdict cache); " \
                           "no verdicts until it is fixed (failing open)"


# ---- the compiled filter, with AddressSanitizer and UndefinedBehaviorSanitizer

@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> tuple[Path, Path]:
    """cli_filter_harness built with the compiled filter for a cache in a fresh folder; (binary, cache)."""
    if CC is None:
        pytest.skip("no C compiler here")
    folder = tmp_path_factory.mktemp("harness")
    cache = folder / "verdicts.tsv"
    binary = folder / "cli_filter_harness"
    done = subprocess.run([CC, "-std=gnu11", "-g", "-O1", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                           "-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Werror",
                           f'-DJOBAWARE_CACHE_PATH="{cache}"', "-DJOBAWARE_STALE_AFTER=600",
                           "-DJOBAWARE_SLURM_VERSION=0x160508", "-o", str(binary), str(HERE / "cli_filter_harness.c"),
                           str(SOURCE), "-lm"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return binary, cache


def compiled(binary: Path, cases: list[tuple[dict[str, str], bytes]], user: str = "ana",
             timeout: float = 600) -> list[tuple[str, float]]:
    """What the compiled filter printed on stderr for each case, and its CPU seconds."""
    data = b"".join(f"case {len(options)} {len(file)}\n".encode()
                    + b"".join(f"{k}={v}\n".encode() for k, v in options.items()) + file for options, file in cases)
    done = subprocess.run([str(binary)], input=data, capture_output=True, timeout=timeout, cwd=binary.parent,
                          env={**os.environ, "USER": user, "XDG_RUNTIME_DIR": tempfile.mkdtemp(dir=binary.parent),
                               "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"})
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr[-3000:]
    out, said = [], []
    for line in stderr.splitlines():
        if line.startswith("end "):
            out.append(("\n".join(said), float(line[4:])))
            said = []
        else:
            said.append(line)
    assert len(out) == len(cases), stderr[-3000:]
    return out


@pytest.mark.skipif(CC is None, reason="no C compiler here")
@pytest.mark.parametrize("name", HOSTILE)
def test_the_compiled_filter_is_linear_and_clean_under_sanitizers(harness, name):
    """The same hostile options, $USER and user files through the compiled filter: no sanitizer finding, within the
    bound, and the advice cli_filter.lua gives."""
    binary, cache = harness
    write_cache(cache, [verdict()], default_partition="debug")
    text = HOSTILE[name]
    cases = [({"time": "60", option: text}, b"") for option in OPTIONS]
    cases += [({"time": "60", "mem": "4000"}, b"")]
    results = compiled(binary, cases)
    results += compiled(binary, [({"time": "60"}, b"")], user=text[:100_000])
    long_header = hostile_user_file(cache, text)
    file = (users_folder(cache) / "ana.tsv").read_bytes()
    results += compiled(binary, [({"time": "60", "mem": "4000"}, file), ({"time": "60"}, long_header)])
    slow = [f"{i}: {cpu:.2f} s" for i, (_, cpu) in enumerate(results) if cpu > BOUND_S]
    assert not slow, slow
    said = [s for s, _ in results]
    advice = "jobaware: ask for more --time than the 60 minutes asked (1 CPUs)"
    assert said[:len(OPTIONS)] == [""] * len(OPTIONS) and said[len(OPTIONS)] == advice
    assert said[len(OPTIONS) + 1] == "" and said[len(OPTIONS) + 2] == advice
    assert said[-1] == (f"sbatch: jobaware: verdict cache {cache} user file ana.tsv corrupt (not a version 2 jobaware "
                        "verdict cache); no verdicts until it is fixed (failing open)")


ALPHABET = " |%9:[]{},gpux.-\t\n#0end"


def fuzz_case(rng: random.Random, good: bytes) -> tuple[dict[str, str], bytes]:
    """Options drawn from what the filter reads, values from a hostile alphabet (a few 64 KB long); a user file that
    is the good one with bytes flipped, cut, doubled or replaced by hostile runs, or none (the file stays)."""
    def text(n: int) -> str:
        return "".join(rng.choice(ALPHABET.replace("\n", "")) for _ in range(n))

    options = {"time": rng.choice(["60", "1", "0", "x", text(rng.randint(0, 12))])}
    for option in rng.sample(OPTIONS, rng.randint(0, 5)):
        options[option] = rng.choice([text(rng.randint(0, 40)), str(rng.randint(0, 10**6)) + rng.choice("KMGT "),
                                      "gpu:" + "0" * rng.randint(1, 400) + "2",
                                      rng.choice(list(HOSTILE.values()))[:rng.choice([1024, 1025, N])]])
    file = bytearray(good)
    for _ in range(rng.randint(0, 4)):
        at = rng.randrange(len(file) + 1)
        how = rng.randrange(4)
        if how == 0 and file:
            file[min(at, len(file) - 1)] = rng.randrange(256)
        elif how == 1:
            del file[at:at + rng.randint(1, 40)]
        elif how == 2:
            file[at:at] = file[at:at + rng.randint(1, 200)]
        else:
            file[at:at] = text(rng.choice([5, 300, 5000])).encode()
    return options, bytes(file) if rng.random() < 0.7 else b""


@pytest.mark.skipif(CC is None, reason="no C compiler here")
def test_fuzzed_options_and_user_files(harness):
    """`make fuzz` runs JOBAWARE_FUZZ_EXAMPLES cases (100,000 by default; 300 in `make test`), in batches of 1,000
    through one sanitized process each: no sanitizer finding, no call over the bound."""
    binary, cache = harness
    write_cache(cache, [verdict(), verdict(account="phys", advice="[{nodes} nodes ]{gpus} GPUs, {mem_mib} MiB"),
                        verdict(comment="x", advice="", minutes=5)], default_partition="debug")
    good = (users_folder(cache) / "ana.tsv").read_bytes()
    rng, total, advised = random.Random(50), examples(300), 0
    for start in range(0, total, 1000):
        cases = [fuzz_case(rng, good) for _ in range(min(1000, total - start))]
        results = compiled(binary, cases, timeout=1200)
        slow = [f"case {start + i}: {cpu:.2f} s" for i, (_, cpu) in enumerate(results) if cpu > BOUND_S]
        assert not slow, slow
        advised += sum(said.startswith("jobaware: ") for said, _ in results)
    assert advised > 0
