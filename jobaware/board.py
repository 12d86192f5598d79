"""The board: the one page the card gateway serves at `/board`, for admins and users, from the site's job store.

- The queue: the cluster's jobs not finished yet (pending, then running once they start), oldest submitted first, a
  page of PAGE_SIZE at a time, each with the card the Slurm adapter kept for it (its parts, their versions).
- Verdicts against outcomes: the newest finished jobs that had a verdict, what each part said beside how the job
  ended (what `jobaware report jobs` computes: `jobaware.usage.jobs`).
- Live accuracy over time: each capability's `jobaware report live` table by week and model version, with its
  primary metric drawn week by week; computed in a thread at most every LIVE_EVERY_S (it reads every finished job).
- A user's own jobs (`?user=NAME`): their finished jobs of the last DAYS days, as `report jobs --user NAME`.

Work per request is bounded: one page of the queue (its records read by key), at most SCANNED jobs of the window read
for the other tables (the page says so when it cut), the live tables from the last computation. Everything shown from
a job record is HTML-escaped; the page holds no script and loads nothing (inline style, inline SVG).
"""

from __future__ import annotations

import datetime as dt
import html
import logging
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode

from jobaware import capabilities, live
from jobaware import card as cards
from jobaware.errors import InputError, JobawareError
from jobaware.store import JobStore, is_store, open_store
from jobaware.text import redacted
from jobaware.usage.jobs import Filters, finished, latest_card, report, summarize
from jobaware.usage.page import HEADER, cells

log = logging.getLogger(__name__)
PAGE_SIZE = 50  # queue rows per page
SCANNED = 5_000  # finished-job records read at most per table per request (newest first)
DAYS = 7  # the window of the verdicts' and a user's tables
VERDICTS = 50  # rows of the verdicts table
LIVE_EVERY_S = 900.0
MAX_PARAMETER_CHARS = 100
_PARAMETER = re.compile(r"^[\w.@+-]*$")  # a user or cluster name as Slurm allows it (anything else is refused)
STYLE = ("body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;font-size:12px;"
         "margin-bottom:1em}td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top;text-align:left}"
         "th{background:#f0f0f0}nav a{margin-right:1em}.said{max-width:42em}.missing{color:#a00}"
         ".note{color:#555;font-size:13px}svg{border:1px solid #ddd;margin:0.5em 0}")
COLOURS = ("#4477aa", "#cc6677", "#228833", "#ccbb44", "#66ccee", "#aa3377")


@dataclass(frozen=True)
class Asked:
    """What a request asks the board for: the queue's page, a user's jobs, the cluster."""

    page: int = 1
    user: str = ""
    cluster: str = ""

    @classmethod
    def parse(cls, query: bytes | str) -> Asked:
        """`page`, `user` and `cluster` of a query string; a bad one is an InputError in one line."""
        text = query.decode("latin-1") if isinstance(query, bytes) else query
        values = parse_qs(text[:2000], keep_blank_values=True)
        if set(values) - {"page", "user", "cluster"}:
            raise InputError("a parameter the board does not take: it takes page, user and cluster")
        found = {name: values[name][-1] for name in values}
        for name in ("user", "cluster"):  # what was given is never echoed
            value = found.get(name, "")
            if len(value) > MAX_PARAMETER_CHARS or not _PARAMETER.fullmatch(value):
                raise InputError(f"{name}: expected a name of letters, digits and . _ @ + - (at most "
                                 f"{MAX_PARAMETER_CHARS})")
        page = found.get("page", "1")
        if not page.isdigit() or not 1 <= int(page) <= 1_000_000:
            raise InputError("page: expected a page number from 1 to 1,000,000")
        return cls(int(page), found.get("user", ""), found.get("cluster", ""))


class Every:
    """`compute()` run in a thread at most every `seconds`: `latest()` gives the last result and when it was made
    (None before the first), starting a new computation when the last is older, never waiting for it."""

    def __init__(self, compute: Callable[[], object], seconds: float, clock: Callable[[], float] = time.time):
        self.compute, self.seconds, self.clock = compute, seconds, clock
        self.result: tuple[float, object] | None = None
        self.running = threading.Lock()

    def latest(self) -> tuple[float, object] | None:
        if (self.result is None or self.clock() - self.result[0] >= self.seconds) and self.running.acquire(False):
            threading.Thread(target=self._run, name="board", daemon=True).start()
        return self.result

    def _run(self) -> None:
        try:
            self.result = (self.clock(), self.compute())
        except Exception as exc:  # noqa: BLE001 - the page shows what it has; the log says why
            log.warning("board: %s: %s", type(exc).__name__, str(exc)[:300])
        finally:
            self.running.release()


class Board:
    """The page over the store at `uri`."""

    def __init__(self, uri: str, clock: Callable[[], float] = time.time):
        self.uri, self.clock = uri, clock
        self.live = Every(self._live, LIVE_EVERY_S, clock)
        self.live.latest()  # the first computation starts with the gateway

    def _live(self) -> dict[str, list[dict]]:
        if not is_store(self.uri):  # never made by the board
            raise InputError(f"no job store at {redacted(self.uri)}")
        with open_store(self.uri) as store:
            return live.reports(store)

    def render(self, asked: Asked) -> str:
        """The whole page for `asked`."""
        started = time.perf_counter()
        if not is_store(self.uri):
            return _page("jobaware board", f"<p class='missing'>No job store at {_e(redacted(self.uri))}: the "
                         "collector makes it (jobaware slurm collect).</p>")
        try:
            opened = open_store(self.uri)
        except JobawareError as exc:  # unreadable, locked, not a store: said on the page, in one line
            return _page("jobaware board", f"<p class='missing'>{_e(redacted(str(exc)))}</p>")
        with opened as store:
            cluster = asked.cluster or _newest_cluster(store)
            since = self.clock() - DAYS * 86_400
            sections = [_queue(store, cluster, asked, self.clock()), _verdicts(store, cluster, since),
                        _live_section(self.live.latest(), self.clock()),
                        _user(store, cluster, since, asked.user)]
        title = f"jobaware board: {cluster or 'no jobs yet'}"
        head = (f"<h1>{_e(title)}</h1><nav><a href='#queue'>queue</a><a href='#verdicts'>verdicts against "
                "outcomes</a><a href='#live'>live accuracy</a><a href='#user'>a user's jobs</a></nav>"
                f"<form method='get' action='board'><input type='hidden' name='cluster' value='{_e(cluster)}'>"
                f"<label>user <input name='user' value='{_e(asked.user)}' maxlength='{MAX_PARAMETER_CHARS}'>"
                "</label> <button>show</button></form>")
        foot = (f"<p class='note'>Made in {time.perf_counter() - started:.2f} s at {_when(self.clock())} from the "
                f"job store {_e(redacted(self.uri))}.</p>")
        return _page(title, head + "".join(sections) + foot)


# ---------------------------------------------------------------- the sections
def _queue(store: JobStore, cluster: str, asked: Asked, now: float) -> str:
    keys = store.open_keys(cluster) if cluster else []
    pages = max(1, math.ceil(len(keys) / PAGE_SIZE))
    page = min(asked.page, pages)
    shown = keys[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    rows = []
    for key in shown:
        record = store.get(key) or {}
        row = record.get("row") or {}
        states = record.get("states") or []
        state = states[-1]["state"] if states else row.get("state") or ""
        rows.append(_row([key.job_id, row.get("user"), row.get("account"), row.get("partition"), row.get("name"),
                          state, _when(key.submit_time), _age(now - key.submit_time)],
                         raw_last=_card(latest_card(store.predictions(key)))))
    links = _pages(asked, page, pages)
    first = (page - 1) * PAGE_SIZE + 1 if shown else 0
    said = (f"<p class='note'>{len(keys):,} jobs not finished (pending or running), oldest submitted first; "
            f"jobs {first:,}-{first + len(shown) - 1 if shown else 0:,} shown, {PAGE_SIZE} a page. {links}</p>")
    table = _table(["job", "user", "account", "partition", "name", "state", "submitted", "waiting", "card"], rows)
    return f"<h2 id='queue'>The queue</h2>{said}{table if rows else ''}"


def _card(card: dict | None) -> str:
    """A kept card as HTML: a line per part (its answer in short, or why it is missing; its model version)."""
    if card is None:
        return "<span class='note'>no card yet</span>"
    lines = []
    for part in cards.table(card):
        version = f" (model {_e(part['model version'])})" if part["model version"] else ""
        missing = "" if part["status"] in cards.ANSWERED else f" <span class='missing'>{_e(part['status'])}</span>"
        lines.append(f"<div>{_e(part['part'])}: {_e(part['answer'])}{version}{missing}</div>")
    return "".join(lines)


def _verdicts(store: JobStore, cluster: str, since: float) -> str:
    filters = Filters(since=since, cluster=cluster or None)
    judged = ((happened, predictions) for happened, predictions in finished(store, filters, at_most=SCANNED)
              if happened is not None and latest_card(predictions))
    rows = summarize(judged, VERDICTS, filters.grouped).rows
    cut = _cut(store, filters)
    said = (f"<p class='note'>The newest finished jobs submitted in the last {DAYS} days{cut} that had a verdict: "
            "what each part said before the job ran, beside how it ended.</p>")
    body = _table(list(HEADER), [_row(cells(row)) for row in rows]) if rows else "<p>None yet.</p>"
    return f"<h2 id='verdicts'>Verdicts against outcomes</h2>{said}{body}"


def _live_section(latest: tuple[float, dict] | None, now: float) -> str:
    if latest is None:
        return ("<h2 id='live'>Live accuracy</h2><p class='note'>Being computed (it reads every finished job); "
                "reload in a minute.</p>")
    computed, found = latest
    parts = [f"<h2 id='live'>Live accuracy</h2><p class='note'>`jobaware report live`, computed "
             f"{_age(now - computed)} ago: how each capability did on finished jobs, by week and model version.</p>"]
    registry = capabilities.registry()
    for key, rows in found.items():
        parts.append(f"<h3>{_e(key)}</h3>")
        if not rows:
            parts.append("<p>No finished job with a verdict yet.</p>")
            continue
        metric = registry[key].primary_metric
        if any(isinstance(row.get(metric), int | float) for row in rows):
            parts.append(_chart(rows, metric))
        columns = list(rows[0])
        parts.append(_table(columns, [_row([_figure(row.get(c)) for c in columns]) for row in rows]))
    return "".join(parts)


def _user(store: JobStore, cluster: str, since: float, user: str) -> str:
    if not user:
        return ("<h2 id='user'>A user's jobs</h2><p class='note'>Give a user name above: their jobs finished in the "
                f"last {DAYS} days, as `jobaware report jobs --user NAME` shows them.</p>")
    filters = Filters(since=since, cluster=cluster or None, users={user})
    found = report(store, filters, limit=PAGE_SIZE, at_most=SCANNED)
    cut = _cut(store, filters)
    states = ", ".join(f"{n:,} {s}" for s, n in found.states.most_common()) or "none"
    said = (f"<p class='note'>Jobs of {_e(user)} submitted in the last {DAYS} days{cut}: {found.jobs:,} finished "
            f"({_e(states)}), {found.not_finished:,} not finished; the newest {PAGE_SIZE} listed.</p>")
    body = _table(list(HEADER), [_row(cells(row)) for row in found.rows]) if found.rows else "<p>None.</p>"
    return f"<h2 id='user'>Jobs of {_e(user)}</h2>{said}{body}"


# ---------------------------------------------------------------- pieces
def _e(value) -> str:
    """Any value as HTML text: escaped, quotes included."""
    return html.escape("" if value is None else str(value), quote=True)


def _row(values: list, raw_last: str | None = None) -> str:
    """A table row of escaped values (and, as `raw_last`, a last cell already made of escaped HTML)."""
    last = f"<td class='said'>{raw_last}</td>" if raw_last is not None else ""
    return "<tr>" + "".join(f"<td>{_e(value)}</td>" for value in values) + last + "</tr>"


def _table(header: list[str], rows: list[str]) -> str:
    return "<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>" + "".join(rows) + "</table>"


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<link rel='icon' href='data:,'><style>{STYLE}</style></head><body>{body}</body></html>")


def _pages(asked: Asked, page: int, pages: int) -> str:
    def link(number: int, text: str) -> str:
        query = urlencode({k: v for k, v in (("page", number), ("user", asked.user), ("cluster", asked.cluster))
                           if v})
        return f"<a href='board?{_e(query)}#queue'>{text}</a>"

    around = [link(page - 1, "&larr; previous")] if page > 1 else []
    around += [f"page {page:,} of {pages:,}"]
    around += [link(page + 1, "next &rarr;")] if page < pages else []
    return " ".join(around)


def _cut(store: JobStore, filters: Filters) -> str:
    """Words saying the table read the newest SCANNED jobs only, when the window holds more."""
    total = store.count(filters.cluster, filters.since, filters.until)
    return f" (among the newest {SCANNED:,} of its {total:,} jobs)" if total > SCANNED else ""


def _newest_cluster(store: JobStore) -> str:
    """The cluster of the newest job in the store ('' when it holds none)."""
    newest = next(store.records(newest_first=True), None)
    return newest["cluster"] if newest else ""


def _when(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 86_400}d {seconds % 86_400 // 3600}h" if seconds >= 86_400 else \
        f"{seconds // 3600}h {seconds % 3600 // 60}m" if seconds >= 3600 else f"{seconds // 60}m"


def _figure(value) -> str:
    if isinstance(value, float):
        return "-" if not math.isfinite(value) else f"{value:.3g}"
    return "" if value is None else str(value)


def _chart(rows: list[dict], metric: str, width: int = 640, height: int = 180) -> str:
    """`metric` week by week, a line per model version, as inline SVG (no script)."""
    weeks = sorted({row["week"] for row in rows})
    points: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        value = row.get(metric)
        if isinstance(value, int | float) and math.isfinite(value):
            points.setdefault(str(row["model_version"]), []).append((weeks.index(row["week"]), float(value)))
    values = [v for line in points.values() for _, v in line]
    if not values:
        return ""
    low, high = min(0.0, min(values)), max(1.0, max(values))
    x = lambda i: 40 + (width - 60) * (i / max(1, len(weeks) - 1))  # noqa: E731
    y = lambda v: height - 25 - (height - 40) * (v - low) / (high - low or 1)  # noqa: E731
    shapes = [f"<line x1='40' y1='{y(low):.1f}' x2='{width - 20}' y2='{y(low):.1f}' stroke='#999'/>",
              f"<text x='2' y='{y(high):.1f}' font-size='10'>{high:.2g}</text>",
              f"<text x='2' y='{y(low):.1f}' font-size='10'>{low:.2g}</text>",
              f"<text x='40' y='{height - 5}' font-size='10'>{_e(weeks[0])}</text>",
              f"<text x='{width - 90}' y='{height - 5}' font-size='10'>{_e(weeks[-1])}</text>"]
    for number, (version, line) in enumerate(sorted(points.items())):
        colour = COLOURS[number % len(COLOURS)]
        path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in sorted(line))
        shapes.append(f"<polyline fill='none' stroke='{colour}' stroke-width='2' points='{path}'/>")
        shapes += [f"<circle cx='{x(i):.1f}' cy='{y(v):.1f}' r='3' fill='{colour}'/>" for i, v in line]
        shapes.append(f"<text x='{width - 120}' y='{15 + 12 * number}' font-size='11' fill='{colour}'>version "
                      f"{_e(version)}</text>")
    return (f"<svg role='img' aria-label='{_e(metric)} by week' width='{width}' height='{height}' "
            f"xmlns='http://www.w3.org/2000/svg'><title>{_e(metric)} by week</title>{''.join(shapes)}</svg>"
            f"<div class='note'>{_e(metric)} by week (the capability's primary metric)</div>")

