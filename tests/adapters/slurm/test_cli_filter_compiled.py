"""The compiled cli_filter (cli_filter_jobaware.so) against cli_filter.lua inside a real one-node Slurm: built by
`jobaware slurm plugins --plugin-dir`, loaded by real sbatch from a second PluginDir, and for every job shape, user and
cache state it prints what cli_filter.lua prints, while sbatch always succeeds."""

import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from harness.slurm_cluster import SlurmCluster, require_slurm
from jobaware.adapters.slurm.plugins import COMPILED, build_cli_filter, write_plugins
from jobaware.adapters.slurm.verdicts import HEADER_FILE, Shape, Verdict, users_folder, write_cache
from jobaware.errors import JobawareError

pytestmark = pytest.mark.slow
NOW = int(time.time())
ME = "root"  # the tests run as root: "#0" is root's file by user id


def v(user, account, minutes, cpus, mem, advice, nodes=1, n_similar=5, created=NOW):
    return Verdict(user=user, account=account, partition="debug", n_similar=n_similar, created=created,
                   shape=Shape(time_minutes=minutes, nodes=nodes, cpus=cpus, mem_mib=mem, gpus=0),
                   comment="failure risk 70%", advice=advice)


CACHED = [
    v(ME, "", 60, 1, 500, "ask for more --time[ than the {time_minutes} minutes asked] (model 3)."),
    v(ME, "", 5, 1, 500, ""),  # a verdict without advice
    v(ME, "", 30, 4, 900, "[{nodes} node x ][{cpus} CPUs, ]{mem_mib} MiB, {gpus} GPUs; {unknown} [{nope} gone]"
                          " [[nested] {cpus}] {[x]time_minutes} [unbalanced {cpus", n_similar=2),
    v(ME, "", 120, 4, 900, "the tie with more similar jobs: {cpus}", n_similar=9),
    v(ME, "", 10, 2, 100, "too old to say", created=NOW - 40 * 86_400),  # past the cache's max age
    v(ME, "phys", 10, 8, 100, "phys: {time_minutes}/{mem_mib}/{cpus} [{mem_mib} MiB]"),
    v(ME, "phys", 1, 1, 1, "phys, far away"),
    v("ana", "chem", 1, 2, 100, "ana: [{time_minutes} min ]{cpus} cpus"),
]
SHAPES = [
    ["--time=60", "-n1", "--mem=500"],  # the exact shape
    ["--time=45"],  # no memory asked: the nearest over the dimensions stated
    ["--time=30", "-N1", "-n4", "--mem=900"],
    ["--time=60", "-n4", "--mem=900"],  # as near to 30 minutes as to 120: the one with more similar jobs
    ["--time=1:00:00", "--ntasks-per-node=3", "--mem-per-cpu=100"],
    ["--time=UNLIMITED", "-c2", "-n2", "--mem=900"],
    ["-A", "phys", "--time=10", "-c8", "--mem=100"],
    ["-A", "nothere", "--time=20", "--mem=100M"],
    ["-p", "debug", "--time=3", "--mem-per-cpu=50", "-c3"],
    ["--time=10", "-n2", "--mem=100"],  # exact but too old: the nearest current one
]
# $USER as sbatch's users have it: theirs, another with verdicts, none, a name no file can have, unset (then
# "#UID", root's link), and empty (cli_filter.lua then takes the uid, not $LOGNAME)
USERS = [{"USER": ME}, {"USER": "ana"}, {"USER": "bob"}, {"USER": "odd name"}, {}, {"USER": "", "LOGNAME": "ana"}]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_slurm()
    root = tmp_path_factory.mktemp("slurm-cfilter")
    write_plugins(root, cache=str(root / "verdicts.tsv"), stale_after=600)
    slurm = SlurmCluster(root, lua_plugins=True, cpus=8).start()
    yield slurm
    slurm.stop()


@pytest.fixture(scope="module")
def compiled_conf(cluster, monkeypatch_module):
    """A copy of slurm.conf that names the compiled filter, built into a second PluginDir after the system's."""
    system = re.search(r"^PluginDir\s*=\s*(\S+)", cluster.run("scontrol", "show", "config"), re.M).group(1)
    plugin_dir = cluster.root / "plugins"
    plugin_dir.mkdir()
    monkeypatch_module.setenv("SLURM_CONF", str(cluster.conf))  # scontrol --version needs the site's slurm.conf
    built = build_cli_filter(plugin_dir, cache=str(cluster.root / "verdicts.tsv"), stale_after=600)
    assert built == plugin_dir / COMPILED and built.stat().st_mode & 0o777 == 0o644
    folder = cluster.root / "compiled"
    folder.mkdir()
    conf = cluster.conf.read_text().replace("CliFilterPlugins=lua", "CliFilterPlugins=jobaware")
    (folder / "slurm.conf").write_text(conf + f"PluginDir={system}:{plugin_dir}\n")
    return folder / "slurm.conf"


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def sbatch(cluster, conf: Path, shape: list[str], user: dict) -> str:
    """sbatch a held job under `conf` as `user` says; what it printed on stderr (a fresh folder for the
    once-a-minute note each time, so that both filters may say it)."""
    env = {k: val for k, val in cluster.env.items() if k not in ("USER", "LOGNAME")}
    env.update(user, SLURM_CONF=str(conf), XDG_RUNTIME_DIR=tempfile.mkdtemp(dir=cluster.root))
    done = subprocess.run(["sbatch", "--parsable", "--hold", f"--chdir={cluster.root / 'jobs'}", "--wrap=true", *shape],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (conf, shape, user, done.stderr)
    return done.stderr


def break_cache(path: Path, how: str) -> None:
    """The cache broken as `how` says; the cache file and its header file alike (the CLI filters read the header
    file: the cache file is SlurmUser's alone)."""
    mine = users_folder(path) / f"{ME}.tsv"
    header = users_folder(path) / HEADER_FILE
    if how == "missing":
        path.unlink()
    elif how == "stale":  # written 11 minutes ago; both filters were built with --stale-after 600
        write_cache(path, CACHED, default_partition="debug", now=NOW - 660)
    elif how == "random bytes":
        for f in (path, header):
            f.write_bytes(random.Random(3).randbytes(20_000))
    elif how == "truncated":
        for f in (path, header):
            f.write_bytes(f.read_bytes()[:-3])
    elif how == "no user folder":
        users_folder(path).unlink()
    elif how == "user file truncated":
        text = mine.read_bytes()
        mine.unlink()
        mine.write_bytes(text[: len(text) // 2])
    elif how == "malformed lines":  # some of the user's lines lose a field or gain a letter in a number
        lines = mine.read_text().split("\n")
        lines[1] = lines[1].rsplit("\t", 1)[0]
        lines[3] = lines[3].replace("\t5\t", "\t5x\t", 1)
        mine.unlink()
        mine.write_text("\n".join(lines[:2] + [""] + lines[2:]))
    elif how == "user file empty":
        mine.unlink()
        mine.write_bytes(b"")


def alike(said: str) -> str:
    """What a filter said, with a stale cache's age (in whole seconds, read when each sbatch ran) left out."""
    return re.sub(r"written \d+ s ago", "written N s ago", said)


STATES = ["fresh", "missing", "stale", "random bytes", "truncated", "no user folder", "user file truncated",
          "malformed lines", "user file empty"]


@pytest.mark.parametrize("state", STATES)
def test_the_compiled_filter_prints_what_cli_filter_lua_prints(cluster, compiled_conf, state):
    cache = cluster.root / "verdicts.tsv"
    write_cache(cache, CACHED, default_partition="debug")
    if state != "fresh":
        break_cache(cache, state)
    printed, differ = [], []
    for shape in SHAPES if state in ("fresh", "malformed lines") else SHAPES[:2]:
        for user in USERS:
            lua, compiled = sbatch(cluster, cluster.conf, shape, user), sbatch(cluster, compiled_conf, shape, user)
            # Slurm prefixes what a Lua script logs with "lua: "; the advice itself is written as it is. The two
            # sbatch runs may fall on either side of a second: a stale cache's age may differ by one
            if alike(lua.replace("sbatch: lua: jobaware: ", "sbatch: jobaware: ")) != alike(compiled):
                differ.append(f"{shape} {user}:\n  lua:      {lua!r}\n  compiled: {compiled!r}")
            printed.append(compiled)
    assert not differ, "\n".join(differ)
    advice = [p for p in printed if p.startswith("jobaware: ")]
    notes = [p for p in printed if p.startswith("sbatch: jobaware: verdict cache ")]
    if state in ("fresh", "malformed lines"):  # advice for root (also as "#0") and ana, none for bob and "odd name"
        assert len(advice) >= 3 * len(SHAPES) - 2 and not notes, printed
        assert "jobaware: 1 node x 4 CPUs, 900 MiB, 0 GPUs; ?  [nested] 4 ? [unbalanced {cpus\n" in printed, sorted(set(printed))
    elif state in ("user file truncated", "user file empty"):  # only root's file is bad: ana still gets advice
        assert len(notes) == 2 * 3 and len(advice) == 2, printed
    else:  # "no user folder": the header file is gone with it
        assert len(notes) == len(printed) and not advice, printed


def test_random_advice_texts_are_filled_in_alike(cluster, compiled_conf):
    """Brackets, braces and names in random order (balanced or not, names stated or not), filled in by both."""
    tokens = ["[", "]", "{", "}", "{cpus}", "{mem_mib}", "{time_minutes}", "{nodes}", "{gpus}", "{nope}", "x", " ",
              "_", "9", "%d", "%"]
    rng = random.Random(41)
    differ = []
    for _ in range(40):
        advice = "".join(rng.choice(tokens) for _ in range(rng.randint(1, 14)))
        write_cache(cluster.root / "verdicts.tsv", [v(ME, "", 60, 1, 500, advice)], default_partition="debug")
        shape = rng.choice([["--time=60", "-n1", "--mem=500"], ["-n2"], ["--time=5", "--mem-per-cpu=10"]])
        lua, compiled = (sbatch(cluster, conf, shape, {"USER": ME}) for conf in (cluster.conf, compiled_conf))
        if lua != compiled or not compiled.startswith("jobaware: "):
            differ.append(f"{advice!r} {shape}: lua {lua!r}, compiled {compiled!r}")
    assert not differ, "\n".join(differ)


# what users type, as Slurm hands it to both filters: time forms, memory units, GRES and GPU forms (a GRES this
# cluster lacks is refused by slurmctld after the filters ran; its number may be any run of digits)
FORMS = [["--time=UNLIMITED"], ["--time=infinite"], ["--time=1-00:00"], ["--time=0"], ["--time=2-3"],
         ["--mem=0"], ["--mem=2T"], ["--mem=1048576G"], ["--mem-per-cpu=3G", "-c3"], ["--gres=gpu:2,gpu:a100:3"],
         ["--gres=gpu"], ["--gres=shard:2"], ["--gres=gpu:" + "0" * 70 + "2"], ["--gres=gpu:" + "9" * 70],
         ["--gpus=3"], ["--gpus-per-node=4", "-N1"]]


def test_request_forms_users_type_are_read_alike(cluster, compiled_conf):
    write_cache(cluster.root / "verdicts.tsv", [v(ME, "", 60, 1, 500, "t={time_minutes} c={cpus} m={mem_mib} "
                                                  "g={gpus}")], default_partition="debug")
    differ = []
    for shape in FORMS:
        said = []
        for conf in (cluster.conf, compiled_conf):
            env = {**cluster.env, "SLURM_CONF": str(conf), "USER": ME, "XDG_RUNTIME_DIR": str(cluster.root)}
            said.append(subprocess.run(["sbatch", "--hold", f"--chdir={cluster.root / 'jobs'}", "--wrap=true", *shape],
                                       env=env, capture_output=True, text=True, timeout=60).stderr)
        if said[0] != said[1] or not said[1].startswith("jobaware: t="):
            differ.append(f"{shape}: lua {said[0]!r}, compiled {said[1]!r}")
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize("command", ["srun", "salloc"])
def test_srun_and_salloc_get_the_same_advice(cluster, compiled_conf, command):
    write_cache(cluster.root / "verdicts.tsv", CACHED, default_partition="debug")
    said = []
    for conf in (cluster.conf, compiled_conf):
        env = {**cluster.env, "SLURM_CONF": str(conf), "USER": ME}
        done = subprocess.run([command, "--time=60", "-n1", "--mem=500", "true"], env=env, capture_output=True,
                              text=True, timeout=60, cwd=cluster.root / "jobs")
        assert done.returncode == 0, done.stderr
        said.append([line for line in done.stderr.splitlines() if "jobaware" in line])
    assert said[0] == said[1] == ["jobaware: ask for more --time than the 60 minutes asked (model 3)."]


def test_a_command_whose_name_and_options_disagree_gets_no_advice(cluster, compiled_conf, tmp_path):
    """The guard on slurm_opt_t's layout: sbatch run under srun's name sets sbatch's options, which a compiled filter
    for a Slurm whose struct starts otherwise would see; it advises nothing then, and the job is submitted."""
    write_cache(cluster.root / "verdicts.tsv", CACHED, default_partition="debug")
    disguised = tmp_path / "srun"
    disguised.symlink_to(shutil.which("sbatch"))
    said = {}
    for name, program in (("sbatch", "sbatch"), ("disguised", str(disguised))):
        env = {**cluster.env, "SLURM_CONF": str(compiled_conf), "USER": ME}
        done = subprocess.run([program, "--parsable", "--hold", f"--chdir={cluster.root / 'jobs'}", "--wrap=true",
                               "--time=60", "-n1", "--mem=500"], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.strip().isdigit(), done.stderr
        said[name] = [line for line in done.stderr.splitlines() if "jobaware" in line]
    assert len(said["sbatch"]) == 1 and said["sbatch"][0].endswith(
        "jobaware: ask for more --time than the 60 minutes asked (model 3).") and said["disguised"] == [], said


def test_the_note_is_said_once_a_minute(cluster, compiled_conf, tmp_path):
    cache = cluster.root / "verdicts.tsv"
    write_cache(cache, CACHED, default_partition="debug")
    cache.unlink()
    env = {**cluster.env, "SLURM_CONF": str(compiled_conf), "XDG_RUNTIME_DIR": str(tmp_path), "USER": ME}
    said = [subprocess.run(["sbatch", "--hold", f"--chdir={cluster.root / 'jobs'}", "--wrap=true", "--time=60"],
                           env=env, capture_output=True, text=True, timeout=60).stderr for _ in range(2)]
    assert said == [f"sbatch: jobaware: verdict cache {cache} missing; no verdicts until it is fixed (failing open)\n",
                    ""]
    assert (tmp_path / ".jobaware-cli-filter-said").read_text().strip().isdigit()


LACKING = """#include <stdint.h>
const char plugin_name[] = "a filter that needs a function this Slurm lacks";
const char plugin_type[] = "cli_filter/jobaware";
const uint32_t plugin_version = VERSION;
const char jobaware_build[] = BUILT;
extern int slurm_no_such_function(void);
int init(void) { return 0; }
int fini(void) { return 0; }
int cli_filter_p_setup_defaults(void *opt, int early) { (void) opt; (void) early; return 0; }
int cli_filter_p_pre_submit(void *opt, int offset) { (void) opt; (void) offset; return slurm_no_such_function(); }
void cli_filter_p_post_submit(int offset, uint32_t job, uint32_t step) { (void) offset; (void) job; (void) step; }
"""


def test_doctor_loads_the_filter_as_sbatch_does(cluster, compiled_conf, tmp_path):
    """A filter of the right version that needs a function this Slurm's library lacks (as after an upgrade that
    renamed one) loads, then kills every submission; the doctor starts sbatch with every symbol bound and names it."""
    from jobaware.adapters.slurm.doctor import BUILT, doctor

    cache = cluster.root / "verdicts.tsv"
    write_cache(cache, CACHED, default_partition="debug")
    built = BUILT.search((cluster.root / "plugins" / COMPILED).read_bytes())
    (tmp_path / "lacking.c").write_text(LACKING)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", f"-DVERSION=0x{built.group(1).decode()}", "-o", plugins / COMPILED,
                    f'-DBUILT="{built.group(0)[:-1].decode()}"', tmp_path / "lacking.c"], check=True)
    conf = tmp_path / "slurm.conf"
    conf.write_text(compiled_conf.read_text().replace(str(cluster.root / "plugins"), str(plugins)))
    env = {**cluster.env, "SLURM_CONF": str(conf)}
    done = subprocess.run(["sbatch", "--hold", f"--chdir={cluster.root / 'jobs'}", "--wrap=true"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "undefined symbol: slurm_no_such_function" in done.stderr, done.stderr
    check = {c.name: c for c in doctor(conf, cache, str(tmp_path / "absent"), {})}[COMPILED]
    assert not check.ok
    assert check.detail.startswith(f"{plugins / COMPILED}: `sbatch --version` fails with it ('sbatch: error: ")
    assert "undefined symbol: slurm_no_such_function" in check.detail and "--overwrite`" in check.detail


def test_the_said_file_never_blocks_sbatch_nor_is_written_through_a_link(cluster, compiled_conf, tmp_path):
    """Root may run sbatch with another user's $XDG_RUNTIME_DIR (`su` without `-`): a link that user put at the said
    file's temporary name is not written through, and a FIFO at the said file or in a user file's place does not block
    sbatch (cli_filter.lua would wait on it)."""
    cache = cluster.root / "verdicts.tsv"
    write_cache(cache, CACHED, default_partition="debug")
    cache.unlink()
    run = tmp_path / "run"
    run.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("root's own\n")
    (run / ".jobaware-cli-filter-said.tmp").symlink_to(victim)
    os.mkfifo(run / ".jobaware-cli-filter-said")
    env = {**cluster.env, "SLURM_CONF": str(compiled_conf), "XDG_RUNTIME_DIR": str(run), "USER": ME}

    def said() -> str:
        done = subprocess.run(["sbatch", "--hold", f"--chdir={cluster.root / 'jobs'}", "--wrap=true"], env=env,
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stderr

    note = "sbatch: jobaware: verdict cache {} {}; no verdicts until it is fixed (failing open)\n"
    assert said() == note.format(cache, "missing")
    assert victim.read_text() == "root's own\n" and (run / ".jobaware-cli-filter-said").read_text().strip().isdigit()
    assert said() == ""  # said once a minute, from the file put in the FIFO's place
    (run / ".jobaware-cli-filter-said").unlink()
    write_cache(cache, CACHED, default_partition="debug")
    os.mkfifo(users_folder(cache) / "fifo.tsv")  # read by this filter only: job_submit.lua reads the job's user's
    env["USER"] = "fifo"
    assert said() == note.format(cache, "user file fifo.tsv not a regular file")


def test_the_build_says_in_one_line_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(JobawareError, match=r"^no C compiler found \(\$CC=no-such-cc\): install one"):
        build_cli_filter(tmp_path)
    monkeypatch.delenv("CC")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler here")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CC", compiler)
    with pytest.raises(JobawareError, match="^scontrol not found on PATH"):
        build_cli_filter(tmp_path)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/sh\necho 'scontrol: fatal: Could not establish a configuration source' >&2\n"
                                   "exit 1\n")
    (fake / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    with pytest.raises(JobawareError, match=r"scontrol --version did not say a Slurm version .*: scontrol: fatal: Co"):
        build_cli_filter(tmp_path)
    (fake / "scontrol").write_text("#!/bin/sh\necho 'slurm-wlm 22.05.8'\n")
    with pytest.raises(JobawareError, match="--plugin-dir .*absent: not a folder"):
        build_cli_filter(tmp_path / "absent")
    with pytest.raises(JobawareError, match="expected an absolute path"):
        build_cli_filter(tmp_path, cache="verdicts.tsv")
    assert not list(tmp_path.glob("*.so*"))  # nothing half-written


def compile_for(version: int, out: Path, cache: Path) -> None:
    """The compiled filter for Slurm `version` (0x160501: 22.05.1) as `build_cli_filter` compiles it."""
    subprocess.run(["gcc", "-std=gnu11", "-shared", "-fPIC", f'-DJOBAWARE_CACHE_PATH="{cache}"',
                    "-DJOBAWARE_STALE_AFTER=600", f"-DJOBAWARE_SLURM_VERSION={version:#x}", "-o", out,
                    Path(__file__).parents[3] / "jobaware/adapters/slurm/c/cli_filter_jobaware.c", "-lm"], check=True)


def test_a_filter_this_sbatch_cannot_load_is_never_installed(cluster, compiled_conf, tmp_path, monkeypatch):
    """`jobaware slurm plugins --plugin-dir` loads the new filter in this host's sbatch before it replaces the
    installed one: a build for another Slurm version (here: scontrol says 22.05.1), which would fail every sbatch,
    is refused in one line naming sbatch's error, and the installed filter and Lua plugins stay as they were."""
    from tests.test_cli import run

    out, plugins = tmp_path / "etc", tmp_path / "plugins"
    plugins.mkdir()
    options = ["slurm", "plugins", "--output", out, "--plugin-dir", plugins, "--cache", cluster.root / "verdicts.tsv",
               "--overwrite"]
    env = {**cluster.env, "JOBAWARE_HOME": str(tmp_path / "home")}
    done = run(*options, env=env)
    assert done.returncode == 0, done.stderr
    installed, lua = (plugins / COMPILED).read_bytes(), (out / "cli_filter.lua").read_text()
    fake = tmp_path / "bin"  # an scontrol that says 22.05.1 (the real sbatch is on PATH after it)
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/sh\necho 'slurm-wlm 22.05.1'\n")
    (fake / "scontrol").chmod(0o755)
    done = run(*options[:-2], "/elsewhere.tsv", "--overwrite", env={**env, "PATH": f"{fake}:{os.environ['PATH']}"})
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"error: sbatch here cannot load the new {COMPILED} ({plugins / COMPILED} kept as "
                                  "it was): 'sbatch: plugin_load_from_file: Incompatible Slurm plugin "), done.stderr
    assert f"Incompatible Slurm plugin {COMPILED} version (22.05.1)" in done.stderr
    assert (plugins / COMPILED).read_bytes() == installed and (out / "cli_filter.lua").read_text() == lua
    assert sorted(p.name for p in plugins.iterdir()) == [COMPILED]  # no temporary file left
    site = tmp_path / "site"  # a slurm.conf whose controller is named in a file it includes by a relative path
    site.mkdir()
    host = re.search(r"^SlurmctldHost=.*\n", cluster.conf.read_text(), re.M).group(0)
    (site / "hosts.conf").write_text(host)
    (site / "slurm.conf").write_text("Include hosts.conf\n" + cluster.conf.read_text().replace(host, ""))
    done = run(*options, env={**env, "SLURM_CONF": str(site / "slurm.conf")})  # the copy includes it from there
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))  # scontrol (the fake) needs none
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    with pytest.raises(JobawareError, match=rf"^{tmp_path}/absent.conf: cannot read slurm.conf \(No such file or "
                                            rf"directory\), so the new {COMPILED} cannot be tried with sbatch; "):
        build_cli_filter(plugins, cache=str(cluster.root / "verdicts.tsv"))
    assert (plugins / COMPILED).read_bytes() == installed and sorted(p.name for p in plugins.iterdir()) == [COMPILED]


def test_doctor_and_sbatch_on_a_filter_built_for_another_slurm(cluster, compiled_conf, tmp_path, monkeypatch):
    """The doctor passes the filter built here and names one built for another Slurm version, which Slurm's loader
    refuses: then every sbatch fails, as the README warns."""
    from jobaware.adapters.slurm.doctor import doctor

    cache = cluster.root / "verdicts.tsv"
    write_cache(cache, CACHED, default_partition="debug")
    version = re.search(r"(\d+\.\d+\.\d+)", cluster.run("sbatch", "--version")).group(1)  # the same as scontrol's
    checks = {c.name: c for c in doctor(compiled_conf, cache, str(tmp_path / "absent"), {})}
    assert checks["CliFilterPlugins=jobaware"].ok and "CliFilterPlugins=lua" not in checks
    assert checks[COMPILED].ok and checks[COMPILED].detail.endswith(f"reads {cache}, built for Slurm {version}")
    assert "readable by sbatch users" in checks  # checked, as for cli_filter.lua (pytest's folders are 0700)
    old = tmp_path / "old"  # what the build left under Slurm 22.05.1, before the upgrade to this Slurm
    old.mkdir()
    compile_for(0x160501, old / COMPILED, cache)
    conf = tmp_path / "slurm.conf"
    conf.write_text(compiled_conf.read_text().replace(str(cluster.root / "plugins"), str(old)))
    checks = {c.name: c for c in doctor(conf, cache, str(tmp_path / "absent"), {})}
    assert not checks[COMPILED].ok
    assert checks[COMPILED].detail.startswith(f"{old / COMPILED} was built for Slurm 22.05.1, Slurm {version} here "
                                              "refuses it and every sbatch fails; run `jobaware slurm plugins "
                                              f"--output {conf.parent} --cache {cache} --stale-after 600 --plugin-dir "
                                              f"{old} --overwrite`")
    done = subprocess.run(["sbatch", "--hold", f"--chdir={cluster.root / 'jobs'}", "--wrap=true"],
                          env={**cluster.env, "SLURM_CONF": str(conf)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"Incompatible Slurm plugin {old / COMPILED} version (22.05.1)" in done.stderr
    assert "cannot create cli_filter context for cli_filter/jobaware" in done.stderr
    with pytest.raises(subprocess.CalledProcessError):  # sbatch --version itself fails then: the build asks scontrol
        subprocess.run(["sbatch", "--version"], env={**cluster.env, "SLURM_CONF": str(conf)}, check=True,
                       capture_output=True)
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert build_cli_filter(old, cache=str(cache), stale_after=600) == old / COMPILED  # rebuilt for this Slurm
    monkeypatch.undo()
    assert {c.name: c for c in doctor(conf, cache, str(tmp_path / "absent"), {})}[COMPILED].ok
    assert sbatch(cluster, conf, ["--time=60", "-n1", "--mem=500"], {"USER": ME}).startswith("jobaware: ask for more")
