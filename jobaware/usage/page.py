"""The HTML page of `jobaware report jobs --html`: one self-contained file (figures inline as PNG, no script or
style from elsewhere) with the efficiency histograms, requested against used (time and memory, each job a point
against the line where use equals the request), the totals and the table of rows.

A small inline script checks, once the page has loaded, that every figure decoded, and writes the outcome into
`#render-status` (`data-ok="true"`), so that a headless browser can tell a rendered page.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from jobaware.outputs import atomic_text
from jobaware.usage.jobs import Report, said_text
from jobaware.usage.measures import clock, hours, percent, size

DPI = 90
TITLES = {"time_eff": "time used of the limit asked", "cpu_eff": "CPU time used of the CPUs x time allocated",
          "mem_eff": "largest memory used of the memory asked"}


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _histograms(found: Report) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    bins = [i / 20 for i in range(21)]
    for ax, (name, title) in zip(axes, TITLES.items(), strict=True):
        values = [min(v, 1.0) * 100 for v in found.points[name]]
        ax.hist(values, bins=[b * 100 for b in bins], color="#4477aa", edgecolor="white")
        ax.set_title(f"{title}\n({len(values):,} jobs; at most 100%)", fontsize=9)
        ax.set_xlabel("efficiency (%)", fontsize=8)
        ax.set_ylabel("jobs", fontsize=8)
        ax.set_xlim(0, 100)
    return _png(fig)


def _requested_used(found: Report) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for ax, name, unit, scale in ((axes[0], "time", "hours", 3600), (axes[1], "memory", "GiB", 1024)):
        pairs = [(asked / scale, used / scale) for asked, used in found.points[name] if asked > 0 and used > 0]
        if pairs:
            asked, used = zip(*pairs, strict=True)
            ax.scatter(asked, used, s=10, alpha=0.5, color="#cc6677")
            low, high = min(min(asked), min(used)), max(max(asked), max(used))
            ax.plot([low, high], [low, high], color="#444444", linewidth=1, label="used = asked")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.legend(fontsize=8, loc="upper left")
        ax.set_title(f"{name}: asked against used ({len(pairs):,} jobs)", fontsize=9)
        ax.set_xlabel(f"asked ({unit})", fontsize=8)
        ax.set_ylabel(f"used ({unit})", fontsize=8)
    return _png(fig)


def cells(row: dict) -> list[str]:
    """A row's cells as the page's table shows them (HEADER's columns), not escaped yet."""
    if "distribution" in row:
        elapsed = row["distribution"]["elapsed_s"]
        ran = f"median {clock(elapsed['median'])}" if elapsed else "-"
    else:
        ran = clock(row.get("elapsed_s"))
    return [row["job"], row.get("user") or "", row.get("account") or "", row.get("partition") or "", row["state"],
            ran, percent(row.get("time_eff")), percent(row.get("cpu_eff")),
            f"{size(row.get('mem_used_mib')) if 'distribution' not in row else '-'} / {size(row.get('mem_req_mib'))}",
            percent(row.get("mem_eff")), hours(row.get("node_hours")),
            said_text(row.get("said") or [])]


HEADER = ("job", "user", "account", "partition", "end", "ran", "time eff", "CPU eff", "memory used / asked",
          "mem eff", "node-h", "said before it ran")


def write(found: Report, path: str | Path, title: str) -> Path:
    """Write the page (atomically); returns its path."""
    esc = html.escape
    figures = [("efficiency histograms", _histograms(found)), ("requested against used", _requested_used(found))]
    states = ", ".join(f"{n:,} {s}" for s, n in found.states.most_common()) or "none"
    parts = [f"<h1>{esc(title)}</h1>",
             f"<p>{found.jobs:,} finished jobs ({esc(states)}); {hours(found.node_hours)} node-hours, of which "
             f"{hours(found.failed_node_hours)} in failed and {hours(found.timeout_node_hours)} in timed-out jobs. "
             f"{found.unaccounted:,} without accounting data; {found.not_finished:,} not finished yet.</p>"]
    for caption, data in figures:
        parts.append(f"<figure><img class='figure' alt='{esc(caption)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{esc(caption)}</figcaption></figure>")
    rows = "".join("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in cells(row)) + "</tr>" for row in found.rows)
    more = f"<p>{found.not_listed:,} more jobs not listed (see --limit).</p>" if found.not_listed else ""
    parts.append(f"<h2>Jobs (newest first; arrays: the median of their tasks)</h2><table><tr>"
                 f"{''.join(f'<th>{esc(h)}</th>' for h in HEADER)}</tr>{rows}</table>{more}")
    parts.append("<p id='render-status' data-ok='false'>rendering...</p>")
    script = """
window.addEventListener('error', function (e) { document.body.dataset.error = String(e.message); });
window.addEventListener('load', function () {
  var images = document.querySelectorAll('img.figure'), bad = [];
  images.forEach(function (img) { if (!img.complete || img.naturalWidth === 0) bad.push(img.alt); });
  var status = document.getElementById('render-status');
  status.dataset.ok = String(bad.length === 0 && !document.body.dataset.error);
  status.textContent = bad.length ? 'figures not rendered: ' + bad.join(', ')
                                  : 'rendered ' + images.length + ' figures';
});"""
    style = ("body{font-family:sans-serif;margin:2em;max-width:1300px}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}img{max-width:100%}figure{margin:1.5em 0}")
    with atomic_text(path) as handle:
        handle.write(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(title)}</title><style>{style}"
                     f"</style></head><body>{''.join(parts)}<script>{script}</script></body></html>")
    return Path(path)
