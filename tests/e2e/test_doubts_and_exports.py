"""What a person sees: one set of doubt rules everywhere, the published table shape, filled latency and memory cells,
tidy CSV and TensorBoard exports, and the HTML page showing report.md's flags in a real browser."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import run_cli
from report_records import record

from dlperf.cli.display import eta_text, run_line
from dlperf.records.load import as_record
from dlperf.records.store import write_json_atomic
from dlperf.reporting.doubts import console_flags, run_doubts

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def write(folder: Path, rec: dict) -> None:
    write_json_atomic(folder / rec["model"] / rec["case"] / f"{rec['group']}_{rec['repeat']}.json", rec)


def test_jax_resnet_line_without_flops_never_stops_a_sweep():
    """Issue 21: a JAX ResNet-50 record has tflops_per_device None; the sweep's run line once crashed on it."""
    jax_run = record("1n1g", 1, 123.4, engine="jax", tflops_per_device=None, mfu=None)
    line = run_line(jax_run)
    assert line.startswith("resnet50 1n1g b128_fp32 #1: 123.40 samples/s, 9.0 ms/iter (p50)") and "TFLOP" not in line
    torch_run = record("1n1g", 1, 123.4, tflops_per_device=1.5, mfu=0.1)
    assert "1.5 TFLOP/s per device, MFU 10.0%" in run_line(torch_run)
    external = record("1n1g", 1, 50.0, latency_ms={"mean": 20.0})  # an external script's log: a mean only
    assert "20.0 ms/iter (mean)" in run_line(external)


def test_two_windows_are_too_few_not_never_stable():
    """The docs' example runs 2 windows: the steady-state check needs 3, so it says that, not NEVER STABLE."""
    steady = {"stable": False, "windows_required": 3, "reason": "never stable: no 3 consecutive windows"}
    short = record("1n1g", 1, 10.0, window_throughputs=[10.0, 10.1], steady_state=steady)
    assert [d.label for d in run_doubts(short)] == ["few windows"]
    assert "FEW WINDOWS: 2 timing windows, fewer than the 3" in console_flags(short)
    assert "NEVER STABLE" not in console_flags(short)
    long = record("1n1g", 1, 10.0, window_throughputs=[10.0, 20.0, 5.0, 30.0], steady_state=steady)
    assert "[NEVER STABLE: no 3 consecutive windows]" in console_flags(long)


def test_grammar_of_counts():
    assert eta_text(None, 1) == "1 run left, ETA after the first run"
    assert eta_text(120.0, 2, ["resnet50 1n2g b4_fp32"]) == (
        "2 runs left, ETA 2m00s or more (resnet50 1n2g b4_fp32 not yet timed)"
    )


@pytest.fixture
def flagged(tmp_path) -> Path:
    """1n1g: 3 quiet repeats at 100; 1n2g: 3 repeats, one noisy, spread CV 39.8 %, speedup 6.70 (eff. 335 %)."""
    folder = tmp_path / "res"
    noisy = {"noisy": True, "noise_reasons": ["other processes kept 1.5 of 2 cores busy"]}
    for i in (1, 2, 3):
        write(folder, record("1n1g", i, 100.0))
    d = 266.668  # 670 +- d: CV d / 670 = 39.8 %
    for i, speed in enumerate([670.0 - d, 670.0, 670.0 + d], 1):
        write(folder, record("1n2g", i, speed, **(noisy if i == 1 else {})))
    return folder


def test_csv_beside_summary_one_row_per_run_and_per_case(flagged, capsys):
    code, out, err = run_cli(["report", str(flagged), "--format", "json"], capsys)
    assert code == 0, err
    assert str(flagged / "runs.csv") in out and str(flagged / "cases.csv") in out
    runs = list(csv.DictReader((flagged / "runs.csv").open()))
    assert len(runs) == 6 and runs[0]["case"] == "1n1g" and runs[-1]["case"] == "1n2g"
    assert [r["flags"] for r in runs if r["case"] == "1n2g"] == ["noisy", "", ""]
    assert runs[0]["latency_ms_p50"] == "9" and runs[0]["peak_memory_mib"] == "1001"  # 6 significant digits
    assert runs[0]["memory_kind"] == "allocated"
    cases = {c["case"]: c for c in csv.DictReader((flagged / "cases.csv").open())}
    two = cases["1n2g"]
    assert (two["node_num"], two["gpu_num"], two["devices_per_node"]) == ("1", "2", "2")
    assert float(two["median_speed"]) == 670.0 and float(two["median_speed_per_device"]) == 335.0
    assert float(two["speedup"]) == 6.7 and float(two["scaling_efficiency"]) == 3.35
    assert two["flags"] == "eff>100%;CV;noisy"
    summary = json.loads((flagged / "summary.json").read_text())["resnet50"]["b128_fp32"]["1n2g"]
    assert summary["flags"] == ["eff>100%", "CV", "noisy"] and summary["median_speed_per_device"] == 335.0


def test_tensorboard_export_reads_back(flagged, tmp_path, capsys):
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    logdir = tmp_path / "tb"
    code, _, err = run_cli(["report", str(flagged), "--format", "md", "--tensorboard", str(logdir)], capsys)
    assert code == 0, err
    events = accumulator.EventAccumulator(str(logdir / "resnet50" / "b128_fp32"))
    events.Reload()
    speeds = [(s.step, s.value) for s in events.Scalars("median_speed")]
    assert speeds == [(1, 100.0), (2, 670.0)]  # steps are devices
    assert [round(s.value, 3) for s in events.Scalars("scaling_efficiency")] == [1.0, 3.35]


def test_external_runs_fill_latency_and_memory_cells(tmp_path, capsys):
    """A `--command` run's log gives a mean step time and its process tree a reserved figure: both are shown."""
    folder = tmp_path / "ext"
    for i in (1, 2, 3):
        write(folder, record("1n1g", i, 50.0, latency_ms={"mean": 20.0}, peak_memory_mib={"reserved": 3000.0}))
    code, _, err = run_cli(["report", str(folder), "--format", "md"], capsys)
    assert code == 0, err
    row = next(line for line in (folder / "report.md").read_text().splitlines() if line.startswith("| 1 | 1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[12:14] == ["20.0 (mean)", "3000 (reserved)"]


def test_extracted_footnotes_speak_of_logs_not_repeats(tmp_path, capsys):
    folder = tmp_path / "peer"
    for i in (1, 2):
        write(folder, record("1n1g", i, 100.0 + i, kind="extracted", source="extract", format="oneflow"))
    code, _, err = run_cli(["report", str(folder), "--format", "md"], capsys)
    assert code == 0, err
    text = (folder / "report.md").read_text()
    assert "- 1n1g [n=2]: median of 2 good runs, fewer than 3: the logs hold too few runs" in text
    assert "--repeats auto" not in text


def test_gpt_layouts_table_has_flags():
    from dlperf.reporting.layouts_table import layouts_table

    noisy = {"noisy": True, "noise_reasons": ["window CV 56.8 % above 5 %"]}
    rows = [
        {
            **record("1n2g", i, 10.0 + 0.1 * i, table="layouts", **(noisy if i == 1 else {})),
            "model": "gpt",
            "group": "DP_fp32",
        }
        for i in (1, 2, 3)
    ]
    lines = layouts_table({"DP_fp32": [as_record(r) for r in rows]})
    header = next(line for line in lines if line.startswith("| group"))
    row = next(line for line in lines if line.startswith("| DP"))
    assert header.endswith("| repeats | flags |") and row.endswith("| 3 | noisy |")
    assert any(
        line.startswith("- DP_fp32 [noisy]: 1 of 3 repeats ran noisy (window CV 56.8 % above 5 %).") for line in lines
    )


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []

    def handle_data(self, data):
        self.text.append(data)


def _browser() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def test_html_shows_the_same_flags_as_report_md_in_a_browser(flagged, tmp_path, capsys):
    """report.md and report.html of one folder: every flag label and footnote of the markdown is on the rendered
    page, and the screenshot shows the flagged cells highlighted."""
    browser = _browser()
    if browser is None:
        pytest.skip(f"no headless browser ({', '.join(BROWSERS)}) installed: apt-get install chromium")
    code, _, err = run_cli(["report", str(flagged), "--format", "md"], capsys)
    assert code == 0, err
    code, _, err = run_cli(["report", str(flagged), "--format", "html"], capsys)
    assert code == 0, err
    markdown = (flagged / "report.md").read_text()
    notes = [line[2:] for line in markdown.splitlines() if line.startswith("- 1n2g [")]
    assert len(notes) == 3  # eff>100%, CV, noisy
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=10000",
    ]  # fmt: skip
    page = (flagged / "report.html").as_uri()
    done = subprocess.run([browser, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    parser = _Text()
    parser.feed(done.stdout)
    text = " ".join(" ".join(parser.text).split())
    for note in notes:
        assert " ".join(note.split()) in text
    assert "eff>100%, CV, noisy" in text  # the row's flags cell, as in report.md
    assert "eff>100%, CV, noisy |" in markdown

    shot = tmp_path / "report.png"
    args = [*flags, f"--screenshot={shot}", "--window-size=1400,2400", "--hide-scrollbars", page]
    done = subprocess.run([browser, *args], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    from PIL import Image

    colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 24)
    highlighted = sum(count for count, colour in colours if colour == (0xFF, 0xF3, 0xCD))  # tr.flagged's last cell
    assert highlighted > 500, "no flagged cell is highlighted in the screenshot"


def test_cross_source_report_keeps_each_sources_columns_and_flags(flagged, tmp_path, capsys):
    """The cross-source report.md once showed medians only: now each source's tables follow, flags and all."""
    other = tmp_path / "other"
    for i in (1, 2, 3):
        write(other, record("1n1g", i, 90.0 + i))
    out = tmp_path / "cmp"
    code, _, err = run_cli(["report", str(flagged), str(other), "--format", "md", "--out", str(out)], capsys)
    assert code == 0, err
    text = (out / "report.md").read_text()
    assert "### res" in text and "### other" in text
    assert "| node_num | gpu_num | samples/s | speedup | samples/s per device |" in text
    assert "| 1 | 2 | 670.00 | 6.70 | 335.00 | 2 | 335.0% |" in text and "eff>100%, CV, noisy |" in text
    assert "- 1n2g [eff>100%]: scaling efficiency 335% is above 100 %" in text
