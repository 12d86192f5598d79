"""The package-manager hooks (docs/results/slurm-plugins.md) that rebuild the compiled cli_filter after a Slurm upgrade: the apt file as apt reads
it (`apt-config dump` over a temporary APT config, never /etc/apt), and both commands under /bin/sh with stand-ins
for dpkg-query and jobaware: a rebuild once per new version, the doctor's own command, and a failed rebuild that
fails neither apt nor dnf and says so."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from jobaware.adapters.slurm.doctor import rebuild

README = Path(__file__).parents[3] / "docs" / "results" / "slurm-plugins.md"  # the page that holds the hooks
APT_FILE = "/etc/apt/apt.conf.d/90jobaware-cli-filter"
DNF_FILE = "/etc/dnf/plugins/post-transaction-actions.d/jobaware.action"
STATE = "/var/lib/jobaware/slurm-client.version"


def snippet(path: str) -> str:
    """The README code block whose first line, a comment, names the file `path` it is to be pasted into."""
    block = re.search(rf"^```\n([/#]+ {re.escape(path)}\n.*?)^```$", README.read_text(), re.M | re.S)
    assert block, f"{README.name} has no code block for {path}"
    return block.group(1)


def doctors_command(plugin_dir: str) -> str:
    """The rebuild command `jobaware slurm doctor` prints for a site with the README's paths and default choices."""
    return rebuild(Path("/nonexistent/etc/slurm/slurm.conf"), Path("/var/spool/jobaware/verdicts.tsv"),
                   Path(plugin_dir)).removeprefix("run `").removesuffix("`").replace("/nonexistent", "")


@pytest.fixture
def stand_ins(tmp_path):
    """A folder of stand-ins first on PATH: `dpkg-query` says $SLURM_VERSION (fails when it is unset, as for a
    package not installed); `jobaware` logs its arguments and exits $REBUILD_STATUS."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dpkg-query").write_text('#!/bin/sh\n[ -n "$SLURM_VERSION" ] || exit 1\nprintf %s "$SLURM_VERSION"\n')
    (bin_dir / "jobaware").write_text(f'#!/bin/sh\necho "$*" >>{tmp_path}/calls\n[ -z "$REBUILD_STATUS" ] && exit 0\n'
                                      'echo "error: the stand-in failed" >&2\nexit "$REBUILD_STATUS"\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def run(command: str, stand_ins: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{stand_ins}:/usr/bin:/bin", **env})


NO_APT = pytest.mark.skipif(shutil.which("apt-config") is None, reason="apt-config (Debian's apt) is not installed")


def apt_hooks(text: str, folder: Path) -> list[str]:
    """The DPkg::Post-Invoke commands apt reads from `text` placed in an apt.conf.d of its own: `apt-config dump`
    over a temporary APT config that reads no file of /etc/apt."""
    parts = folder / "apt.conf.d"
    parts.mkdir()
    (parts / Path(APT_FILE).name).write_text(text)
    (folder / "apt.conf").write_text(f'Dir::Etc::main "/dev/null";\nDir::Etc::parts "{parts}";\n')
    dump = subprocess.run(["apt-config", "dump"], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "APT_CONFIG": str(folder / "apt.conf")})
    assert dump.returncode == 0 and dump.stderr == "", dump.stderr
    return re.findall(r'^DPkg::Post-Invoke:: "(.*)";$', dump.stdout, re.M)


@NO_APT
def test_the_apt_hook_rebuilds_once_per_new_slurm_client_and_never_fails_apt(tmp_path, stand_ins):
    text = snippet(APT_FILE)
    written = re.search(r'^DPkg::Post-Invoke \{ "(.*)"; \};$', text, re.M).group(1)
    assert apt_hooks(text, tmp_path) == [written]  # read by apt as written (apt drops a quotation mark inside)
    assert doctors_command("/usr/lib/x86_64-linux-gnu/slurm-wlm") in written
    state = tmp_path / "state" / "slurm-client.version"
    command = written.replace(STATE, str(state))
    assert command != written
    calls = tmp_path / "calls"

    done = run(command, stand_ins)  # slurm-client not installed: nothing to do
    assert (done.returncode, done.stderr, calls.exists()) == (0, "", False)
    done = run(command, stand_ins, SLURM_VERSION="22.05.8-4+deb12u3")
    assert (done.returncode, done.stderr) == (0, "") and state.read_text() == "22.05.8-4+deb12u3\n"
    assert calls.read_text() == doctors_command("/usr/lib/x86_64-linux-gnu/slurm-wlm").removeprefix("jobaware ") + "\n"
    assert run(command, stand_ins, SLURM_VERSION="22.05.8-4+deb12u3").returncode == 0  # the same version: no rebuild
    assert len(calls.read_text().splitlines()) == 1
    done = run(command, stand_ins, SLURM_VERSION="22.05.9-1", REBUILD_STATUS="1")
    assert done.returncode == 0 and done.stderr == (
        "error: the stand-in failed\njobaware: rebuilding cli_filter_jobaware.so for slurm-client 22.05.9-1 failed, "
        "apt goes on; sbatch fails until it is rebuilt: see jobaware slurm doctor\n")
    assert state.read_text() == "22.05.8-4+deb12u3\n"  # so the next apt run tries again
    assert run(command, stand_ins, SLURM_VERSION="22.05.9-1").returncode == 0
    assert len(calls.read_text().splitlines()) == 3 and state.read_text() == "22.05.9-1\n"


@NO_APT
def test_apt_reads_a_line_with_inner_quotation_marks_otherwise(tmp_path):
    """The check above can fail: apt.conf values may hold no quotation mark, and apt drops one silently."""
    text = snippet(APT_FILE).replace("exit 0;", 'exit "0";', 1)
    assert apt_hooks(text, tmp_path) != [re.search(r'^DPkg::Post-Invoke \{ "(.*)"; \};$', text, re.M).group(1)]


def test_the_dnf_action_runs_the_doctors_command_and_never_fails(tmp_path, stand_ins):
    lines = [line for line in snippet(DNF_FILE).splitlines() if line and not line.startswith("#")]
    assert len(lines) == 1
    package, state, command = lines[0].split(":", 2)  # as the plugin splits an action line
    assert (package, state) == ("slurm", "in")
    assert command.startswith(doctors_command("/usr/lib64/slurm") + " || ")
    command = command.replace("$ver", "23.02.7")  # the plugin's substitution of the package's version
    done = run(command, stand_ins)
    assert (done.returncode, done.stderr) == (0, "")
    done = run(command, stand_ins, REBUILD_STATUS="1")
    assert done.returncode == 0 and done.stderr.endswith(
        "jobaware: rebuilding cli_filter_jobaware.so for slurm 23.02.7 failed, dnf goes on; sbatch fails until it is "
        "rebuilt: see jobaware slurm doctor\n")
