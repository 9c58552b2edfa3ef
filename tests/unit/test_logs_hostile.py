"""Hostile framework logs (issue 12): impossible throughputs, names that forge output or are not UTF-8, path parts that
climb out of the records folder, and `*.log` entries that are not files."""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
from pathlib import Path

import pytest
from conftest import run_cli, run_dlperf

from dlperf.errors import DataError, ResultsError
from dlperf.framework_logs.base import Point, RunShape
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.measure import measure
from dlperf.framework_logs.plausibility import MAX_SAMPLES_PER_S_PER_DEVICE
from dlperf.framework_logs.published_names import find_logs, parse_log_path
from dlperf.framework_logs.registry import BY_NAME

KERAS = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "tf2-keras-resnet50"
LINE = (
    "I0826 15:{:02d}:00.000000 1 keras_utils.py:133] TimeHistory: 40.00 seconds, {} examples/second "
    "between steps {} and {}\n"
)


def keras_log(path: Path, speeds: list[str], warmup: str = "50.0") -> Path:
    """A tf2-keras log: a warm-up window (steps 0-100, skipped by the rule), then one window per speed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [LINE.format(0, warmup, 0, 100)]
    lines += [LINE.format(i, speed, i * 100, i * 100 + 100) for i, speed in enumerate(speeds, 1)]
    path.write_text("".join(lines))
    return path


# --- 1. throughputs that cannot be a training speed ---------------------------------------------------------


def test_a_negative_line_is_rejected_not_averaged_in(tmp_path):
    record = read_run(
        parse_log_path(keras_log(tmp_path / "1n1g" / "rn50_b128_fp32_1.log", ["100", "-300", "110"])), Options()
    )
    assert record["status"] == "ok"
    assert record["throughput"] == pytest.approx((100 + 110) / 2)
    assert record["rejected_lines"] == 1
    assert "iteration 300" in record["rejected_reason"] and "-300" in record["rejected_reason"]
    assert record["kept_lines"] == 2


@pytest.mark.parametrize(
    "point",
    [
        Point(step=2, start=1, speed=1e308),
        Point(step=2, start=1, speed=math.nan),
        Point(step=2, start=1, speed=math.inf),
        Point(step=2, start=1, speed=0.0),
        Point(step=2, start=1, seconds=0.0),
        Point(step=2, start=1, seconds=math.nan),
        Point(step=2, start=1, seconds=-1.0),
        Point(step=2, start=1, seconds=1e-12),  # 128 samples in a picosecond
    ],
)
def test_impossible_figures_are_rejected_per_line(point):
    fmt, shape = BY_NAME["tf2-keras"], RunShape(global_batch=128, world_size=1)
    points = [Point(step=1, start=0, speed=100.0), point, Point(step=3, start=2, speed=110.0)]
    result = measure(points, fmt, "printed", warmup=0, window=None, shape=shape)
    assert result.throughput == pytest.approx(105.0)
    assert (result.rejected_lines, result.kept) == (1, 2)
    assert result.rejected_reason.startswith("iteration 2: ")


def test_the_bound_scales_with_the_world_size():
    fmt = BY_NAME["tf2-keras"]
    fast = [
        Point(step=1, speed=3 * MAX_SAMPLES_PER_S_PER_DEVICE),
        Point(step=2, start=1, speed=3 * MAX_SAMPLES_PER_S_PER_DEVICE),
    ]
    eight = measure(fast, fmt, "printed", 0, None, RunShape(global_batch=1024, world_size=8))
    assert (eight.throughput, eight.rejected_lines) == (3 * MAX_SAMPLES_PER_S_PER_DEVICE, 0)
    with pytest.raises(DataError, match=r"^all 2 throughput lines rejected \(iteration 1: throughput 3e\+08 is above"):
        measure(fast, fmt, "printed", 0, None, RunShape(global_batch=128, world_size=1))


def test_the_timestamp_rule_is_held_to_the_same_bound():
    """Sane lines whose stamps are a microsecond apart: 100 iterations of 128 samples in 1e-6 s is no speed."""
    points = [Point(step=100 * i, start=100 * i - 100, speed=300.0, timestamp=1000.0 + i * 1e-6) for i in (1, 2)]
    with pytest.raises(DataError, match=r"^the timestamp rule gives 1\.28e\+10, above the plausible 1e\+08"):
        measure(points, BY_NAME["tf2-keras"], "timestamp", 100, None, RunShape(global_batch=128, world_size=1))


def test_a_log_of_only_impossible_lines_is_skipped_with_the_count(tmp_path):
    log = keras_log(tmp_path / "1n1g" / "rn50_b128_fp32_1.log", ["-1", "0", "1e999"], warmup="1e308")
    with pytest.raises(DataError, match=r"^all 4 throughput lines rejected \(iteration 100: throughput 1e\+308 is "):
        read_run(parse_log_path(log), Options())


def test_impossible_lines_leave_the_report_and_its_plot_intact(tmp_path, capsys):
    logs = tmp_path / "logs"
    bad = ["1e308", "1e999", "0", "0.000"]  # 1e999 reads as inf
    for case, good in (("1n1g", "100"), ("1n2g", "200")):
        for repeat, value in enumerate(bad, 1):
            keras_log(logs / case / f"rn50_b128_fp32_{repeat}.log", [good, value, good])
    code, out, err = run_cli(["extract", str(logs), "--out", str(tmp_path / "out")], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["rn50"]["b128_fp32"]
    assert {case: v["speeds"] for case, v in summary.items()} == {"1n1g": [100.0] * 4, "1n2g": [200.0] * 4}
    plot = tmp_path / "out" / "plots" / "rn50_b128_fp32.png"
    assert plot.stat().st_size > 1000 and str(plot) in out
    record = json.loads((tmp_path / "out" / "records" / "rn50" / "1n2g" / "rn50_b128_fp32_2.json").read_text())
    assert record["rejected_lines"] == 1 and "inf" in record["rejected_reason"]


# --- 2. names printed escaped, non-UTF-8 names read ---------------------------------------------------------


def test_a_name_with_a_newline_cannot_forge_output_lines(tmp_path, capsys):
    logs = tmp_path / "logs"
    shutil.copytree(KERAS / "1n1g", logs / "1n1g")
    forged = "x.log\ndlperf: extracted 99 logs, skipped 0\nz.log"
    (logs / "1n1g" / forged).write_text("nothing\n")
    (logs / "1n1g" / "\x1b[2J\x1b[31mred.log").write_text("nothing\n")
    code, out, err = run_cli(["extract", str(logs), "--out", str(tmp_path / "out"), "--no-plots"], capsys)
    assert code == 3
    lines = err.splitlines()
    skipped = [line for line in lines if line.startswith("dlperf: skipped ")]
    assert len(skipped) == 2
    assert any("x.log\\ndlperf: extracted 99 logs, skipped 0\\nz.log" in line for line in skipped)
    assert any("\\x1b[2J\\x1b[31mred.log" in line for line in skipped)
    assert "\x1b" not in err + out
    assert [line for line in lines if "extracted" in line and not line.startswith("dlperf: skipped ")] == [
        "dlperf: extracted 5 logs, skipped 2"
    ]


def test_a_folder_name_that_is_not_utf8_is_read_and_recorded_as_text(tmp_path, capsys):
    logs = os.fsencode(tmp_path / "logs")
    folder = os.path.join(logs, b"bz\xff", b"1n1g")
    os.makedirs(folder)
    shutil.copy(KERAS / "1n1g" / "rn50_b128_fp32_1.log", os.path.join(folder, b"rn50_b128_fp32_1.log"))
    out = tmp_path / "out"
    code, stdout, err = run_cli(["extract", os.fsdecode(logs), "--out", str(out), "--no-plots"], capsys)
    assert code == 0, err
    raw = (out / "records" / "rn50" / "1n1g" / "rn50_b128_fp32_1.json").read_bytes()
    record = json.loads(raw.decode("utf-8"))  # strict: valid UTF-8
    assert record["file"].endswith("/bz\\xff/1n1g/rn50_b128_fp32_1.log")
    plain = read_run(parse_log_path(KERAS / "1n1g" / "rn50_b128_fp32_1.log"), Options())
    assert record["throughput"] == plain["throughput"]
    json.loads((out / "summary.json").read_bytes().decode("utf-8"))


# --- 3. path parts from names stay plain ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["..", ".", "-rm", "a b", "r\u202en50", "bz\udcff"])
def test_model_names_must_be_plain(tmp_path, name):
    with pytest.raises(DataError, match=r"its model name .* is not a plain name"):
        parse_log_path(tmp_path / "1n1g" / f"{name}_b128_fp32_1.log")


def test_a_dotdot_model_is_skipped_and_nothing_leaves_the_records_folder(tmp_path, capsys):
    logs = tmp_path / "logs"
    shutil.copytree(KERAS / "1n1g", logs / "1n1g")
    shutil.copy(KERAS / "1n1g" / "rn50_b128_fp32_1.log", logs / "1n1g" / ".._b128_fp32_1.log")
    out = tmp_path / "out"
    code, _, err = run_cli(["extract", str(logs), "--out", str(out), "--no-plots"], capsys)
    assert code == 3
    assert "1n1g/.._b128_fp32_1.log: its model name '..' is not a plain name" in err
    written = {p.relative_to(out) for p in out.rglob("*") if p.is_file()}
    assert {p for p in written if p.parts[0] == "records"} == {
        Path("records", "rn50", "1n1g", f"rn50_b128_fp32_{i}.json") for i in range(1, 6)
    }
    others = {p for p in written if p.parts[0] != "records"}
    assert others == {
        Path(n) for n in ("report.md", "summary.json", "runs.csv", "cases.csv")
    }  # and no lock: a finished writer removes it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "out"]


def test_a_record_target_outside_the_records_folder_is_refused(tmp_path):
    from dlperf.framework_logs.extract import record_target
    from dlperf.reporting.results_writes import record_files

    forged = {"source": "extract", "model": "..", "case": "..", "file": "/logs/1n1g/escape_b1_fp32_1.log"}
    with pytest.raises(ResultsError, match="would be written outside"):
        record_files(tmp_path / "out" / "records", [forged], record_target)


# --- 4. *.log entries that are not regular files ------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_entries_that_are_not_files_are_skipped_with_the_reason_and_never_opened(tmp_path):
    logs = tmp_path / "logs"
    case = logs / "1n1g"
    shutil.copytree(KERAS / "1n1g", case)
    os.mkfifo(case / "fifo_b128_fp32_1.log")
    (case / "dir_b128_fp32_1.log").mkdir()
    (case / "loop_b128_fp32_1.log").symlink_to("loop_b128_fp32_1.log")
    (case / "gone_b128_fp32_1.log").symlink_to("nowhere.log")
    os.mknod(case / "null_b128_fp32_1.log", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    (case / "link_b128_fp32_9.log").symlink_to(case / "rn50_b128_fp32_1.log")  # a symlink to a file: read
    found, skipped = find_logs(logs)
    reasons = {p.path.name: p.reason for p in skipped}
    assert reasons == {
        "dir_b128_fp32_1.log": "is a directory, not a log file",
        "fifo_b128_fp32_1.log": "is a FIFO, not a log file",
        "gone_b128_fp32_1.log": "is a broken symlink (its target does not exist)",
        "loop_b128_fp32_1.log": "is a symlink loop",
        "null_b128_fp32_1.log": "is a device, not a log file",
    }
    assert case / "link_b128_fp32_9.log" in found and len(found) == 6
    result = run_dlperf(["extract", str(logs), "--out", str(tmp_path / "out"), "--no-plots"], timeout=30)
    assert result.returncode == 3, result.stderr
    for name, reason in reasons.items():
        assert f"dlperf: skipped {case / name}: {reason}" in result.stderr.splitlines()
    assert "extracted 6 logs, skipped 5" in result.stderr


def test_a_fifo_swapped_in_after_listing_is_refused_without_blocking(tmp_path):
    log = tmp_path / "1n1g" / "rn50_b128_fp32_1.log"
    log.parent.mkdir()
    os.mkfifo(log)
    with pytest.raises(DataError, match="not a regular file"):
        read_run(parse_log_path(log), Options())
