"""The paper's views of one query, as PNGs and as one self-contained HTML page (images inline, no network).

Views (Betke & Kunkel, section 5): the histogram of job counts by similarity (bins of 2.5 %, log scale) and
the cumulative distribution, per algorithm; the segmented timelines (per metric, levels 0..16, or the
binary bits when only binary codings exist) of the reference and of selected ranks; the intersection
heatmap of the top 100 jobs across algorithms; the consensus (jobs every algorithm ranks in its top 100);
and, when job metadata exist, the users, node counts and run times of the top 100.

The page carries a small inline script that, once loaded, checks every figure decoded and writes the
outcome into `#render-status` (`data-ok="true"`), so a headless browser can tell a rendered page.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from jobaware.errors import InputError  # noqa: E402
from jobaware.similarity.algorithms import ALGORITHMS, NEEDS  # noqa: E402
from jobaware.similarity.index import BINS, Reference, SimilarityIndex, histogram, rank  # noqa: E402
from jobaware.similarity.schema import METRICS, SEGMENT_SECONDS  # noqa: E402

RANKS = (1, 2, 3, 10, 50, 100)
TOP = 100
DPI = 90


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _timeline(index: SimilarityIndex, jobid: int, ax, title: str) -> None:
    ref = index.reference(jobid)
    if ref.levels is not None:
        grid, vmax, label = np.vstack(ref.levels), 16, "level"
    else:
        grid = ((ref.coding[None, :] >> np.arange(len(METRICS))[:, None]) & 1).astype(float)
        vmax, label = 1, "active"
    image = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=vmax)
    ax.set_yticks(range(len(METRICS)), METRICS, fontsize=6)
    ax.set_title(title, fontsize=8, loc="left")
    ax.tick_params(axis="x", labelsize=6)
    return image, label


def report(index: SimilarityIndex, reference: int | Reference, out: str | Path, *, algorithms: list[str] | None = None,
           top: int = TOP, ranks: tuple[int, ...] = RANKS, workers: int = 0) -> tuple[Path, list[Path]]:
    """Write the HTML report of one query and its PNG figures (in `<out stem>_figures/`); return both."""
    out = Path(out)
    figures = out.with_name(f"{out.stem}_figures")
    ref = index.reference(reference) if not isinstance(reference, Reference) else reference
    names = algorithms or [a for a in ALGORITHMS if index.has(NEEDS[a])]
    scores, notes = {}, []
    for name in names:
        try:
            scores[name] = index.scores(ref, name, workers)
        except InputError as exc:
            notes.append(f"{name}: {exc}")
    if not scores:
        raise InputError(f"algorithms: none can score {ref.label}: {'; '.join(notes)}")
    jobids = index.jobids
    # the top lists of the other jobs (a pool reference is its own best match; it is shown apart)
    tops = {name: rank(s, jobids, top + 1)[0] for name, s in scores.items()}
    tops = {name: t[t != ref.jobid][:top] for name, t in tops.items()}
    pngs = [_histograms(scores, figures / "histogram.png"), _cumulative(scores, figures / "cumulative.png")]
    for name in scores:
        pngs.append(_timelines(index, ref, name, tops[name], scores[name], ranks, figures / f"timelines_{name}.png"))
    if len(scores) > 1:
        pngs.append(_intersection(tops, figures / "top_intersection.png"))
    if index.jobs is not None:
        pngs.append(_metadata(index, tops, figures / "top_metadata.png"))
    consensus = _consensus(tops, scores, jobids) if len(scores) > 1 else []
    out.write_text(_page(index, ref, scores, tops, notes, pngs, consensus, top))
    return out, pngs


def _histograms(scores: dict, path: Path) -> Path:
    cols = min(3, len(scores))
    rows = int(np.ceil(len(scores) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3 * rows), squeeze=False)
    for ax, (name, s) in zip(axes.flat, scores.items()):
        ax.bar(BINS[:-1], histogram(s), width=BINS[1] - BINS[0], align="edge", color="#4472c4")
        ax.set_yscale("log")
        ax.set(xlabel="similarity", ylabel="jobs", title=name, xlim=(0, 1))
    for ax in list(axes.flat)[len(scores):]:
        ax.axis("off")
    fig.suptitle("Jobs by similarity to the reference (bins of 2.5 %)", fontsize=10)
    return _save(fig, path)


def _cumulative(scores: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, s in scores.items():
        values = np.sort(s[~np.isnan(s)])
        ax.plot(values, np.arange(1, len(values) + 1) / max(len(values), 1), label=name)
    ax.set(xlabel="similarity", ylabel="fraction of jobs with similarity <= x", title="Cumulative distribution",
           xlim=(0, 1), ylim=(0, 1.01))
    ax.legend(fontsize=8)
    return _save(fig, path)


def _timelines(index, ref: Reference, name: str, top: np.ndarray, scores: np.ndarray, ranks, path: Path) -> Path:
    chosen = [(r, int(top[r - 1])) for r in ranks if r <= len(top)]
    panels = 1 + len(chosen) if ref.jobid is not None else len(chosen)
    fig, axes = plt.subplots(panels, 1, figsize=(8, 1.5 * panels + 0.6), squeeze=False, layout="constrained")
    axes = list(axes.flat)
    image = None
    if ref.jobid is not None:
        image, label = _timeline(index, ref.jobid, axes.pop(0), f"reference job {ref.jobid}")
    for ax, (r, jobid) in zip(axes, chosen, strict=True):
        at = int(np.searchsorted(index.jobids, jobid))
        image, label = _timeline(index, jobid, ax, f"rank {r}: job {jobid} (similarity {scores[at]:.3f})")
    for ax in fig.axes[-1:]:
        ax.set_xlabel(f"segment ({SEGMENT_SECONDS // 60} min)", fontsize=7)
    if image is not None:
        fig.colorbar(image, ax=fig.axes, label=label, fraction=0.02, pad=0.01)
    fig.suptitle(f"{name}: timelines of the reference and selected ranks", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)  # laid out by "constrained" (the colorbar spans every panel)
    plt.close(fig)
    return path


def _intersection(tops: dict, path: Path) -> Path:
    names = list(tops)
    sets = [set(tops[n].tolist()) for n in names]
    matrix = np.array([[len(a & b) for b in sets] for a in sets])
    fig, ax = plt.subplots(figsize=(1.1 * len(names) + 2, 1.1 * len(names) + 1.5))
    ax.imshow(matrix, cmap="Blues", vmin=0, vmax=max(1, matrix.max()))
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_yticks(range(len(names)), names)
    for i in range(len(names)):
        for j in range(len(names)):
            ax.text(j, i, str(matrix[i, j]), ha="center", va="center",
                    color="white" if matrix[i, j] > matrix.max() / 2 else "black", fontsize=8)
    ax.set_title("Jobs shared by the top lists", fontsize=10)
    return _save(fig, path)


def _metadata(index, tops: dict, path: Path) -> Path:
    jobs = index.jobs
    fig, axes = plt.subplots(len(tops), 3, figsize=(12, 2.6 * len(tops)), squeeze=False)
    for row, (name, top) in zip(axes, tops.items(), strict=True):
        found = jobs.reindex(top).dropna(how="all")
        users = found["user"].value_counts().head(10)
        row[0].barh(users.index[::-1].astype(str), users.to_numpy()[::-1], color="#4472c4")
        row[0].set_title(f"{name}: users in the top {len(top)}", fontsize=8)
        row[1].hist(found["nodes"].to_numpy(float), bins=20, color="#ed7d31")
        row[1].set_title("node counts", fontsize=8)
        row[2].hist(found["elapsed"].to_numpy(float) / 3600, bins=20, color="#70ad47")
        row[2].set_title("run time (hours)", fontsize=8)
        for ax in row:
            ax.tick_params(labelsize=6)
    return _save(fig, path)


def _consensus(tops: dict, scores: dict, jobids: np.ndarray) -> list[tuple[int, float]]:
    common = set.intersection(*(set(t.tolist()) for t in tops.values()))
    members = np.array(sorted(common), np.int64)
    where = np.searchsorted(jobids, members)
    mean = np.mean([s[where] for s in scores.values()], axis=0) if len(members) else np.zeros(0)
    order = np.lexsort((members, -mean))
    return [(int(members[i]), float(mean[i])) for i in order]


def _page(index, ref: Reference, scores, tops, notes, pngs, consensus, top) -> str:
    esc = html.escape
    title = f"Jobs similar to {ref.label}"
    coding = ":".join(map(str, ref.coding.tolist())) if ref.coding is not None else "(not given)"
    parts = [f"<h1>{esc(title)}</h1>",
             f"<p>Pool of {index.size:,} jobs (index {esc(index.version)}); tables: {esc(', '.join(index.tables))}. "
             f"Reference: {len(ref.coding) if ref.coding is not None else 0} segments, binary coding "
             f"<code>{esc(coding[:300])}{'...' if len(coding) > 300 else ''}</code>.</p>"]
    if notes:
        parts.append("<ul class='notes'>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    header = "".join(f"<th>{esc(n)}</th>" for n in scores)
    rows = []
    for i in range(min(10, max(len(t) for t in tops.values()))):
        cells = []
        for name, t in tops.items():
            if i < len(t):
                at = int(np.searchsorted(index.jobids, t[i]))
                cells.append(f"<td>{int(t[i])} ({scores[name][at]:.4f})</td>")
            else:
                cells.append("<td></td>")
        rows.append(f"<tr><td>{i + 1}</td>{''.join(cells)}</tr>")
    parts.append(f"<h2>Top 10 other jobs (jobid, similarity)</h2><table><tr><th>rank</th>{header}</tr>{''.join(rows)}</table>")
    if len(scores) > 1:
        listed = ", ".join(f"{j} ({s:.3f})" for j, s in consensus[:50]) or "none"
        parts.append(f"<h2>Consensus</h2><p>{len(consensus)} job(s) in the top {top} of every algorithm "
                     f"(by mean similarity): {esc(listed)}</p>")
    for path in pngs:
        data = base64.b64encode(path.read_bytes()).decode()
        parts.append(f"<figure><img class='figure' alt='{esc(path.stem)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{esc(path.stem.replace('_', ' '))}</figcaption></figure>")
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
    style = ("body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:2px 6px}img{max-width:100%}figure{margin:1.5em 0}"
             ".notes{color:#a33}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(title)}</title><style>{style}</style>"
            f"</head><body>{''.join(parts)}<script>{script}</script></body></html>")


def evaluation_plots(metrics: dict, out_dir: Path, algorithm: str) -> list[Path]:
    """Precision@k of every algorithm (the model's own: `algorithm`) beside the baselines, and seconds per
    100k jobs per algorithm."""
    out_dir = Path(out_dir)
    names = [n for n in metrics if "precision_at_k" in metrics[n]]
    model = metrics["model"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [f"{algorithm} (model)" if n == "model" else n for n in names]
    values = [metrics[n]["precision_at_k"] for n in names]
    ax.bar(labels, values, color=["#c00000" if n == "model" else "#4472c4" for n in names])
    ax.set(ylabel=f"precision@{int(model.get('k', 10))}", ylim=(0, 1), title="Finding the reference's family")
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    paths = [_save(fig, out_dir / "precision_at_k.png")]
    timing = {k.removeprefix("seconds_per_100k_"): v for k, v in model.items() if k.startswith("seconds_per_100k_")}
    if timing:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.bar(list(timing), list(timing.values()), color="#70ad47")
        ax.set_yscale("log")
        ax.set(ylabel="seconds per 100k jobs", title="Query time per algorithm and reference length (segments)")
        ax.tick_params(axis="x", rotation=60, labelsize=7)
        paths.append(_save(fig, out_dir / "seconds_per_100k.png"))
    return paths
