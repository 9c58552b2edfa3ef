"""report.html: self-contained, holds every table, escapes record text, and renders in a real browser."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import run_cli
from plotly.offline import get_plotlyjs
from source_records import write_source

from dlperf.records.paths import paths_of_record
from dlperf.records.sweep_runs import save_planned
from dlperf.reporting.html import write_html_report
from dlperf.reporting.sources import build_comparison, load_sources

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
HOSTILE = "<script>alert(1)</script>"


class _Page(HTMLParser):
    """Every tag's name and attributes, and the text of table headers."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.headers: list[str] = []
        self._in_th = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_th = tag == "th"

    def handle_endtag(self, tag):
        self._in_th = False if tag == "th" else self._in_th

    def handle_data(self, data):
        if self._in_th:
            self.headers.append(data)


def parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


@pytest.fixture
def report(tmp_path) -> Path:
    """Two sources, one with a failed run whose error text would be markup if not escaped."""
    folders = [write_source(tmp_path, "A"), write_source(tmp_path, "B")]
    comparison = build_comparison(load_sources(folders, labels=["native", f"peer {HOSTILE}"]))
    return write_html_report(comparison, tmp_path / "out")


def test_self_contained_with_every_table(report):
    text = report.read_text()
    page = parse(text)
    for tag, attrs in page.tags:
        for key in ("src", "href"):
            value = (attrs.get(key) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//")), f"<{tag} {key}={value}> needs the network"
    scripts = [attrs for tag, attrs in page.tags if tag == "script"]
    assert scripts and not any(a.get("src") for a in scripts)  # plotly.js is inline
    # plotly.js inlined once, gzip-compressed: the page is 40 % of the 4.8 MB it was with the plain bundle
    (packed,) = re.findall(r'<script type="application/octet-stream" id="plotly-js-gzip">([^<]+)</script>', text)
    assert gzip.decompress(base64.b64decode(packed)).decode() == get_plotlyjs()
    assert len(text) < 0.5 * len(get_plotlyjs()) and text.count("plotly.js v") == 0
    figures = [json.loads(data) for data in re.findall(r'class="plot-data" data-target="[^"]+">([^<]*)</script>', text)]
    assert len(figures) == 2 + 5 and all(fig["data"] for fig in figures)
    series = figures[0]["layout"]
    assert series["yaxis"]["rangemode"] == "tozero" and series["yaxis2"]["rangemode"] == "tozero"  # axes from 0
    # summary, environment, two series, each source's report.md tables (A has 2 groups, B 3), the runs of each group
    assert sum(1 for tag, _ in page.tags if tag == "table") == 1 + 1 + 2 + 5 + 5
    assert "source" in page.headers and "fact" in page.headers
    assert "resnet50 fp32 samples/s, 4 devices (1n4g)" in page.headers
    assert "native samples/s (b128)" in page.headers
    assert 'class="differs"' in text  # torch 2.4.0 against 2.5.1
    assert "killed by SIGKILL" in text and "&lt;node-b&gt;" in text


def test_record_text_is_escaped(report):
    text = report.read_text()
    assert HOSTILE not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_single_folder_html_keeps_the_other_files(tmp_path, capsys):
    """The folder's sweep was cut off before its last run: the page says so first, as report.md does."""
    folder = write_source(tmp_path, "A")
    planned = [paths_of_record(path) for path in sorted(folder.rglob("*.json"))]
    save_planned(folder, [*planned, paths_of_record(folder / "resnet50" / "1n4g" / "resnet50_b128_fp32_9.json")], False)
    code, out, err = run_cli(["report", str(folder), "--format", "html"], capsys)
    assert code == 0, err
    assert out.split() == [str(folder / "report.html")]
    assert not (folder / "report.md").exists()
    page = (folder / "report.html").read_text()
    said = f"{len(planned)} of {len(planned) + 1} runs recorded; 1 run not run yet (resnet50/1n4g/resnet50_b128_fp32_9)"
    assert (
        f"<strong>Partial</strong>: the sweep in this folder was interrupted (no dlperf process holds it): {said}"
        in page
    )
    code, out, err = run_cli(["report", str(folder)], capsys)  # `all`: every format, the page too
    assert code == 0 and (folder / "report.md").exists() and str(folder / "report.html") in out.split()


def _browser() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def _chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--virtual-time-budget=10000",
    ]  # fmt: skip
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=180)


def _console(stderr: str) -> list[str]:
    """Chromium's `--enable-logging=stderr` writes every console message and uncaught error as `:CONSOLE`."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture
def browser():
    found = _browser()
    if found is None:
        pytest.skip(f"no headless browser ({', '.join(BROWSERS)}) installed: apt-get install chromium")
    return found


def test_console_capture_sees_errors(browser, tmp_path):
    """The check below can fail: a page that throws is caught."""
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    done = _chromium(browser, tmp_path / "profile", "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri())
    assert any("undefinedFunction is not defined" in line for line in _console(done.stderr)), done.stderr[-2000:]


def test_renders_in_headless_chromium(browser, report, tmp_path):
    args = ("--enable-logging=stderr", "--v=0", "--dump-dom", report.as_uri())
    done = _chromium(browser, tmp_path / "profile", *args)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _console(done.stderr) == []
    dom = parse(done.stdout)
    classes = [attrs.get("class") or "" for _tag, attrs in dom.tags]
    assert sum(1 for tag, _ in dom.tags if tag == "table") == 14
    figures = sum(1 for c in classes if "plotly-graph-div" in c.split())
    assert figures == 2 + 5  # two series overlays, one window plot per group of runs
    assert sum(1 for c in classes if c == "main-svg") >= figures  # plotly drew an SVG in every figure
    traces = sum(1 for c in classes if "scatterlayer" in c.split())
    assert traces >= figures

    shot = tmp_path / "report.png"
    done = _chromium(
        browser, tmp_path / "profile2", "--hide-scrollbars", "--window-size=1280,1600", f"--screenshot={shot}",
        report.as_uri(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
