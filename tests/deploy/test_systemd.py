"""The systemd units an admin installs (deploy/systemd/): `systemd-analyze verify` finds nothing to say of them (the
timers with their services), and every option their commands pass, with the environment file's settings, is one
the command takes."""

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

UNITS = ROOT / "deploy" / "systemd"
JOBAWARE = str(Path(sys.executable).with_name("jobaware"))
INSTALLED = "/opt/jobaware/venv/bin/jobaware"  # where the units expect the package's venv


def _environment(*files: Path) -> dict[str, str]:
    values = {}
    for path in files:
        for line in path.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                name, _, value = line.partition("=")
                values[name.strip()] = value.strip()
    return values


def _installed(tmp_path: Path) -> list[Path]:
    """The units as installed here: the venv's jobaware, the environment files beside them; serve@ as failure."""
    for path in UNITS.glob("*.env"):
        shutil.copy(path, tmp_path / path.name)
    units = []
    for path in sorted([*UNITS.glob("*.service"), *UNITS.glob("*.timer")]):
        text = path.read_text().replace(INSTALLED, JOBAWARE).replace("/etc/jobaware/", f"{tmp_path}/")
        target = tmp_path / path.name.replace("@.", "@failure.")
        target.write_text(text)
        units.append(target)
    return units


def test_systemd_analyze_verify_finds_nothing_to_say(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here")
    units = _installed(tmp_path)
    assert {u.name for u in units} == {"jobaware-collector.service", "jobaware-adapter.service",
                                       "jobaware-hold-follow.service", "jobaware-serve@failure.service",
                                       "jobaware-digest.service", "jobaware-digest.timer", "jobaware-mail.service",
                                       "jobaware-mail.timer"}
    checked = subprocess.run(["systemd-analyze", "verify", "--man=no", *map(str, units)], capture_output=True,
                             text=True, timeout=120)
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    broken = tmp_path / "broken.service"
    broken.write_text(units[0].read_text().replace("Restart=", "Restrt="))
    said = subprocess.run(["systemd-analyze", "verify", "--man=no", str(broken)], capture_output=True, text=True)
    assert "Unknown key 'Restrt'" in said.stderr  # the check can fail


@pytest.mark.parametrize("unit", sorted(p.name for p in UNITS.glob("*.service")))
def test_every_option_a_unit_passes_is_one_its_command_takes(unit):
    text = (UNITS / unit).read_text()
    env = _environment(UNITS / "jobaware.env", UNITS / "serve-failure.env")
    assert "EnvironmentFile=/etc/jobaware/jobaware.env" in text and "UMask=0007" in text
    command = re.search(r"^ExecStart=(.*)$", text, re.MULTILINE).group(1).replace("%i", "failure")
    command = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env[m.group(1) or m.group(2)], command)
    words = shlex.split(command)
    assert words[0] == INSTALLED
    subcommand = [w for w in words[1:3] if not w.startswith("-")]
    if subcommand[-1] == "failure":
        subcommand = subcommand[:-1]
    shown = subprocess.run([JOBAWARE, *subcommand, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                           env={"PATH": "/usr/bin:/bin", "COLUMNS": "300", "PYTHONPATH": str(ROOT)})
    assert shown.returncode == 0, shown.stderr
    for option in (w.split("=")[0] for w in words if w.startswith("--")):
        assert option in shown.stdout, f"{unit}: {' '.join(subcommand)} takes no {option}"
