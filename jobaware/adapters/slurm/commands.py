"""`jobaware slurm collect|adapt|plugins|doctor`, `jobaware card`, and the old `jobaware collect slurm` as a hidden alias.
(`jobaware failure export|accuracy` are the failure slice's own commands.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Literal

import typer

from jobaware.adapters.slurm.plugins import DEFAULT_CACHE
from jobaware.cli_contract import APPEND, FILE, FOLDER, OUTPUT, SERVICE, STORE, option, when_option
from jobaware.console import err, notice, out
from jobaware.errors import JobawareError, UsageError
from jobaware.text import redacted

slurm_app = typer.Typer(no_args_is_help=True, help="The Slurm side: collect jobs into a store, write verdicts back, the "
                        "plugins, the doctor.")

StoreOption = Annotated[str, typer.Option("--store", envvar="JOBAWARE_STORE", metavar="STORE", help="the site's job "
                                          "store (env JOBAWARE_STORE): a folder (SQLite, created when missing) or "
                                          "redis://host:port/db")]
MetricsPort = Annotated[int | None, typer.Option("--metrics-port", min=0, max=65535, help="serve Prometheus metrics "
                                                "at http://HOST:PORT/metrics (0: a free port; default: none)")]
MetricsHost = Annotated[str, typer.Option("--metrics-host", help="the address --metrics-port listens on")]


def _logging(name: str) -> Path:
    """Library and collector logs into a file under JOBAWARE_HOME/logs; returns its path."""
    import logging

    from jobaware import config
    from jobaware.logs import file_handler

    path = config.logs_dir() / f"{name}.log"
    handler = file_handler(path, "%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    return path


WAIT_SECONDS = 10.0  # between two asks of a daemon waiting for Slurm to answer


def slurm_cluster(slurm, given: str | None, log: Path, stop=None, interval: float = WAIT_SECONDS) -> str | None:
    """The cluster's name: `given`, else Slurm's ClusterName. A daemon (`stop`, the event that ends it) started before
    slurmctld answers waits for it, saying so once, and asks again every `interval` seconds (None: stopped while
    waiting); a bounded run is refused in one line."""
    from jobaware.adapters.slurm.collector import cluster_name

    if given:
        return given
    said = False
    while not (name := cluster_name(slurm)):
        why = slurm.error or "no ClusterName in its answer"
        if stop is not None and stop.is_set():
            return None
        if stop is None:
            raise JobawareError(f"scontrol show config: {why}; is Slurm reachable? pass --cluster (log: {log})")
        if not said:
            err.print(f"waiting for Slurm to answer (scontrol show config: {why}); asking every {interval:g} s",
                      highlight=False, soft_wrap=True)
            said = True
        if stop.wait(interval):
            return None
    return name


def _stop_on_signals():
    """An event set by SIGTERM or SIGINT (a daemon's end), and the handlers it replaced."""
    import signal
    import threading

    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGTERM, signal.SIGINT)}
    return stop, previous


def run_collector(store_uri: str, interval: float, polls: int | None, notices_uri: str | None, cluster: str | None,
                  max_calls: int, timeout: float, metrics_port: int | None = None,
                  metrics_host: str = "127.0.0.1") -> int:
    """Collect into the store; a line per poll on stderr; with `metrics_port`, its series served there. Returns the
    number of polls. Polling until stopped (`polls` None), it waits for a Slurm that does not answer yet."""
    import signal

    from prometheus_client import CollectorRegistry

    from jobaware import metrics
    from jobaware.adapters.slurm.collector import Slurm

    if interval <= 0 or (polls is not None and polls < 1) or max_calls < 0 or timeout <= 0:
        raise JobawareError("expected --interval > 0, --polls >= 1, --max-calls >= 0 and --timeout > 0")
    log = _logging("slurm-collect")
    series = metrics.Group(metrics.COLLECTOR, CollectorRegistry())
    slurm = Slurm(timeout=timeout, series=series)
    stop, previous = _stop_on_signals()
    exposition = metrics.serve(series.registry, metrics_port, metrics_host)
    try:
        cluster = slurm_cluster(slurm, cluster, log, stop if polls is None else None, min(interval, WAIT_SECONDS))
        return 0 if cluster is None else _collect(store_uri, cluster, slurm, max_calls, polls, interval, notices_uri,
                                                  stop, series)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if exposition is not None:
            exposition.close()


def _collect(store_uri: str, cluster: str, slurm, max_calls: int, polls: int | None, interval: float,
             notices_uri: str | None, stop, series) -> int:
    from jobaware.adapters.slurm.collector import Collector
    from jobaware.adapters.slurm.notices import open_notices
    from jobaware.store import open_store

    def shown(number: int, result, seconds: float) -> None:
        status = "ok" if not result.failed else "retry next: " + ", ".join(result.failed[:3])
        err.print(f"poll {number}: {result.seen} listed, {result.new} new, {result.finished} finished, "
                  f"{result.scripts} scripts, {result.calls} calls, {status} ({seconds:.1f} s)", highlight=False)

    with open_store(store_uri) as store:
        notices = open_notices(notices_uri) if notices_uri else None
        try:
            return Collector(store, cluster, slurm, max_calls, series=series).run(polls, interval, notices, stop, shown)
        finally:
            if notices is not None:
                notices.close()


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
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
):
    """Poll Slurm into the job store: each job once, with its states, script and end.

    It asks squeue, sacct and scontrol. With --forever (a daemon), started before Slurm answers, it waits for it,
    saying so once. With --metrics-port, Prometheus metrics (polls, jobs stored, the lag behind squeue, Slurm command
    failures).

    Example: jobaware slurm collect --store /var/lib/jobaware/store --polls 3 --interval 60
    """
    done = run_collector(store, interval, None if forever else polls, notices or None, cluster or None, max_calls,
                         timeout, metrics_port, metrics_host)
    out.print(f"{done} poll(s) into {redacted(store)}", highlight=False)


def _urls(given: list[str]) -> dict[str, str]:
    """The services of the capabilities with a card part: `--service KEY=URL`, else JOBAWARE_<KEY>_URL; one named by
    neither is not deployed (never asked)."""
    from jobaware import card

    urls = {}
    for item in given:
        key, sep, url = item.partition("=")
        if not sep or not url or key not in card.declared():
            raise UsageError(f"--service {item!r}: expected KEY=URL with KEY one of {', '.join(card.declared())}")
        urls[key] = url
    return card.service_urls(urls)


ServiceURLs = Annotated[list[str], option("--service", role=SERVICE, metavar="KEY=URL",
                                          help="a capability's service, repeatable: KEY=URL (default: "
                                               "$JOBAWARE_<KEY>_URL; neither: not deployed, never asked)")]


@slurm_app.command("adapt")
def adapt(
    store: StoreOption,
    policy: Annotated[Path | None, option(role=FILE, help="policy YAML or TOML (comment, hold, capabilities, rate limit, timeouts)")] = None,
    act: Annotated[bool, typer.Option("--act", help="act on Slurm (scontrol update/hold); without it, a dry run")] = False,
    audit: Annotated[Path | None, option(role=APPEND, help="a JSON Lines audit instead of the store's stream slurm.adapt")] = None,
    cache: Annotated[Path | None, option(role=APPEND, help="verdict cache for job_submit.lua and cli_filter.lua, rewritten each pass")] = None,
    interval: Annotated[float, typer.Option(min=0.1, help="seconds between passes")] = 30.0,
    passes: Annotated[int, typer.Option(min=1, help="how many passes (bounded)")] = 1,
    forever: Annotated[bool, typer.Option("--forever", help="pass until stopped (SIGTERM / Ctrl-C)")] = False,
    cluster: Annotated[str, typer.Option(help="cluster name in the store (default: Slurm's ClusterName)")] = "",
    service: ServiceURLs = [],  # noqa: B006 - typer reads the default, never changes it
    timeout: Annotated[float, typer.Option(min=0.1, help="seconds each Slurm command may take")] = 30.0,
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
    live_every: Annotated[float, typer.Option(min=10, help="with --metrics-port: seconds between computations of "
                                              "each capability's live accuracy (as `jobaware report live`)")] = 900.0,
):
    """Give each pending job its card: kept in the store and, as the policy says, written or acted on.

    The card (every capability with a card part) is kept as a verdict and audited, and by the policy written into
    the job's comment or acted on. Dry-run unless --act; fails open when services are down; with --forever, started
    before Slurm answers, it waits for it. With --metrics-port, Prometheus metrics (verdicts, jobs deferred, acts done
    and refused, the services' back-off, the verdict cache's age and size, each capability's flagged share and live
    accuracy).

    Example: jobaware slurm adapt --store /var/lib/jobaware/store --passes 1
    """
    from prometheus_client import CollectorRegistry

    from jobaware import live, metrics
    from jobaware.adapters.slurm.adapter import PendingJobAdapter, read_policy
    from jobaware.adapters.slurm.collector import Slurm
    from jobaware.store import open_store

    if interval <= 0 or passes < 1 or timeout <= 0:
        raise JobawareError("expected --interval > 0, --passes >= 1 and --timeout > 0")
    chosen = read_policy(policy)
    log = _logging("slurm-adapt")
    slurm = Slurm(timeout=timeout)
    stop, _ = _stop_on_signals()
    cluster = slurm_cluster(slurm, cluster, log, stop if forever else None, min(interval, WAIT_SECONDS))
    if cluster is None:
        return
    audited = audit or f"{redacted(store)} (stream slurm.adapt)"
    mode = "acting" if act else "dry run (no --act): nothing is written into Slurm"
    done = 0
    urls = _urls(service)
    series = metrics.Group(metrics.ADAPTER + metrics.LIVE, CollectorRegistry())
    exposition = metrics.serve(series.registry, metrics_port, metrics_host)
    exporter = live.Exporter(series, store, live_every) if exposition is not None else None
    try:
        with open_store(store) as opened, PendingJobAdapter(opened, cluster, urls, chosen, act=act, audit=audit,
                                                            cache=cache, slurm=slurm, series=series) as adapter:
            unverified = "" if adapter.services.verified else "; answers NOT verified (no JOBAWARE_SERVICE_TOKEN_FILE)"
            err.print(f"adapter on {cluster}, {mode}; asking {', '.join(adapter.keys) or 'no service'}{unverified}; "
                      f"audit in {audited}", highlight=False, soft_wrap=True)
            while not stop.is_set() and (forever or done < passes):
                started = time.monotonic()
                result = adapter.run_pass()
                done += 1
                status = "ok" if not result.missing else "waiting for: " + ", ".join(result.missing)
                cached = "" if cache is None else "; cache not rewritten" if result.cached is None else \
                    f"; {result.cached} cached"
                err.print(f"pass {done}: {result.pending} pending, {result.judged} new verdicts, {result.acted} acts, "
                          f"{result.deferred} deferred, {status}{cached} ({time.monotonic() - started:.1f} s)",
                          highlight=False)
                if forever or done < passes:
                    stop.wait(max(0.0, interval - (time.monotonic() - started)))
    finally:
        if exporter is not None:
            exporter.close()
            exposition.close()
    out.print(f"{done} pass(es); audit in {audited}", highlight=False, soft_wrap=True)


JobId = Annotated[str, typer.Argument(metavar="JOBID", help="a Slurm job: 492, an array task 4_92, or tasks 4_[1-3]; "
                                      "pending or running, or with --store finished")]
SimilarityJobid = Annotated[int | None, typer.Option("--similarity-jobid", min=1, help="the job's id in the similarity "
                                                     "pool, where its I/O codings are")]
Gateway = Annotated[str, option(role=SERVICE, help="ask the card gateway at this URL instead of the services")]
FinishedStore = Annotated[str, option("--store", role=STORE, envvar="JOBAWARE_STORE", help="the site's job store (env "
                                      "JOBAWARE_STORE): where the card of a job squeue no longer lists is read")]
Since = Annotated[str, when_option("--since", help="with --store: look for a finished job among the jobs submitted "
                                   "from then on only, newest first (the store has no index by job id): 30d, 12h, "
                                   "2w ago, a date 2026-01-31, or all")]
Cluster = Annotated[str, typer.Option(help="with --store: the cluster's name in the store (default: Slurm's "
                                      "ClusterName, else every cluster)")]
CardJson = Annotated[bool, typer.Option("--json", help="print JSON (a list for several array tasks; errors too)")]


def card(
    job_id: JobId,
    similarity_jobid: SimilarityJobid = None,
    gateway: Gateway = "",
    service: ServiceURLs = [],  # noqa: B006 - typer reads the default, never changes it
    part: Annotated[list[str], typer.Option("--part", metavar="KEY", help="only this capability's part, "
                                            "repeatable: one line each (default: the whole card)")] = [],  # noqa: B006
    store: FinishedStore = "",
    since: Since = "30d",
    cluster: Cluster = "",
    as_json: CardJson = False,
):
    """One answer for one job: a part per capability, each with its model version or why it is missing.

    Today's parts: failure risk, the script's binding resource, similar past jobs, when it is likely to start, ...
    Array tasks still pending share their array's record, so they share its card. With --part KEY, only that part,
    in one line (`jobaware card 4242 --part KEY`, which `jobaware KEY 4242` prints too); exits 1 when a part asked
    for has no answer (its service down, refusing or failing).

    A job squeue no longer lists (finished) has, with --store, the card the adapter kept for it before it ran beside
    what happened: its end, exit code and signal, run time and use, and each part judged against that end (with
    --json: the kept card and `happened`). The store is searched newest first among the jobs submitted since --since
    (default 30d ago).

    Example: jobaware card 4242 --gateway http://127.0.0.1:3010
    """
    from jobaware import card as cards

    unknown = [key for key in part if key not in cards.declared()]
    if unknown:
        raise UsageError(f"--part {unknown[0]!r}: expected one of {', '.join(cards.declared())}")
    show_cards(job_id, similarity_jobid, gateway, service, list(dict.fromkeys(part)) or None, store, since, cluster,
               as_json)


def part_command(key: str, question: str):
    """`jobaware <key> JOBID`: capability `key`'s part of a job's card, in one line, exactly as `jobaware card JOBID
    --part <key>` prints it (the same options; the same code)."""
    def one_part(
        job_id: JobId,
        similarity_jobid: SimilarityJobid = None,
        gateway: Gateway = "",
        service: ServiceURLs = [],  # noqa: B006 - typer reads the default, never changes it
        store: FinishedStore = "",
        since: Since = "30d",
        cluster: Cluster = "",
        as_json: CardJson = False,
    ):
        show_cards(job_id, similarity_jobid, gateway, service, [key], store, since, cluster, as_json)

    one_part.__doc__ = f"""{question[0].upper() + question[1:]}

    For one job, the {key} part of its card in one line, as `jobaware card JOBID --part {key}` prints it: squeue read
    live and the {key} service asked (--service {key}=URL, else $JOBAWARE_{key.upper()}_URL, or the card gateway with
    --gateway); a job squeue no longer lists, the part the adapter kept for it, with --store. A job that cannot have
    the part says why in its line; exits 1 when the part has no answer (its service down, refusing or failing).
    With --json, the card cut to this part.

    Example: jobaware {key} 4242 --gateway http://127.0.0.1:3010
    """
    one_part.__name__ = f"{key}_part"
    return one_part


def show_cards(job_id: str, similarity_jobid: int | None, gateway: str, service: list[str], keys: list[str] | None,
               store: str, since: str, cluster: str, as_json: bool) -> None:
    """`jobaware card`'s answer for JOBID (every part, or the parts of `keys` in a line each), printed."""
    from jobaware import card as cards
    from jobaware.adapters.slurm import arrays, finished
    from jobaware.adapters.slurm.collector import Slurm, cluster_name, state_of
    from jobaware.console import show

    job, tasks = arrays.parse_id(job_id)
    wanted = [(job, task) for task in tasks or [None]]
    _logging("card")  # squeue's and the libraries' words go to the log; what went wrong is one error line
    slurm = Slurm(timeout=30)
    listed = slurm.jobs("squeue", "--json", "--states=all")
    if listed is None:
        raise JobawareError(f"squeue failed, so no job's card can be made: {slurm.error or 'not Slurm --json output'}")
    queue = [record for record in listed if state_of(record) in ("PENDING", "RUNNING")]
    gone = [(j, task) for j, task in wanted if arrays.find(listed, j, task) is None]
    stored = _stored(store, cluster or cluster_name(slurm) or None, since, gone) if gone and store else {}
    for j, task in gone:
        if (j, task) not in stored:
            name = _name(j, task)
            raise JobawareError(f"job {name}: not known to squeue (pending or running jobs have cards)" if not store
                                else f"job {name}: not known to squeue, nor among the store's jobs submitted "
                                     f"since {since} (--since)")
    token, unverified = readable_token()
    if unverified and len(gone) < len(wanted):  # said to a person at a terminal; a script's output stays as it was
        import logging
        import sys

        said = f"the answers below are not verified to come from the site's services ({unverified})"
        logging.getLogger("jobaware").warning(said)
        if sys.stderr.isatty():
            notice(said)
    answers = []
    for j, task in wanted:
        record = arrays.find(listed, j, task)
        answer = _card(slurm, record, queue, similarity_jobid, gateway, service, keys, token) if record is not None \
            else stored[j, task] if keys is None else _only(stored[j, task], keys, "no such part in the card kept")
        answers.append((_name(j, task), answer))
    if as_json:
        show(answers[0][1] if tasks is None else [answer for _, answer in answers], True)
    elif keys is None:
        for name, answer in answers:
            if "happened" in answer:
                if answer["parts"]:
                    show(answer, False, cards.table(answer), title=finished.title(name, answer))
                else:
                    out.print(finished.title(name, answer), highlight=False, soft_wrap=True)
                show(answer, False, [finished.happened_row(answer["happened"])], title=f"job {name}: what happened")
            else:
                show(answer, False, cards.table(answer), title=f"job {name}: {answer['short']}")
    else:
        for name, answer in answers:
            end = f" (said before it ran; it ended {finished.ended(answer['happened'])})" if "happened" in answer else ""
            for row in cards.table(answer):
                if row["status"] in cards.ANSWERED:
                    out.print(_part_line(name, row) + end, highlight=False, soft_wrap=True)
    missing = [(name, key, answer["parts"][key]) for name, answer in answers for key in answer["missing"]]
    if keys is not None and missing:
        if as_json:
            raise typer.Exit(1)  # the JSON printed says which part is missing and why
        name, key, first = missing[0]
        more = f" (and {len(missing) - 1} more part(s) missing)" if len(missing) > 1 else ""
        raise JobawareError(f"job {name}: no {key} part: {first['status']}: {first['reason']}{more}")


def _name(job: int, task: int | None) -> str:
    return str(job) if task is None else f"{job}_{task}"


def _stored(uri: str, cluster: str | None, since: str, wanted: list[tuple[int, int | None]]) -> dict:
    """The finished jobs' cards found in the store among the jobs submitted from `since` on (see
    `jobaware.adapters.slurm.finished`)."""
    from jobaware.adapters.slurm import finished
    from jobaware.store import open_store
    from jobaware.usage.jobs import moment

    with open_store(uri) as store:
        return finished.find(store, cluster, moment(since, time.time(), "--since"), wanted)


def _part_line(name: str, row: dict) -> str:
    """One part of a job's card in one line: `job 42: wait: start in 40 min - 3 h (80%), ...; model 3`."""
    if row["status"] != "ok":
        return f"job {name}: {row['part']}: {row['status'].replace('_', ' ')}: {row['answer']}"
    version = f"; model {row['model version']}" if row["model version"] else ""
    return f"job {name}: {row['part']}: {row['answer']}{version}"


def _only(answer: dict, keys: list[str], reason: str = "the card gateway gave no such part") -> dict:
    """`answer` cut to the parts of `keys` (a part it does not have is unavailable, for `reason`)."""
    from jobaware import card as cards

    parts = {key: answer.get("parts", {}).get(key) or {"status": "unavailable", "reason": reason} for key in keys}
    cut = {**answer, "parts": parts, "missing": [k for k, p in parts.items() if p["status"] not in cards.ANSWERED]}
    return {**cut, "short": cards.short(cut)}


def _card(slurm, record: dict, queue: list[dict], similarity_jobid: int | None, gateway: str,
          service: list[str], keys: list[str] | None = None, token: bytes | None = None) -> dict:
    """The card of one squeue record (of the parts of `keys` only, when given), from the gateway or the services
    (audited); with `token`, only answers that prove they are the deployment's services' are taken."""
    import httpx

    from jobaware import card as cards
    from jobaware import config
    from jobaware.adapters.slurm import arrays

    job_id = arrays.number(record.get("job_id"))
    context = {"job_id": job_id, "job": record, "script": slurm.run("scontrol", "write", "batch_script",
                                                                     str(job_id), "-"),
               "similarity_jobid": similarity_jobid, "queue": queue}
    with cards.Services(_urls(service), 60 if gateway else 5, token) as services:
        if gateway:
            try:
                response = services.request("POST", f"{gateway.rstrip('/')}/card", json=context)
            except httpx.HTTPError as exc:
                raise JobawareError(f"card gateway {gateway}: {type(exc).__name__}") from None
            except cards.Unproven as exc:
                raise JobawareError(f"card gateway {exc}") from None
            if response.status_code != 200:
                raise JobawareError(f"card gateway {gateway}: HTTP {response.status_code}: {response.text[:300]}")
            return response.json() if keys is None else _only(response.json(), keys)
        answer = cards.make_card(context, services, keys=keys)
    cards.audit(answer, config.audit_dir() / "card.jsonl")
    return answer


def readable_token() -> tuple[bytes | None, str | None]:
    """The site's service token for `jobaware card`, and why the answers go unverified when there is none: a
    user may not read the site's token (it is the services' and daemons' alone), so a user's card takes the
    answers as they come, marked so."""
    from jobaware import config

    try:
        token = config.service_token()
    except JobawareError as exc:
        return None, str(exc)
    return token, None if token is not None else f"{config.TOKEN_FILE_ENV} is not set"


@slurm_app.command("plugins")
def plugins(
    out_dir: Annotated[Path, option("--output", "-o", role=FOLDER, help="folder for job_submit.lua and cli_filter.lua")],
    cache: Annotated[str, typer.Option(help="absolute path of the verdict cache the adapter writes")] = DEFAULT_CACHE,
    field: Annotated[Literal["comment", "admin_comment"], typer.Option(help="where the verdict goes")] = "comment",
    stale_after: Annotated[int, typer.Option(min=1, help="seconds after which the plugins ignore the cache")] = 3600,
    advise_above: Annotated[float | None, typer.Option(min=0, max=1, hidden=True, help="ignored: the adapter decides")] = None,
    plugin_dir: Annotated[Path | None, option(
        "--plugin-dir", role=FOLDER,
        help="also build the compiled cli_filter (cli_filter_jobaware.so, for CliFilterPlugins=jobaware) for this "
             "host's Slurm with the system C compiler, into this folder: one of slurm.conf's PluginDir folders")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace existing files")] = False,
):
    """Write job_submit.lua and cli_filter.lua, and with --plugin-dir build the compiled cli_filter.

    Put the Lua files beside slurm.conf. The compiled cli_filter costs sbatch less than cli_filter.lua; rebuild it
    when Slurm is upgraded.

    Example: jobaware slurm plugins --output /etc/slurm --plugin-dir /usr/lib/x86_64-linux-gnu/slurm-wlm
    """
    from jobaware.adapters.slurm.plugins import write_plugins

    if advise_above is not None:
        notice("--advise-above is ignored: cli_filter advises where the models flag a job (the adapter writes the "
               "advice into the cache); the option goes in the next release")
    for path in write_plugins(out_dir, force=overwrite, plugin_dir=plugin_dir, cache=cache, field=field,
                              stale_after=stale_after):
        err.print(f"wrote {path}", highlight=False)


@slurm_app.command("doctor")
def doctor(
    store: StoreOption,
    conf: Annotated[Path, option(role=FILE, envvar="SLURM_CONF", help="slurm.conf (env SLURM_CONF)")] = Path(
        "/etc/slurm/slurm.conf"),
    cache: Annotated[Path, typer.Option(help="the verdict cache the adapter writes")] = Path(DEFAULT_CACHE),
    service: ServiceURLs = [],  # noqa: B006 - typer reads the default, never changes it
    policy: Annotated[Path | None, option(role=FILE, help="the adapter's policy (YAML or TOML): a capability it "
                                          "switches off is not checked")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
):
    """Check the Slurm deployment end to end: one line per check with what to fix; exit 1 when any fails.

    The plugins in slurm.conf and beside it, the verdict cache (fresh, readable by SlurmUser and sbatch's users), the
    service token, the services the deployment names (those the adapter's --policy leaves on) answering /readyz with
    their identity proof, the store, accounting and out-of-memory kills.

    Example: jobaware slurm doctor --store sqlite:/var/lib/jobaware/store.db --conf /etc/slurm/slurm.conf
    """
    from jobaware.adapters.slurm.adapter import read_policy
    from jobaware.adapters.slurm.doctor import doctor as run_checks
    from jobaware.console import show

    checks = run_checks(conf, cache, store, _urls(service), policy=read_policy(policy) if policy else None)
    rows = [{"check": c.name, "status": "ok" if c.ok else "FIX", "found / fix": c.detail} for c in checks]
    failed = sum(not c.ok for c in checks)
    show(rows, as_json, rows, title=f"jobaware slurm doctor: {len(checks) - failed} ok, {failed} to fix")
    if failed:
        raise typer.Exit(1)


def collect_alias(
    source: Annotated[Literal["slurm"], typer.Argument(metavar="SOURCE", help="slurm")],
    out_path: Annotated[Path, option("--output", "-o", role=OUTPUT, help="NREL-format CSV of the finished jobs")],
    polls: Annotated[int, typer.Option(min=1, help="how many polls (bounded)")] = 1,
    interval: Annotated[float, typer.Option(min=0.1, help="seconds between polls")] = 60.0,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace an existing output")] = False,
):
    """Deprecated: `jobaware slurm collect` into a local store beside --output, then `jobaware failure export`.

    Example: jobaware collect slurm --output jobs.csv
    """
    import tempfile

    from jobaware import capabilities

    store = str(out_path.with_name(out_path.name + ".store"))
    err.print(f"`jobaware collect slurm` is deprecated: use `jobaware slurm collect --store {store}` and "
              f"`jobaware failure export`", highlight=False)
    run_collector(store, interval, polls, None, None, 20, 30.0)
    with tempfile.TemporaryDirectory(dir=out_path.parent) as scratch:
        Path(capabilities.get("failure").from_store(store, Path(scratch))).replace(out_path)
    out.print(f"wrote the finished jobs to {out_path}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(slurm_app, name="slurm")
    app.command("collect", hidden=True)(collect_alias)
    app.command("card")(card)
