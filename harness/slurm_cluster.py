"""A real one-node Slurm cluster on localhost (slurmctld + slurmd + a private munged), for tests; optionally with
accounting (a private MariaDB and slurmdbd), so that `sacct --json` reports real end states."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
ACCOUNTING_BINARIES = ("slurmdbd", "sacct", "sacctmgr", "mariadbd", "mariadb-install-db")


def missing_binaries(accounting: bool = False) -> list[str]:
    names = BINARIES + (ACCOUNTING_BINARIES if accounting else ())
    found = {b: shutil.which(b) or next((p for p in (f"/usr/sbin/{b}",) if os.path.exists(p)), None) for b in names}
    return [b for b, path in found.items() if path is None]


def require_slurm(accounting: bool = False) -> None:
    """Skip the test where Slurm (with accounting, if asked) is not installed; fail instead where
    JOBAWARE_REQUIRE_SLURM is set, as in CI."""
    import pytest

    missing = missing_binaries(accounting)
    if missing:
        packages = "slurm-wlm slurmdbd mariadb-server munge" if accounting else "slurm-wlm munge"
        reason = f"Slurm is not installed here ({', '.join(missing)} missing); apt-get install {packages}"
        if os.environ.get("JOBAWARE_REQUIRE_SLURM"):
            pytest.fail(reason)
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class SlurmCluster:
    def __init__(self, root: Path, accounting: bool = False, cpus: int | None = None, lua_plugins: bool = False,
                 enforce_memory: bool = False, mail_prog: str | None = None):
        """`cpus`: the node's CPUs as configured (more than the machine has lets sleeping test jobs run side by side);
        `lua_plugins`: load `job_submit.lua` and `cli_filter.lua` from `root` (beside slurm.conf);
        `enforce_memory` (with accounting): memory a consumable resource, so that `OverMemoryKill` kills a job over
        its `--mem` (jobacct_gather/linux checks every second; 10 MiB per CPU unless a job asks); `mail_prog`:
        slurm.conf's MailProg (the program slurmctld runs for a job's `--mail-type` mails)."""
        self.root = root
        self.enforce_memory = enforce_memory
        self.accounting = accounting
        self.cpus = cpus
        self.lua_plugins = lua_plugins
        self.mail_prog = mail_prog
        self.conf = root / "slurm.conf"
        self.socket = root / "munge" / "munge.sock"
        self.procs: list[subprocess.Popen] = []

    @property
    def env(self) -> dict:
        """For Slurm's commands; cli_filter.lua keeps its once-a-minute note in the cluster's folder, not in $HOME."""
        return {**os.environ, "SLURM_CONF": str(self.conf), "XDG_RUNTIME_DIR": str(self.root)}

    def start(self, timeout: float = 60) -> SlurmCluster:
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()  # nothing that started is left behind
            raise

    def _start(self, timeout: float) -> SlurmCluster:
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
        cpus = self.cpus or os.cpu_count() or 1
        overrides = "SlurmdParameters=config_overrides" if self.cpus else ""
        log = open(r / "log" / "daemons.out", "ab")
        accounting = "AccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none"
        if self.accounting:
            accounting = self._start_accounting(log, timeout)
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
SelectTypeParameters={"CR_Core_Memory" if self.enforce_memory else "CR_Core"}
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
{accounting}
MinJobAge=3600
KillWait=2
OverTimeLimit=0
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
{overrides}
{"DefMemPerCPU=10" if self.enforce_memory else ""}
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=60 State=UP
"""
            + ("JobSubmitPlugins=lua\nCliFilterPlugins=lua\n" if self.lua_plugins else "")
            + (f"MailProg={self.mail_prog}\n" if self.mail_prog else "")
        )
        if self.accounting:
            self._add_cluster(timeout)
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

    def _start_accounting(self, log, timeout: float) -> str:
        """A private MariaDB and a slurmdbd on free loopback ports; returns slurm.conf's accounting lines."""
        r = self.root
        db, dbd = _free_port(), _free_port()
        subprocess.run(["mariadb-install-db", f"--datadir={r / 'mysql'}", "--user=root", "--auth-root-authentication-method=normal",
                        "--skip-test-db"], check=True, capture_output=True, timeout=timeout)
        self.procs.append(subprocess.Popen(
            [_which("mariadbd"), "--no-defaults", f"--datadir={r / 'mysql'}", f"--socket={r / 'mysql.sock'}",
             f"--port={db}", "--bind-address=127.0.0.1", "--user=root", f"--pid-file={r / 'mysql.pid'}",
             "--innodb-buffer-pool-size=32M", "--skip-log-bin"], stdout=log, stderr=log))
        dbd_conf = r / "slurmdbd.conf"
        dbd_conf.write_text(f"""AuthType=auth/munge
AuthInfo=socket={self.socket}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={dbd}
SlurmUser=root
LogFile={r / 'log' / 'slurmdbd.log'}
PidFile={r / 'slurmdbd.pid'}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db}
StorageUser=root
StorageLoc=slurm_acct_db
""")
        os.chmod(dbd_conf, 0o600)
        deadline = time.monotonic() + timeout
        while not (r / "mysql.sock").exists():
            if time.monotonic() > deadline or self.procs[-1].poll() is not None:
                raise RuntimeError(f"MariaDB did not come up: {self.logs()}")
            time.sleep(0.5)
        self.procs.append(subprocess.Popen([_which("slurmdbd"), "-D"], env={**self.env, "SLURM_CONF": str(r / "slurm.conf")},
                                           stdout=log, stderr=log))
        return (f"AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n"
                f"AccountingStoragePort={dbd}\nAccountingStoragePass={self.socket}\nJobAcctGatherType=jobacct_gather/linux\nJobAcctGatherFrequency=1\nJobAcctGatherParams=OverMemoryKill")

    def _add_cluster(self, timeout: float) -> None:
        """Register the cluster with slurmdbd (retried while slurmdbd starts)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = subprocess.run(["sacctmgr", "-i", "add", "cluster", "jobaware-test"], env=self.env,
                                  capture_output=True, text=True, timeout=30)
            listed = subprocess.run(["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"], env=self.env,
                                    capture_output=True, text=True, timeout=30)
            if "jobaware-test" in listed.stdout:
                return
            time.sleep(1)
        raise RuntimeError(f"slurmdbd did not take the cluster: {done.stderr} {self.logs()}")

    def logs(self) -> str:
        parts = []
        for name in ("daemons.out", "slurmctld.log", "slurmd.log", "slurmdbd.log"):
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
        for p in reversed(self.procs):  # slurmd, slurmctld, then slurmdbd and MariaDB
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        pid = self.root / "munge" / "munged.pid"
        if pid.exists():
            try:
                os.kill(int(pid.read_text().strip()), 15)
            except (ProcessLookupError, ValueError):
                pass
