"""`dlperf extract` end to end: the published figures through write_report, skipped files, exit statuses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

from dlperf.framework_logs.registry import BY_NAME

KERAS = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "tf2-keras-resnet50"


def _summary(out: Path) -> dict:
    cases = json.loads((out / "summary.json").read_text())["rn50"]["b128_fp32"]
    return {case: (v["median_speed"], v["average_speed"], v["speedup"]) for case, v in cases.items()}


def test_summary_reproduces_the_published_table(tmp_path, capsys):
    code, out, _ = run_cli(["extract", str(KERAS), "--out", str(tmp_path / "p")], capsys)
    assert code == 0
    assert _summary(tmp_path / "p") == {
        "1n1g": (321.80, 321.87, 1.00),
        "1n4g": (1143.46, 1141.43, 3.55),
        "2n8g": (4849.68, 4850.50, 15.07),
    }
    assert (tmp_path / "p" / "report.md").is_file() and str(tmp_path / "p" / "report.md") in out
    record = json.loads((tmp_path / "p" / "records" / "rn50" / "1n4g" / "rn50_b128_fp32_2.json").read_text())
    assert (record["source"], record["format"], record["rule"]) == ("extract", "tf2-keras", "printed")
    code, _, _ = run_cli(["extract", str(KERAS), "--rule", "timestamp", "--out", str(tmp_path / "t")], capsys)
    assert code == 0
    medians = {case: m for case, (m, _, _) in _summary(tmp_path / "t").items()}
    assert medians == {"1n1g": 321.74, "1n4g": 1143.29, "2n8g": 4848.89}
    # the written records are a results folder `dlperf report` reads again, to the same figures
    code, _, _ = run_cli(["report", str(tmp_path / "p"), "--format", "json", "--out", str(tmp_path / "again")], capsys)
    assert code == 0 and _summary(tmp_path / "again") == _summary(tmp_path / "p")


def test_no_speedup_is_invented_without_1n1g(tmp_path, capsys):
    logs = tmp_path / "logs"
    for case in ("1n4g", "2n8g"):
        shutil.copytree(KERAS / case, logs / case)
    code, _, _ = run_cli(["extract", str(logs), "--out", str(tmp_path / "out")], capsys)
    assert code == 0
    assert {case: s for case, (_, _, s) in _summary(tmp_path / "out").items()} == {"1n4g": None, "2n8g": None}


def test_bad_files_are_skipped_one_line_each_and_exit_3(tmp_path, capsys):
    logs = tmp_path / "bz128"
    shutil.copytree(KERAS, logs)
    real = (KERAS / "1n1g" / "rn50_b128_fp32_1.log").read_bytes()
    bad = logs / "1n8g"
    bad.mkdir()
    (bad / "rn50_b128_fp32_1.log").write_bytes(b"")
    (bad / "rn50_b128_fp32_2.log").write_bytes(real[: real.index(b"examples/second between steps 300") + 5])
    (bad / "rn50_b128_fp32_3.log").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    (bad / "rn50_b128_fp32_4.log").write_text("Epoch 1/90\n1000/1000 [====] - 39s - loss: 6.9\n")
    lines = real.decode().splitlines(keepends=True)
    first_window = next(i for i, line in enumerate(lines) if "TimeHistory" in line)
    (bad / "rn50_b128_fp32_5.log").write_text("".join(lines[: first_window + 1]))  # only the warm-up window
    (logs / "notes.log").write_text("not in a topology folder\n")
    code, _, err = run_cli(["extract", str(logs), "--out", str(tmp_path / "out")], capsys)
    assert code == 3
    skipped = [line for line in err.splitlines() if line.startswith("dlperf: skipped ")]
    reasons = {Path(line.split(" ")[2].rstrip(":")).name: line for line in skipped}
    assert len(skipped) == 5
    assert "the file is empty" in reasons["rn50_b128_fp32_1.log"]
    # a file ending without a line end (a posted log) is read, its cut last line (not a whole TimeHistory line)
    # giving nothing, and the record says so
    cut = json.loads(next((tmp_path / "out" / "records").rglob("1n8g/rn50_b128_fp32_2.json")).read_text())
    assert cut["status"] == "ok" and any("ends without a line end" in n for n in cut["reading_notes"])
    assert "binary content" in reasons["rn50_b128_fp32_3.log"]
    assert "no line of a known format" in reasons["rn50_b128_fp32_4.log"]
    assert "inside the 100-iteration warm-up" in reasons["rn50_b128_fp32_5.log"]
    assert "not a topology" in reasons["notes.log"]
    assert "Traceback" not in err
    assert set(_summary(tmp_path / "out")) == {"1n1g", "1n4g", "1n8g", "2n8g"}


def test_usage_errors_are_one_line_exit_2(tmp_path, capsys):
    code, _, err = run_cli(["extract", str(tmp_path / "missing")], capsys)
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err
    code, _, err = run_cli(["extract", str(KERAS), "--format", "pytorch-imagenet", "--rule", "timestamp"], capsys)
    assert code == 2 and err.count("\n") == 1 and "supports only the printed rule" in err
    code, _, err = run_cli(["extract", str(KERAS), "--format", "caffe"], capsys)
    assert code == 2 and err.count("\n") == 1 and "unknown log format 'caffe'" in err
    code, _, err = run_cli(["extract", str(KERAS), "--warmup", "-1"], capsys)
    assert code == 2 and "non-negative" in err
    empty = tmp_path / "empty" / "1n1g"
    empty.mkdir(parents=True)
    (empty / "rn50_b128_fp32_1.log").write_text("")
    code, _, err = run_cli(["extract", str(tmp_path / "empty"), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "none of the 1 logs" in err.splitlines()[-1]


def test_list_formats_names_every_format_with_its_defaults(capsys):
    code, out, _ = run_cli(["extract", "--list-formats"], capsys)
    assert code == 0
    for name, fmt in BY_NAME.items():
        assert f"\n{name}\n" in f"\n{out}"
        assert f"warm-up: {fmt.warmup} " in out and f"unit: {fmt.unit}" in out


@pytest.mark.parametrize("rule", ["printed", "timestamp"])
def test_forced_format_reads_like_auto(tmp_path, capsys, rule):
    args = ["extract", str(KERAS), "--rule", rule, "--format", "tf2-keras"]
    code, _, _ = run_cli([*args, "--out", str(tmp_path / "forced")], capsys)
    assert code == 0
    code, _, _ = run_cli([*args[:-2], "--out", str(tmp_path / "auto")], capsys)
    assert code == 0
    assert _summary(tmp_path / "forced") == _summary(tmp_path / "auto")


def test_one_log_without_the_layout(tmp_path, capsys):
    """An MLPerf result file as published (`result_01.txt`), its shape given: the same figure as in the layout."""
    source = (
        Path(__file__).parents[1] / "fixtures/peer-logs/real-2/mlperf/1n8g/retinanet-supermicro-v50_b32_mixed_1.log"
    )
    log = tmp_path / "result_01.txt"
    shutil.copy(source, log)
    code, _, err = run_cli(["extract", str(log), "--nodes", "1"], capsys)
    assert code == 2 and err.count("\n") == 1 and "--devices-per-node --batch-size" in err
    args = ["extract", str(log), "--nodes", "1", "--devices-per-node", "8", "--batch-size", "32"]
    code, _, err = run_cli([*args, "--model", "retinanet", "--no-plots"], capsys)
    assert code == 0, err
    (record_file,) = (tmp_path / "result_01-extract" / "records").rglob("*.json")
    record = json.loads(record_file.read_text())
    assert (record["model"], record["case"], record["unit"]) == ("retinanet", "1n8g", "images/s")
    assert record["throughput"] == pytest.approx(3853.17, rel=1e-5)
