"""A real one-node Slurm cluster on localhost (slurmctld + slurmd + a private munged), for tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")


def missing_binaries() -> list[str]:
    found = {b: shutil.which(b) or next((p for p in (f"/usr/sbin/{b}",) if os.path.exists(p)), None) for b in BINARIES}
    return [b for b, path in found.items() if path is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class SlurmCluster:
    def __init__(self, root: Path, lua_plugins: bool = False):
        """`lua_plugins`: load `job_submit.lua` and `cli_filter.lua` from `root` (beside slurm.conf)."""
        self.root = root
        self.lua_plugins = lua_plugins
        self.conf = root / "slurm.conf"
        self.socket = root / "munge" / "munge.sock"
        self.procs: list[subprocess.Popen] = []

    @property
    def env(self) -> dict:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self, timeout: float = 60) -> SlurmCluster:
        r = self.root
        for d in ("munge", "state", "spool", "log", "jobs"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.chmod(r / "munge", 0o700)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        subprocess.run(
            [_which("munged"), "--force", f"--socket={self.socket}", f"--key-file={key}",
             f"--pid-file={r / 'munge' / 'munged.pid'}", f"--log-file={r / 'log' / 'munged.log'}",
             f"--seed-file={r / 'munge' / 'munged.seed'}"],
            check=True, capture_output=True,
        )
        ctld, slurmd = _free_port(), _free_port()
        cpus = os.cpu_count() or 1
        self.conf.write_text(
            f"""ClusterName=jobaware-test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
StateSaveLocation={r / 'state'}
SlurmdSpoolDir={r / 'spool'}
SlurmctldPidFile={r / 'slurmctld.pid'}
SlurmdPidFile={r / 'slurmd.pid'}
SlurmctldLogFile={r / 'log' / 'slurmctld.log'}
SlurmdLogFile={r / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=3600
KillWait=2
OverTimeLimit=0
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=60 State=UP
"""
            + ("JobSubmitPlugins=lua\nCliFilterPlugins=lua\n" if self.lua_plugins else "")
        )
        log = open(r / "log" / "daemons.out", "ab")
        self.procs.append(subprocess.Popen([_which("slurmctld"), "-D", "-c", "-i"], env=self.env, stdout=log, stderr=log))
        self.procs.append(subprocess.Popen([_which("slurmd"), "-D", "-N", "localhost"], env=self.env, stdout=log, stderr=log))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip() in ("idle", "mix", "alloc"):
                return self
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"Slurm did not come up: {self.logs()}")

    def logs(self) -> str:
        parts = []
        for name in ("daemons.out", "slurmctld.log", "slurmd.log"):
            path = self.root / "log" / name
            if path.exists():
                parts.append(f"--- {name}\n" + path.read_text()[-2000:])
        return "\n".join(parts)

    def sbatch(self, script: str, *args: str) -> int:
        path = self.root / "jobs" / f"job{len(list((self.root / 'jobs').iterdir()))}.sh"
        path.write_text(script)
        out = subprocess.run(
            ["sbatch", "--parsable", f"--chdir={self.root / 'jobs'}", *args, str(path)],
            env=self.env, capture_output=True, text=True, check=True,
        )
        return int(out.stdout.strip().split(";")[0])

    def run(self, *command: str) -> str:
        return subprocess.run(list(command), env=self.env, capture_output=True, text=True, check=True).stdout

    def stop(self) -> None:
        # cancel what still runs, so no job step outlives its cluster
        subprocess.run(["scancel", "--full", f"--user={os.getuid()}"], env=self.env, capture_output=True, timeout=30)
        time.sleep(1)
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        pid = self.root / "munge" / "munged.pid"
        if pid.exists():
            try:
                os.kill(int(pid.read_text().strip()), 15)
            except (ProcessLookupError, ValueError):
                pass
