"""The paper's views: PNG figures and a self-contained HTML page that a real headless browser renders."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from matplotlib.image import imread

from jobaware.similarity.report import report
from jobaware.similarity.train import example_reference

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def page(trained):
    """The report the pipeline's evaluation drew (for the longest of the first 10k jobs)."""
    bundle, evaluation = trained
    jobid = example_reference(bundle)
    pngs = [p for p in evaluation.plots if p.parent.name == "report_figures"]
    return (evaluation.report, pngs), jobid


def test_report_has_every_view_and_needs_no_network(page):
    (html, pngs), jobid = page
    names = sorted(p.name for p in pngs)
    assert names == sorted(["histogram.png", "cumulative.png", "top_intersection.png", "top_metadata.png",
                            *(f"timelines_{a}.png" for a in ("b-all", "b-aggz", "q-lev", "q-native", "q-phases", "ks"))])
    text = html.read_text()
    assert text.count("data:image/png;base64,") == len(pngs)
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", text)  # nothing to fetch
    assert f"Jobs similar to job {jobid}" in text and "Consensus" in text
    for png in pngs:
        image = imread(png)
        assert image.shape[0] > 200 and image[..., :3].std() > 0.05  # drawn, not blank


def test_report_without_metadata_or_levels_draws_binary_timelines(real_index, tmp_path):
    jobid = int(real_index.jobids[np.argmax([len(real_index.reference(int(j)).coding) for j in real_index.jobids[:3000]])])
    html, pngs = report(real_index, jobid, tmp_path / "real.html", workers=1)
    assert sorted(p.name for p in pngs) == ["cumulative.png", "histogram.png", "timelines_b-aggz.png",
                                            "timelines_b-all.png", "top_intersection.png"]


def _chromium(*args, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=90)


@pytest.mark.timeout(180)
def test_report_renders_in_headless_chromium(page, tmp_path):
    if CHROMIUM is None:
        if os.environ.get("JOBAWARE_REQUIRE_BROWSER") == "1":
            pytest.fail("JOBAWARE_REQUIRE_BROWSER=1 but no chromium (apt-get install chromium)")
        pytest.skip("chromium is not installed (Debian package 'chromium'); set JOBAWARE_REQUIRE_BROWSER=1 to fail")
    (html, pngs), _ = page
    url = html.resolve().as_uri()
    dom = _chromium("--virtual-time-budget=10000", "--dump-dom", url, tmp_path=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    status = re.search(r'id="render-status" data-ok="(\w+)">([^<]*)<', dom.stdout)
    assert status, dom.stdout[-2000:]
    assert status.group(1) == "true" and status.group(2) == f"rendered {len(pngs)} figures"
    assert "data-error" not in dom.stdout
    shot = tmp_path / "shot.png"
    result = _chromium(f"--screenshot={shot}", "--window-size=1200,2400", "--virtual-time-budget=10000", url,
                       tmp_path=tmp_path)
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    image = imread(shot)
    assert image.shape[:2] == (2400, 1200)
    assert image[..., :3].std() > 0.1  # the page drew its figures, not an empty white page


@pytest.mark.timeout(120)
def test_the_browser_check_fails_on_a_broken_figure(page, tmp_path):
    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    (html, _), _ = page
    broken = tmp_path / "broken.html"
    broken.write_text(html.read_text().replace("data:image/png;base64,iVBOR", "data:image/png;base64,XXXX", 1))
    dom = _chromium("--virtual-time-budget=10000", "--dump-dom", broken.resolve().as_uri(), tmp_path=tmp_path)
    status = re.search(r'id="render-status" data-ok="(\w+)">([^<]*)<', dom.stdout)
    assert status.group(1) == "false" and status.group(2).startswith("figures not rendered: ")
