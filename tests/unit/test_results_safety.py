"""No result lost or mixed (issue 11): history keyed by content, sweeps kept apart, reports never replaced unasked."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import assert_one_line_error, run_cli
from report_records import record

from dlperf.records.store import write_json_atomic
from dlperf.reporting.history import add_records, record_key

KERAS = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "tf2-keras-resnet50"


def extracted(rule_file: str, speed: float) -> dict:
    """An extracted record as `dlperf extract` writes it: no started_at, its source file named."""
    return record("1n1g", 1, speed, started_at=None, file=rule_file, rule="printed")


def test_history_keeps_two_extracted_sources_alike_in_case_and_repeat(tmp_path, capsys):
    first = tmp_path / "a"
    write_json_atomic(first / "records" / "oneflow.json", extracted("oneflow/1n1g/r_1.log", 321.8))
    write_json_atomic(first / "records" / "tf2.json", extracted("tf2/1n1g/r_1.log", 300.1))
    db = tmp_path / "h.sqlite"
    code, out, err = run_cli(["history", "add", str(first), "--db", str(db), "--label", "x"], capsys)
    assert code == 0, err
    assert "2 new records stored" in out  # same model/group/case/repeat, different sources: both kept
    # the same folder again: nothing new, and each true duplicate is named
    code, out, _ = run_cli(["history", "add", str(first), "--db", str(db), "--label", "x"], capsys)
    assert "0 new records stored" in out and "2 records were already stored with identical content" in out
    assert str(first / "records" / "oneflow.json") in out
    # another rule over the same log is another record
    other = extracted("oneflow/1n1g/r_1.log", 321.8) | {"rule": "timestamp"}
    outcome = add_records(db, [other], "x")
    assert len(outcome.stored) == 1 and not outcome.duplicates
    assert record_key(other) != record_key(extracted("oneflow/1n1g/r_1.log", 321.8))
    assert record_key({**other, "_path": "elsewhere"}) == record_key(other)  # where it was read from is not content


def sweep_folder(root: Path, sweep: str, speeds: list[float]) -> None:
    for i, speed in enumerate(speeds, 1):
        rec = record("1n1g", i, speed, sweep_id=sweep)
        write_json_atomic(root / sweep / "resnet50" / "1n1g" / f"resnet50_b128_fp32_{i}.json", rec)


def test_report_keeps_two_sweeps_apart_unless_merged(tmp_path, capsys):
    sweep_folder(tmp_path, "20261101T000000Z-aaaaaa", [100.0, 101.0, 99.0])
    sweep_folder(tmp_path, "20261102T000000Z-bbbbbb", [10.0, 11.0, 9.0])
    code, _, err = run_cli(["report", str(tmp_path)], capsys)
    assert_one_line_error(
        code, err, "2 sweeps", "20261101T000000Z-aaaaaa (3 records)", "20261102T000000Z-bbbbbb", "--merge"
    )
    assert not (tmp_path / "report.md").exists()
    code, _, err = run_cli(["report", str(tmp_path), "--merge"], capsys)
    assert code == 0, err
    merged = json.loads((tmp_path / "summary.json").read_text())["resnet50"]["b128_fp32"]["1n1g"]
    assert merged["repeats"] == 6
    code, _, err = run_cli(["report", str(tmp_path / "20261101T000000Z-aaaaaa")], capsys)
    assert code == 0, err  # one sweep's own folder reports alone


def test_report_out_refuses_to_replace_a_report(tmp_path, capsys):
    sweep_folder(tmp_path / "res", "s", [100.0, 101.0])
    target = tmp_path / "shared"
    target.mkdir()
    (target / "report.md").write_text("the ResNet section someone wrote\n")
    code, _, err = run_cli(["report", str(tmp_path / "res"), "--out", str(target)], capsys)
    assert_one_line_error(code, err, f"{target / 'report.md'} already exists", "--overwrite")
    assert (target / "report.md").read_text() == "the ResNet section someone wrote\n"
    code, _, err = run_cli(["report", str(tmp_path / "res"), "--out", str(target), "--overwrite"], capsys)
    assert code == 0, err
    assert (target / "report.md").read_text().startswith("# dlperf report")
    # the folder's own report is rebuilt from its own records: nothing is lost, no flag needed
    assert run_cli(["report", str(tmp_path / "res")], capsys)[0] == 0
    assert run_cli(["report", str(tmp_path / "res")], capsys)[0] == 0


def test_extract_refuses_to_replace_a_report(tmp_path, capsys):
    source = KERAS
    out = tmp_path / "out"
    code, _, err = run_cli(["extract", str(source), "--out", str(out)], capsys)
    assert code in (0, 3), err
    before = (out / "report.md").read_text()
    code, _, err = run_cli(["extract", str(source), "--out", str(out)], capsys)
    assert code == 2 and f"{out / 'summary.json'} already exists" in err and "--overwrite" in err
    assert (out / "report.md").read_text() == before
    code, _, err = run_cli(["extract", str(source), "--out", str(out), "--overwrite"], capsys)
    assert code in (0, 3), err


def test_a_new_sweep_does_not_replace_another_sweeps_report(tmp_path, capsys):
    config = tmp_path / "sweep.yaml"
    config.write_text("model: resnet50\ndevice: cpu\nimage_size: 32\nrepeats: 1\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("another sweep's report\n")
    code, _, err = run_cli(["sweep", str(config), "--out", str(out)], capsys)
    # the hint names --resume first (the folder keeps the sweep's options), then --overwrite
    assert_one_line_error(code, err, f"{out} already holds an earlier sweep's report.md", "--overwrite")
    assert err.index(f"dlperf sweep --resume --out {out}") < err.index("--overwrite")
    assert (out / "report.md").read_text() == "another sweep's report\n"


def test_a_new_sweep_keeps_an_interrupted_runs_log_and_console(tmp_path, capsys):
    """An interrupted sweep leaves its running run's log and console without a record: the same sweep again without
    --resume is refused, and both files are kept byte for byte (they were emptied before)."""
    config = tmp_path / "sweep.yaml"
    config.write_text("model: resnet50\ndevice: cpu\nimage_size: 32\nbatch_size: 4\nrepeats: 1\n")
    out = tmp_path / "out"
    folder = out / "resnet50" / "1n1g"
    folder.mkdir(parents=True)
    (folder / "resnet50_b4_fp32_1.log").write_text("[dlperf] config {}\n")
    (folder / "resnet50_b4_fp32_1.console.txt").write_text("the ranks' own lines\n")
    code, _, err = run_cli(["sweep", str(config), "--out", str(out)], capsys)
    assert_one_line_error(code, err, f"{out} already holds an interrupted run's resnet50_b4_fp32_1.log", "--resume")
    assert (folder / "resnet50_b4_fp32_1.log").read_text() == "[dlperf] config {}\n"
    assert (folder / "resnet50_b4_fp32_1.console.txt").read_text() == "the ranks' own lines\n"
