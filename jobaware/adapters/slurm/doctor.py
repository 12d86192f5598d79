"""`jobaware slurm doctor`: checks a Slurm deployment of jobaware end to end and says what to fix, one line each.

Each check reads what is there (slurm.conf as written, the plugins beside it, the verdict cache, the service token and
the services' `/readyz` with their identity proof, the store) and changes nothing; a store that does not exist is
not created.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from jobaware import config, identity
from jobaware.adapters.slurm.adapter import Policy
from jobaware.adapters.slurm.plugins import (
    COMPILED,
    DEFAULT_PLUGIN_DIRS,
    read_slurm_conf,
    sbatch_refuses,
    slurm_version,
)
from jobaware.adapters.slurm.verdicts import (
    ACL_GROUP,
    ACL_GROUP_OBJ,
    ACL_MASK,
    ACL_USER,
    HEADER_FILE,
    acl_entries,
    read_cache,
    users_folder,
)
from jobaware.errors import JobawareError
from jobaware.text import redacted

RENDERED = "rendered by `jobaware slurm plugins`"
CACHE_PATH = re.compile(r'^JOBAWARE_CACHE_PATH = "(.*)"$', re.M)
BUILT = re.compile(rb"jobaware cli_filter; slurm 0x([0-9a-f]+); (?:stale (\d+); )?cache ([^\0]*)\0")  # the .so's
# the site's choices in a rendered job_submit.lua, which a rebuild must keep
FIELD = re.compile(r'^local FIELD = "(comment|admin_comment)"', re.M)
STALE_AFTER = re.compile(r"^JOBAWARE_STALE_AFTER = (\d+)", re.M)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str  # what was found, or what to fix


def _plugins(value: str, kind: str) -> set[str]:
    return {p.strip().removeprefix(f"{kind}/") for p in value.split(",") if p.strip()}


def rebuild(conf_path: Path, cache: Path, plugin_dir: Path | None = None, stale_after: bytes | None = None) -> str:
    """The command that writes the plugins again keeping the site's choices (--field and --stale-after as the
    job_submit.lua beside slurm.conf holds them, --stale-after as the compiled filter was built): the command's
    defaults would change them silently."""
    try:
        text = (conf_path.parent / "job_submit.lua").read_text(errors="replace")
    except OSError:
        text = ""
    field, stale = FIELD.search(text), STALE_AFTER.search(text)
    stale_after = stale_after.decode() if stale_after else stale and stale.group(1)
    return " ".join(["run `jobaware slurm plugins", f"--output {conf_path.parent}", f"--cache {cache}",
                     *([f"--field {field.group(1)}"] if field else []),
                     *([f"--stale-after {stale_after}"] if stale_after else []),
                     *([f"--plugin-dir {plugin_dir}"] if plugin_dir else []), "--overwrite`"])


def check_plugins(conf_path: Path, conf: dict[str, str], cache: Path) -> list[Check]:
    """Both plugins named in slurm.conf, their files beside it (or the compiled CLI filter in a PluginDir), made
    by jobaware for this cache (and the compiled one for this Slurm)."""
    checks = []
    for name, option, kind in (("job_submit.lua", "jobsubmitplugins", "job_submit"),
                               ("cli_filter.lua", "clifilterplugins", "cli_filter")):
        option_name = "JobSubmitPlugins" if kind == "job_submit" else "CliFilterPlugins"
        named = _plugins(conf.get(option, ""), kind)
        if kind == "cli_filter" and "jobaware" in named:
            checks += [Check("CliFilterPlugins=jobaware", True, f"named in {conf_path}"),
                       check_compiled(conf_path, conf, cache)]
            continue
        either = " (or `CliFilterPlugins=jobaware`, the compiled filter)" if kind == "cli_filter" else ""
        checks.append(Check(f"{option_name}=lua", "lua" in named, f"named in {conf_path}" if "lua" in named else
                            f"add `{option_name}=lua` to {conf_path}{either}, then `scontrol reconfigure`"))
        path = conf_path.parent / name
        fix = rebuild(conf_path, cache)
        try:
            text = path.read_text(errors="replace")
        except OSError:
            checks.append(Check(name, False, f"{path} missing: {fix}"))
            continue
        found = CACHE_PATH.search(text)
        if RENDERED not in text or found is None:
            checks.append(Check(name, False, f"{path} is not a jobaware plugin: {fix}"))
        elif found.group(1) != str(cache):
            checks.append(Check(name, False, f"{path} reads {found.group(1)}, the adapter writes {cache}: {fix}"))
        else:
            checks.append(Check(name, True, f"{path} reads {cache}"))
    return checks


def check_compiled(conf_path: Path, conf: dict[str, str], cache: Path) -> Check:
    """cli_filter_jobaware.so in a PluginDir folder, built for this cache and for the Slurm installed here (its
    loader refuses another version, and then every sbatch fails)."""
    folders = conf.get("plugindir", "").split(":") if conf.get("plugindir") else DEFAULT_PLUGIN_DIRS
    found = next((Path(f) / COMPILED for f in folders if (Path(f) / COMPILED).is_file()), None)
    built = found and BUILT.search(found.read_bytes())
    fix = rebuild(conf_path, cache, found.parent if found else Path(folders[0]), built and built.group(2))
    if found is None:
        return Check(COMPILED, False, f"not in PluginDir {':'.join(folders)}, so every sbatch fails: {fix}")
    if built is None:
        return Check(COMPILED, False, f"{found} is not jobaware's compiled filter: {fix}")
    number = int(built.group(1), 16)
    version = _release(number >> 16, number >> 8 & 0xFF, number & 0xFF)
    built_cache = built.group(3).decode(errors="replace")
    if built_cache != str(cache):
        return Check(COMPILED, False, f"{found} reads {built_cache}, the adapter writes {cache}: {fix}")
    try:
        running = _release(*slurm_version(conf_path))
    except JobawareError as exc:
        return Check(COMPILED, True, f"{found} reads {cache}, built for Slurm {version} (not compared: {exc})")
    if running != version:
        return Check(COMPILED, False, f"{found} was built for Slurm {version}, Slurm {running} here refuses "
                                      f"it and every sbatch fails; {fix}")
    said = sbatch_refuses(conf_path)
    if said:
        return Check(COMPILED, False, f"{found}: `sbatch --version` fails with it ({said}), and so would every "
                                      f"sbatch; {fix}")
    return Check(COMPILED, True, f"{found} reads {cache}, built for Slurm {version}")


def _release(major: int, minor: int, micro: int) -> str:
    return f"{major}.{minor:02d}.{micro}"  # as Slurm writes it: 22.05.8


def readable_by(path: Path, user: str) -> bool:
    """Whether `user` may read `path` by its mode bits, or its POSIX ACL, and those of the folders above it (root may
    read all)."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return False
    if entry.pw_uid == 0:
        return True
    groups = {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if user in g.gr_mem}

    def allowed(p: Path, bit: int) -> bool:
        st = p.stat()
        if st.st_uid == entry.pw_uid:
            return bool(st.st_mode & (bit << 6))
        acl = acl_entries(p)
        if acl:  # the kernel's order: the named user, then every group that matches, then others
            mask = next((perm for tag, perm, _ in acl if tag == ACL_MASK), 7)
            named = [perm for tag, perm, uid in acl if tag == ACL_USER and uid == entry.pw_uid]
            if named:
                return bool(named[0] & mask & bit)
            matching = [perm for tag, perm, gid in acl if (tag == ACL_GROUP_OBJ and st.st_gid in groups)
                        or (tag == ACL_GROUP and gid in groups)]
            if matching:
                return any(perm & mask & bit for perm in matching)
            return bool(st.st_mode & bit)
        if st.st_gid in groups:
            return bool(st.st_mode & (bit << 3))
        return bool(st.st_mode & bit)

    resolved = path.resolve()
    return allowed(resolved, 4) and all(allowed(folder, 1) for folder in resolved.parents)


def readable_by_everyone(path: Path) -> bool:
    resolved = path.resolve()
    return bool(resolved.stat().st_mode & stat.S_IROTH) and all(
        folder.stat().st_mode & stat.S_IXOTH for folder in resolved.parents)


def check_cache(cache: Path, slurm_user: str, cli_filter: bool, now: float | None = None) -> list[Check]:
    """The cache reads as a whole, is fresh, slurmctld's user may read it, no user may read another's verdicts, and
    with a CLI filter each user of this host may read the header file and their own."""
    now = time.time() if now is None else now
    try:
        read = read_cache(cache)
    except JobawareError as exc:
        fix = "is `jobaware slurm adapt --cache` running?" if not cache.exists() else "the adapter rewrites it each pass"
        return [Check("verdict cache", False, f"{exc} ({fix})")]
    age = int(now - read.created)
    checks = [Check("verdict cache fresh", age <= read.stale_after,
                    f"{cache}: written {age} s ago, {len(read.verdicts)} verdicts (limit {read.stale_after} s)"
                    + ("" if age <= read.stale_after else ": the adapter has not rewritten it; see its log (a "
                       "service down keeps the old cache)"))]
    users = users_folder(cache)
    if not users.is_dir():
        checks.append(Check("user files", False, f"{users} missing: the plugins find no verdicts; upgrade the adapter "
                                                 "and let it pass once"))
        return checks
    header = users / HEADER_FILE
    files = [cache, users, *users.iterdir()]
    unreadable = [str(p) for p in files if not readable_by(p, slurm_user)]
    checks.append(Check(f"readable by SlurmUser {slurm_user}", not unreadable,
                        "cache and user files" if not unreadable else
                        f"{', '.join(unreadable[:3])}: run the adapter as {slurm_user}, who then owns them"))
    theirs = {p: p.name[:-4] for p in users.glob("*.tsv") if not p.name.startswith("#")}
    shared = [str(p) for p in [cache, *theirs] if readable_by_everyone(p)]
    checks.append(Check("verdicts private", not shared, "each user's file readable by that user and SlurmUser alone"
                        if not shared else f"{', '.join(shared[:3])}: readable by every user, who read each other's "
                        "verdicts; keep the cache on a file system with POSIX ACLs (the adapter then writes them "
                        "0600, each user file with an ACL entry for its user)"))
    if cli_filter:
        closed = [str(p) for p in [header] if not p.exists() or not readable_by_everyone(p)]
        closed += [str(p) for p, user in theirs.items() if _known(user) and not readable_by(p, user)]
        checks.append(Check("readable by sbatch users", not closed, f"{header.name} and each user's own file"
                            if not closed else f"{', '.join(closed[:3])}: the CLI filter runs as each user and reads "
                            f"{header.name} and the user's own file; let the adapter rewrite them (upgrade it), or "
                            "drop CliFilterPlugins"))
    return checks


def _known(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True


def check_identity() -> tuple[Check, bytes | None]:
    """The service token is named and sound (`config.service_token`); the check and the token."""
    try:
        token = config.service_token()
    except JobawareError as exc:
        return Check("service identity", False, str(exc)), None
    if token is None:
        return Check("service identity", False, f"{config.TOKEN_FILE_ENV} is not set, so any local user who binds a "
                     "service's port first answers for it: make /etc/jobaware/service.token (root:jobaware 0640, "
                     f"`openssl rand -hex 32`) and set {config.TOKEN_FILE_ENV} to it in /etc/jobaware/credentials.env"), None
    return Check("service identity", True, f"answers proven with the token of {os.environ[config.TOKEN_FILE_ENV]}"), token


def check_services(urls: dict[str, str], token: bytes | None, policy: Policy | None = None,
                   timeout: float = 3.0) -> list[Check]:
    """Each service the deployment names (and the adapter's policy leaves on) answers `/readyz` with 200, proving
    with `token` that it is the deployment's own; a capability the policy switches off is not checked, and one it
    leaves on without a URL is named (a fault when the adapter needs its part for every verdict)."""
    import httpx

    from jobaware import card as cards

    keys = policy.keys() if policy is not None else list(cards.declared())
    checks = []
    with cards.Services(urls, timeout, token) as services:
        for key in keys:
            name = f"JOBAWARE_{key.upper()}_URL"
            if key not in urls:
                required = cards.declared()[key].required
                checks.append(Check(f"service {key}", not required, f"not deployed (no {name}): " + (
                    f"the adapter needs its part for every verdict; set {name}, or switch {key} off in the adapter's "
                    "policy" if required else "the adapter never asks it")))
                continue
            url = urls[key].rstrip("/")
            try:
                status = services.request("GET", f"{url}/readyz").status_code
                ok, said = status == 200, f"HTTP {status}"
            except httpx.HTTPError as exc:
                ok, said = False, type(exc).__name__
            except cards.Unproven:
                checks.append(Check(f"service {key}", False, f"{redacted(url)}/readyz: {identity.NO_PROOF}: another process "
                                    f"answers there; stop it and start `jobaware serve {key}`, or fix {name}"))
                continue
            checks.append(Check(f"service {key}", ok, f"{redacted(url)}/readyz: {said}" + ("" if ok else
                                f": start `jobaware serve {key}` there or point {name} at it")))
    return checks


def check_store(uri: str) -> list[Check]:
    """The store exists, may be shared by the collector and the adapter, and the collector has written to it."""
    from jobaware.store import backend, open_store

    shown = redacted(uri)  # the checks' words never hold a password
    try:
        kind, where = backend(uri)
    except JobawareError as exc:
        return [Check("store", False, str(exc))]
    if kind != "redis" and not Path(where).exists():
        return [Check("store", False, f"{where} does not exist: start `jobaware slurm collect --store {shown}`")]
    if kind == "folder":
        return [Check("store shared", False, f"{where} is a folder store (one writer): the collector and the adapter "
                                             f"cannot share it; `jobaware store copy {shown} sqlite:NEW` and use NEW")]
    try:
        with open_store(uri) as store:
            jobs, checkpoints = store.count(), store.checkpoints()
    except Exception as exc:  # noqa: BLE001 - any backend's failure is the finding
        return [Check("store", False, f"{shown}: {type(exc).__name__}: {redacted(str(exc)[:200])}")]
    ok = bool(checkpoints)
    return [Check("store shared", ok, f"{shown} ({kind}): {jobs} jobs, collector checkpoint for "
                  f"{', '.join(sorted(checkpoints))}" if ok else
                  f"{shown} ({kind}): no collector checkpoint; run `jobaware slurm collect --store {shown}`")]


def check_accounting(conf_path: Path, conf: dict[str, str]) -> list[Check]:
    """Accounting storage and job accounting gather configured; an out-of-memory kill visible to sacct."""
    storage = conf.get("accountingstoragetype", "accounting_storage/none")
    gather = conf.get("jobacctgathertype", "jobacct_gather/none")
    checks = [
        Check("AccountingStorageType", not storage.endswith("/none"),
              storage if not storage.endswith("/none") else f"{storage}: sacct has no end states; set "
              f"AccountingStorageType=accounting_storage/slurmdbd in {conf_path}"),
        Check("JobAcctGatherType", not gather.endswith("/none"),
              gather if not gather.endswith("/none") else f"{gather}: no memory use recorded; set "
              f"JobAcctGatherType=jobacct_gather/cgroup (or /linux) in {conf_path}"),
    ]
    cgroup = "cgroup" in conf.get("taskplugin", "")
    constrained = False
    if cgroup:
        try:
            cgroup_conf = (conf_path.parent / "cgroup.conf").read_text(errors="replace")
            constrained = re.search(r"^\s*ConstrainRAMSpace\s*=\s*yes", cgroup_conf, re.M | re.I) is not None
        except OSError:
            pass
    over_memory = "overmemorykill" in conf.get("jobacctgatherparams", "").lower() and not gather.endswith("/none")
    how = "task/cgroup with ConstrainRAMSpace=yes" if constrained else "JobAcctGatherParams=OverMemoryKill" \
        if over_memory else ""
    checks.append(Check("OOM visible", bool(how), how or "no memory limit is enforced, so no job ends OUT_OF_MEMORY: "
                        "TaskPlugin=task/cgroup with ConstrainRAMSpace=yes in cgroup.conf, or "
                        "JobAcctGatherParams=OverMemoryKill"))
    return checks


def doctor(conf_path: Path, cache: Path, store: str, urls: dict[str, str], now: float | None = None,
           policy: Policy | None = None) -> list[Check]:
    """Every check, in the order an admin fixes them; the services as `policy` (the adapter's) leaves them on."""
    conf = read_slurm_conf(conf_path)
    cli_filter = bool({"lua", "jobaware"} & _plugins(conf.get("clifilterplugins", ""), "cli_filter"))
    identified, token = check_identity()
    return [*check_plugins(conf_path, conf, cache),
            *check_cache(cache, conf.get("slurmuser", "root"), cli_filter, now),
            identified, *check_services(urls, token, policy), *check_store(store), *check_accounting(conf_path, conf)]
