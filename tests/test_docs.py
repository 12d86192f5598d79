"""The documentation: the site builds with `mkdocs build --strict` (no broken link, no page outside the nav), the README
stays short and points at the site and SECURITY.md, the settings page names every `JOBAWARE_*` variable of the
source, and the generated command reference names every command `jobaware --help` lists."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobaware.cli import command

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250
NAME = re.compile(rb"JOBAWARE_[A-Z0-9_]+")


def build(project: Path, site: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "JOBAWARE_HOME": str(home), "JOBAWARE_CONFIG": "/nonexistent", "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=project,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once for the module from the repository's own mkdocs.yml and docs/."""
    site = tmp_path_factory.mktemp("site")
    built = build(ROOT, site, tmp_path_factory.mktemp("home"))
    assert built.returncode == 0, built.stderr[-3000:]
    return site


def page_text(site: Path, page: str) -> str:
    return html.unescape((site / page / "index.html").read_text())


def test_the_site_builds_strictly(site):
    for page in ("guides/slurm-admin", "guides/htcondor-admin", "guides/ml-engineer", "guides/cluster-users",
                 "reference/commands", "reference/settings", "reference/http-api", "security"):
        assert (site / page / "index.html").is_file(), page


def test_a_broken_link_or_an_orphan_page_fails_the_build(tmp_path):
    """The validation settings of mkdocs.yml make `--strict` refuse what a reader would trip on."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", project)
    shutil.copy(ROOT / "SECURITY.md", project)
    shutil.copytree(ROOT / "docs", project / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "docs" / "orphan.md").write_text("# Not in the nav\n")
    index = project / "docs" / "index.md"
    index.write_text(index.read_text() + "\n[gone](no-such-page.md)\n")
    built = build(project, tmp_path / "site", tmp_path / "home")
    assert built.returncode != 0
    assert "orphan.md" in built.stderr and "no-such-page.md" in built.stderr, built.stderr[-3000:]


def test_the_readme_is_short_and_points_at_the_docs_and_security():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    assert "](SECURITY.md)" in readme
    assert "](docs/" in readme
    assert "mkdocs build --strict" in readme
    assert re.search(r"^make test\b", readme, re.MULTILINE), "the README states `make test`, CI's test command"
    for linked in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)\)", readme):
        assert (ROOT / linked).is_file(), linked


def test_every_jobaware_variable_of_the_source_is_in_the_settings_reference(site):
    names = {match.decode() for path in (ROOT / "jobaware").rglob("*") if path.is_file()
             for match in NAME.findall(path.read_bytes())}
    assert names, "no JOBAWARE_* name found: the search is broken"
    settings = page_text(site, "reference/settings")
    assert sorted(name for name in names if name not in settings) == []


def visible_commands(group, path=("jobaware",)):
    for name, sub in group.commands.items():
        if not sub.hidden:
            yield " ".join((*path, name))
            if hasattr(sub, "commands"):
                yield from visible_commands(sub, (*path, name))


def test_the_command_reference_names_every_command(site):
    listed = set(visible_commands(command()))
    assert {"jobaware slurm doctor", "jobaware pipeline submit", "jobaware hold follow"} <= listed
    headings = {re.sub(r"<[^>]+>", "", heading).strip(" ¶")
                for heading in re.findall(r"<h[23][^>]*>(.*?)</h[23]>", page_text(site, "reference/commands"))}
    assert sorted(listed - headings) == []


def test_the_api_reference_names_every_route_of_the_services(site):
    api = page_text(site, "reference/http-api")
    for route in ("POST /predict", "POST /hold-decision", "POST /classify", "POST /pairing", "POST /similar",
                  "POST /wait", "POST /size", "POST /card"):
        assert route in api, route
