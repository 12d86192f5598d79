"""`jobaware slurm collect|export|adapt|plugins`, `jobaware card`, `jobaware report live`, and the old `jobaware
collect slurm` as a hidden alias."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Literal

import typer

from adapters.slurm.plugins import DEFAULT_CACHE
from jobaware.cli_contract import APPEND, FILE, FOLDER, OUTPUT, SERVICE, STORE, option
from jobaware.console import err, out
from jobaware.errors import JobawareError

slurm_app = typer.Typer(no_args_is_help=True, help="The Slurm side: collect jobs into a store, write verdicts back, the plugins.")

StoreOption = Annotated[str, typer.Option("--store", metavar="STORE", help="job store: a folder (created when missing) "
                                          "or redis://host:port/db")]
ExistingStore = Annotated[str, option("--store", role=STORE, help="job store: a folder or redis://host:port/db")]


def _logging(name: str) -> Path:
    """Library and collector logs into a file under JOBAWARE_HOME/logs; returns its path."""
    import logging

    from jobaware import config

    path = config.logs_dir() / f"{name}.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    return path


def run_collector(store_uri: str, interval: float, polls: int | None, notices_uri: str | None, cluster: str | None,
                  max_calls: int, timeout: float) -> int:
    """Collect into the store; a line per poll on stderr. Returns the number of polls."""
    import signal
    import threading

    from adapters.slurm.collector import Collector, Slurm, cluster_name
    from adapters.slurm.notices import open_notices
    from jobaware.store import open_store

    if interval <= 0 or (polls is not None and polls < 1) or max_calls < 0 or timeout <= 0:
        raise JobawareError("expected --interval > 0, --polls >= 1, --max-calls >= 0 and --timeout > 0")
    log = _logging("slurm-collect")
    slurm = Slurm(timeout=timeout)
    cluster = cluster or cluster_name(slurm)
    if not cluster:
        raise JobawareError(f"scontrol show config gave no ClusterName; is Slurm reachable? pass --cluster (log: {log})")
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGTERM, signal.SIGINT)}

    def shown(number: int, result, seconds: float) -> None:
        status = "ok" if not result.failed else "retry next: " + ", ".join(result.failed[:3])
        err.print(f"poll {number}: {result.seen} listed, {result.new} new, {result.finished} finished, "
                  f"{result.scripts} scripts, {result.calls} calls, {status} ({seconds:.1f} s)", highlight=False)

    with open_store(store_uri) as store:
        notices = open_notices(notices_uri) if notices_uri else None
        try:
            return Collector(store, cluster, slurm, max_calls).run(polls, interval, notices, stop, shown)
        finally:
            if notices is not None:
                notices.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)


@slurm_app.command("collect")
def collect(
    store: StoreOption,
    interval: Annotated[float, typer.Option(min=0.1, help="seconds between polls")] = 60.0,
    polls: Annotated[int, typer.Option(min=1, help="how many polls (bounded)")] = 1,
    forever: Annotated[bool, typer.Option("--forever", help="poll until stopped (SIGTERM / Ctrl-C)")] = False,
    notices: Annotated[str, typer.Option(help="new-job notices: redis://host:port/db?stream=NAME or kafka://host:port/TOPIC")] = "",
    cluster: Annotated[str, typer.Option(help="cluster name in the store (default: Slurm's ClusterName)")] = "",
    max_calls: Annotated[int, typer.Option(min=0, help="scontrol calls per interval at most (beside one squeue and two sacct)")] = 20,
    timeout: Annotated[float, typer.Option(min=0.1, help="seconds each Slurm command may take")] = 30.0,
):
    """Poll Slurm (squeue, sacct, scontrol) into the job store: each job once, with its states, script and end.

    Example: jobaware slurm collect --store /var/lib/jobaware/store --polls 3 --interval 60
    """
    done = run_collector(store, interval, None if forever else polls, notices or None, cluster or None, max_calls, timeout)
    out.print(f"{done} poll(s) into {store}", highlight=False)


@slurm_app.command("export")
def export(
    store: ExistingStore,
    out_path: Annotated[Path, option("--output", "-o", role=OUTPUT, help="NREL-format CSV to write")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing output")] = False,
):
    """Every finished job of the store, once, as an NREL-format CSV (the format the failure readers take). A store
    with no finished job writes nothing and says so.

    Example: jobaware slurm export --store /var/lib/jobaware/store --output jobs.csv
    """
    from jobaware.errors import InputError
    from jobaware.failure.from_store import export as export_jobs
    from jobaware.outputs import atomic_path
    from jobaware.store import open_store

    with open_store(store) as opened:
        if not any(record["final"] for record in opened.records()):
            raise InputError(f"{store}: no finished job in this store yet; nothing to export")
        with atomic_path(out_path, ".csv") as written:
            count = export_jobs(opened, written)
    out.print(f"wrote {count} finished job(s) to {out_path}")


def _urls(services: list[str], failure: str = "", resource: str = "", similarity: str = "") -> dict[str, str]:
    """The service of each capability the job card asks: `--service KEY=URL` (repeatable), the old `--failure URL`
    style, else $JOBAWARE_<KEY>_URL or the demo's port."""
    from jobaware import capabilities, config
    from jobaware.errors import UsageError

    keys = capabilities.keys()
    given = {"failure": failure, "resource": resource, "similarity": similarity}
    for item in services:
        key, sep, url = item.partition("=")
        if not sep or key not in given:
            raise UsageError(f"--service {item!r}: expected KEY=URL with KEY one of {', '.join(given)}")
        given[key] = url
    return {key: url or config.service_url(key, keys) for key, url in given.items()}


Services = Annotated[list[str], option("--service", role=SERVICE, metavar="KEY=URL",
                                       help="a capability's service, repeatable: failure=URL, resource=URL, "
                                            "similarity=URL (default: $JOBAWARE_<KEY>_URL or the demo's port)")]
FailureURL = Annotated[str, option("--failure", role=SERVICE, hidden=True, help="old spelling of --service failure=URL")]
ResourceURL = Annotated[str, option("--resource", role=SERVICE, hidden=True, help="old spelling of --service resource=URL")]
SimilarityURL = Annotated[str, option("--similarity", role=SERVICE, hidden=True, help="old spelling of --service similarity=URL")]


@slurm_app.command("adapt")
def adapt(
    store: StoreOption,
    policy: Annotated[Path | None, option(role=FILE, help="policy YAML (comment, hold, pairing, rate limit, timeouts)")] = None,
    act: Annotated[bool, typer.Option("--act", help="act on Slurm (scontrol update/hold); without it, a dry run")] = False,
    audit: Annotated[Path | None, option(role=APPEND, help="audit log (JSON Lines; default JOBAWARE_HOME/audit/slurm-adapt.jsonl)")] = None,
    cache: Annotated[Path | None, option(role=APPEND, help="verdict cache for job_submit.lua and cli_filter.lua, rewritten each pass")] = None,
    interval: Annotated[float, typer.Option(min=0.1, help="seconds between passes")] = 30.0,
    passes: Annotated[int, typer.Option(min=1, help="how many passes (bounded)")] = 1,
    forever: Annotated[bool, typer.Option("--forever", help="pass until stopped (SIGTERM / Ctrl-C)")] = False,
    cluster: Annotated[str, typer.Option(help="cluster name in the store (default: Slurm's ClusterName)")] = "",
    service: Services = [],  # noqa: B006
    failure: FailureURL = "", resource: ResourceURL = "", similarity: SimilarityURL = "",
    timeout: Annotated[float, typer.Option(min=0.1, help="seconds each Slurm command may take")] = 30.0,
):
    """For each pending job: its verdict (failure risk, binding resource) kept in the store and audited, and by
    the policy written into its comment or acted on. Dry-run unless --act; fails open when services are down.

    Example: jobaware slurm adapt --store /var/lib/jobaware/store --passes 1
    """
    import signal
    import threading

    from adapters.slurm.adapter import Adapter, read_policy
    from adapters.slurm.collector import Slurm, cluster_name
    from jobaware import config
    from jobaware.store import open_store

    if interval <= 0 or passes < 1 or timeout <= 0:
        raise JobawareError("expected --interval > 0, --passes >= 1 and --timeout > 0")
    chosen = read_policy(policy)
    log = _logging("slurm-adapt")
    slurm = Slurm(timeout=timeout)
    cluster = cluster or cluster_name(slurm)
    if not cluster:
        raise JobawareError(f"scontrol show config gave no ClusterName; is Slurm reachable? pass --cluster (log: {log})")
    audit = audit or config.audit_dir() / "slurm-adapt.jsonl"
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    mode = "acting" if act else "dry run (no --act): nothing is written into Slurm"
    err.print(f"adapter on {cluster}, {mode}; audit in {audit}", highlight=False, soft_wrap=True)
    done = 0
    with open_store(store) as opened:
        adapter = Adapter(opened, cluster, _urls(service, failure, resource, similarity), chosen, act=act, audit=audit,
                          cache=cache, slurm=slurm)
        while not stop.is_set() and (forever or done < passes):
            started = time.monotonic()
            result = adapter.run_pass()
            done += 1
            status = "ok" if not result.missing else "waiting for: " + ", ".join(result.missing)
            err.print(f"pass {done}: {result.pending} pending, {result.judged} new verdicts, {result.acted} acts, "
                      f"{result.deferred} deferred, {status} ({time.monotonic() - started:.1f} s)", highlight=False)
            if forever or done < passes:
                stop.wait(max(0.0, interval - (time.monotonic() - started)))
    out.print(f"{done} pass(es); audit in {audit}", highlight=False, soft_wrap=True)


def card(
    job_id: Annotated[int, typer.Argument(min=1, metavar="JOBID", help="a pending or running Slurm job")],
    similarity_jobid: Annotated[int | None, typer.Option("--similarity-jobid", min=1, help="the job's id in the similarity pool, where its I/O codings are")] = None,
    gateway: Annotated[str, option(role=SERVICE, help="ask the card gateway at this URL instead of the services")] = "",
    service: Services = [],  # noqa: B006
    failure: FailureURL = "", resource: ResourceURL = "", similarity: SimilarityURL = "",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (errors too)")] = False,
):
    """One answer for one job: failure risk and its likely kind, the script's binding resource, similar past jobs;
    each part with its model version, or the reason it is missing.

    Example: jobaware card 4242 --gateway http://127.0.0.1:3010
    """
    import httpx

    from adapters.slurm.collector import Slurm
    from jobaware import card as cards
    from jobaware import config
    from jobaware.console import show

    slurm = Slurm(timeout=30)
    listed = slurm.jobs("squeue", "--json", "--states=all", f"--jobs={job_id}")
    record = next((job for job in listed or [] if job.get("job_id") == job_id), None)
    if record is None:
        raise JobawareError(f"job {job_id}: not known to squeue (pending or running jobs have cards)")
    script = slurm.run("scontrol", "write", "batch_script", str(job_id), "-")
    if gateway:
        try:
            response = httpx.post(f"{gateway.rstrip('/')}/card", json={
                "job_id": job_id, "job": record, "script": script, "similarity_jobid": similarity_jobid}, timeout=60)
        except httpx.HTTPError as exc:
            raise JobawareError(f"card gateway {gateway}: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise JobawareError(f"card gateway {gateway}: HTTP {response.status_code}: {response.text[:300]}")
        answer = response.json()
    else:
        answer = cards.make_card(job_id, record, script, _urls(service, failure, resource, similarity),
                                 similarity_jobid=similarity_jobid)
        cards.audit({"action": "card", "job_id": job_id, "short": answer["short"], "missing": answer["missing"],
                     "versions": cards.versions(answer)}, config.audit_dir() / "card.jsonl")
    if as_json:
        show(answer, True)
        return
    rows = [{"part": name, "status": part["status"], "answer": _answer_text(name, part),
             "model version": part.get("model_version") or ""} for name, part in answer["parts"].items()]
    show(answer, False, rows, title=f"job {job_id}: {answer['short']}")


def _answer_text(name: str, part: dict) -> str:
    if part["status"] != "ok":
        return part["reason"] or ""
    if name == "failure":
        threshold = f" (threshold {part['threshold']:.2f})" if part.get("threshold") is not None else ""
        return f"p(fail) {part['p_fail']:.2f}, most likely {part['likely']}{threshold}"
    if name == "resource":
        pairs = f"; pair with {', '.join(part['pair_with'])}" if part.get("pair_with") else ""
        return f"{part['binding']} ({part['probabilities'].get(part['binding'], 0):.2f}){pairs}"
    return ", ".join(f"{s['jobid']} ({s['similarity']:.2f})" for s in part["similar"])


def live(store: ExistingStore, as_json: Annotated[bool, typer.Option("--json", help="print JSON (errors too)")] = False):
    """How the failure model does on live jobs: its verdicts joined with the jobs' real ends, by week and version.

    Example: jobaware report live --store /var/lib/jobaware/store
    """
    from jobaware.console import show
    from jobaware.failure.live import live_report
    from jobaware.store import open_store

    with open_store(store) as opened:
        rows = live_report(opened)
    if not rows and not as_json:
        out.print("no finished job with a verdict yet: run `jobaware slurm adapt` beside `jobaware slurm collect`")
        return
    show(rows, as_json, rows, title="failure on live jobs")


@slurm_app.command("plugins")
def plugins(
    out_dir: Annotated[Path, option("--output", "-o", role=FOLDER, help="folder for job_submit.lua and cli_filter.lua")],
    cache: Annotated[str, typer.Option(help="absolute path of the verdict cache the adapter writes")] = DEFAULT_CACHE,
    field: Annotated[Literal["comment", "admin_comment"], typer.Option(help="where the verdict goes")] = "comment",
    stale_after: Annotated[int, typer.Option(min=1, help="seconds after which the plugins ignore the cache")] = 3600,
    advise_above: Annotated[float, typer.Option(min=0, max=1, help="failure risk from which cli_filter advises")] = 0.5,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace existing files")] = False,
):
    """Write job_submit.lua and cli_filter.lua (put them beside slurm.conf; see the README).

    Example: jobaware slurm plugins --output /etc/slurm
    """
    from adapters.slurm.plugins import write_plugins

    for path in write_plugins(out_dir, force=overwrite, cache=cache, field=field, stale_after=stale_after,
                              advise_above=advise_above):
        err.print(f"wrote {path}", highlight=False)


def collect_alias(
    source: Annotated[Literal["slurm"], typer.Argument(metavar="SOURCE", help="slurm")],
    out_path: Annotated[Path, option("--output", "-o", role=OUTPUT, help="NREL-format CSV of the finished jobs")],
    polls: Annotated[int, typer.Option(min=1, help="how many polls (bounded)")] = 1,
    interval: Annotated[float, typer.Option(min=0.1, help="seconds between polls")] = 60.0,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing output")] = False,
):
    """Deprecated: `jobaware slurm collect` into a local store beside --output, then `jobaware slurm export`.

    Example: jobaware collect slurm --output jobs.csv
    """
    store = str(out_path.with_name(out_path.name + ".store"))
    err.print(f"`jobaware collect slurm` is deprecated: use `jobaware slurm collect --store {store}` and "
              f"`jobaware slurm export`", highlight=False)
    run_collector(store, interval, polls, None, None, 20, 30.0)
    export(store, out_path, overwrite)


def register(app: typer.Typer, report_app: typer.Typer) -> None:
    app.add_typer(slurm_app, name="slurm")
    app.command("collect", hidden=True)(collect_alias)
    app.command("card")(card)
    report_app.command("live")(live)
