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

UNITS = ROOT / "jobaware" / "deploy" / "systemd"
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


def test_every_capability_has_a_service_unit_port_and_url():
    """One `serve-KEY.env` per registered capability (and the card gateway), each on its own port, which the settings'
    JOBAWARE_<KEY>_URL names."""
    from jobaware import capabilities

    env = _environment(UNITS / "jobaware.env")
    ports = {}
    for key in capabilities.keys():
        port = _environment(UNITS / f"serve-{key}.env")["JOBAWARE_PORT"]
        assert env[f"JOBAWARE_{key.upper()}_URL"] == f"http://127.0.0.1:{port}"
        ports[key] = port
    ports["card"] = _environment(UNITS / "serve-card.env")["JOBAWARE_PORT"]
    assert len(set(ports.values())) == len(ports)


def _folders() -> dict[str, tuple[int, str, str]]:
    """The tmpfiles lines: path -> (mode, user, group)."""
    found = {}
    for line in (UNITS / "jobaware.tmpfiles").read_text().splitlines():
        if line.startswith("d "):
            _, path, mode, user, group, _ = line.split()
            found[path] = (int(mode, 8), user, group)
    return found


def test_the_folders_are_split_by_trust():
    """The registry (what the services load) is written by root alone; the store and the spool are the daemons'
    group's, and no one else's; no folder is writable by every user."""
    folders = _folders()
    assert folders["/var/lib/jobaware/registry"] == (0o2750, "root", "jobaware")
    assert folders["/var/lib/jobaware/store"] == (0o2770, "root", "jobaware")
    assert folders["/var/spool/jobaware/mail"] == (0o2770, "root", "slurm")  # SlurmUser's alone: no account plants mail
    for unit in ("jobaware-digest.service", "jobaware-mail.service"):
        assert "User=slurm" in (UNITS / unit).read_text()
    assert all(not mode & 0o002 for mode, _, _ in folders.values())
    env = _environment(UNITS / "jobaware.env")
    assert env["MLFLOW_TRACKING_URI"] == "sqlite:////var/lib/jobaware/registry/mlflow.db"
    assert env["JOBAWARE_STORE"] in folders and env["JOBAWARE_MAIL_SPOOL"] in folders


@pytest.mark.parametrize("unit", sorted(p.name for p in UNITS.glob("*.service")))
def test_each_unit_keeps_its_state_to_itself(unit):
    """A home of its own (StateDirectory, 0700), never a folder shared with other accounts; the services (the
    network-facing account) never reach the store or the spools."""
    text = (UNITS / unit).read_text()
    name = re.search(r"^StateDirectory=jobaware/(\S+)$", text, re.MULTILINE).group(1)
    assert f"Environment=JOBAWARE_HOME=/var/lib/jobaware/{name}" in text and "StateDirectoryMode=0700" in text
    assert "JOBAWARE_HOME=" not in (UNITS / "jobaware.env").read_text()  # EnvironmentFile= would override the unit's
    if unit.startswith("jobaware-serve@"):
        assert "InaccessiblePaths=-/var/lib/jobaware/store -/var/spool/jobaware" in text
        assert "ReadWritePaths" not in text


def test_no_secret_in_the_settings_every_user_reads():
    settings = _environment(UNITS / "jobaware.env")
    assert not [name for name in settings if re.search("PASSWORD|TOKEN|SECRET", name)]
    assert not [value for value in settings.values() if re.search(r"://[^/@\s]*:[^/@\s]*@", value)]
    assert settings["JOBAWARE_CREDENTIALS"] == "/etc/jobaware/credentials.env"
    assert "PASSWORD" in (UNITS / "credentials.env").read_text()


def test_a_service_runs_out_of_connections_before_file_descriptors_and_every_unit_has_the_service_token():
    """The file descriptor limit of a service is well above its connection cap (serving/connections.py), so a flood
    of connections meets the cap; the settings every unit reads name the service token (in the credentials file:
    the daemons' group reads it, users do not)."""
    from jobaware.serving.base import ServingLimits

    limit = re.search(r"^LimitNOFILE=(\d+)$", (UNITS / "jobaware-serve@.service").read_text(), re.MULTILINE)
    assert limit is not None and int(limit.group(1)) >= 4 * ServingLimits.model_fields["max_connections"].default
    credentials = _environment(UNITS / "credentials.env")
    assert credentials["JOBAWARE_SERVICE_TOKEN_FILE"] == "/etc/jobaware/service.token"


def test_the_board_s_drop_in_lets_the_card_gateway_read_the_store_alone(tmp_path):
    """board.conf, installed as jobaware-serve@card.service.d/board.conf, is a drop-in systemd takes (verified with
    the template unit it changes) and opens the store to the card gateway read-only, the spools still out of reach;
    the board is off until serve-card.env names the store."""
    text = (UNITS / "board.conf").read_text()
    settings = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert settings == ["[Service]", "InaccessiblePaths=", "InaccessiblePaths=-/var/spool/jobaware",
                        "ReadOnlyPaths=-/var/lib/jobaware/store"]
    assert "JOBAWARE_CARD_BOARD_STORE" not in _environment(UNITS / "serve-card.env")  # off unless a site says so
    assert "#JOBAWARE_CARD_BOARD_STORE=/var/lib/jobaware/store" in (UNITS / "serve-card.env").read_text()
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here")
    for path in UNITS.glob("*.env"):
        shutil.copy(path, tmp_path / path.name)
    template = (UNITS / "jobaware-serve@.service").read_text().replace(INSTALLED, JOBAWARE)
    (tmp_path / "jobaware-serve@.service").write_text(template.replace("/etc/jobaware/", f"{tmp_path}/"))
    (tmp_path / "jobaware-serve@card.service.d").mkdir()
    drop_in = tmp_path / "jobaware-serve@card.service.d" / "board.conf"
    drop_in.write_text(text)
    verify = ["systemd-analyze", "verify", "--man=no", "jobaware-serve@card.service"]
    env = {"PATH": "/usr/bin:/bin", "SYSTEMD_UNIT_PATH": f"{tmp_path}:"}
    checked = subprocess.run(verify, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    drop_in.write_text(text + "Restrt=no\n")  # the drop-in is read: the check can fail
    assert "Unknown key 'Restrt'" in subprocess.run(verify, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                                                    env=env).stderr
