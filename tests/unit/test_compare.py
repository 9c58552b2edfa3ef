"""`dlperf compare` on results folders with known-noise repeats: verdicts, exit status, JSON, bad threshold."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cli
from report_records import record
from test_verdict import known_noise, runs

from dlperf.records.store import write_json_atomic


def write_case(root, case: str, speeds: list[float | None]) -> None:
    for i, speed in enumerate(speeds, 1):
        write_json_atomic(root / "resnet50" / case / f"resnet50_b128_fp32_{i}.json", record(case, i, speed))


@pytest.fixture
def folders(tmp_path):
    base, new = tmp_path / "base", tmp_path / "new"
    write_case(base, "1n1g", known_noise(0, 5, 100.0, 0.005))
    write_case(new, "1n1g", known_noise(1, 5, 93.0, 0.005))  # 7 % slower, quiet: slower
    write_case(base, "1n2g", known_noise(2, 5, 200.0, 0.005))
    write_case(new, "1n2g", known_noise(3, 3, 186.0, 0.08))  # 7 % slower, 3 noisy repeats: inconclusive
    write_case(base, "1n4g", [400.0, 401.0, 399.0])
    write_case(new, "1n4g", [None, None])  # fails where it ran: a regression
    write_case(new, "1n8g", [800.0, 801.0, 799.0])  # new case: no verdict
    return base, new


def test_verdicts_and_exit_status(folders, capsys):
    base, new = folders
    code, out, _ = run_cli(["compare", str(base), str(new), "--json"], capsys)
    assert code == 1
    rows = {r["case"]: r for r in json.loads(out)}
    assert rows["1n1g"]["verdict"] == "slower" and rows["1n1g"]["regressed"]
    assert rows["1n1g"]["ratio"] == pytest.approx(93.0 / 100.0, rel=0.01) and rows["1n1g"]["ci_high"] < 0.95
    assert rows["1n1g"]["p_value"] < 0.001 and len(rows["1n1g"]["new_speeds"]) == 5
    assert rows["1n2g"]["verdict"] == "inconclusive" and not rows["1n2g"]["regressed"]
    assert rows["1n4g"]["verdict"] == "failed" and rows["1n4g"]["regressed"]
    assert rows["1n8g"]["verdict"] == "only-new" and not rows["1n8g"]["regressed"]


def test_inconclusive_alone_does_not_fail_ci(folders, capsys):
    base, new = folders
    code, out, _ = run_cli(["compare", str(base / "resnet50" / "1n2g"), str(new / "resnet50" / "1n2g")], capsys)
    assert code == 0
    assert "0 of 1 cases slower by more than 5%" in out and "1 inconclusive" in out
    code, out, _ = run_cli(["compare", str(base), str(base)], capsys)
    assert code == 0 and "0 of 3 cases" in out and "same" in out


@pytest.mark.parametrize("threshold", ["-0.1", "1", "5", "nan"])
def test_threshold_outside_unit_interval_is_one_line(folders, threshold, capsys):
    base, new = folders
    code, out, err = run_cli(["compare", str(base), str(new), "--threshold", threshold], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--threshold: must be a fraction in [0, 1)" in err


def test_history_show_uses_the_same_verdicts(tmp_path, capsys):
    from dlperf.reporting.history import history

    db = str(tmp_path / "h.sqlite")
    for label, speeds, t0 in (
        ("v1", known_noise(0, 5, 100.0, 0.005), 1000.0),
        ("v2", known_noise(1, 5, 93.0, 0.005), 2000.0),
    ):
        folder = tmp_path / label
        for i, speed in enumerate(speeds, 1):
            write_json_atomic(folder / "resnet50" / "1n1g" / f"r_{i}.json", record("1n1g", i, speed, started_at=t0 + i))
        code, _, err = run_cli(["history", "add", str(folder), "--label", label, "--db", db], capsys)
        assert code == 0, err
    first, second = history(db, model="resnet50", case="1n1g")
    assert first.verdict is None and second.verdict == "slower" and "5 vs 5 repeats" in second.verdict_reason
    code, out, _ = run_cli(["history", "show", "--db", db], capsys)
    assert code == 0 and "slower" in out


def test_base_that_failed_gives_no_verdict(tmp_path, capsys):
    base, new = tmp_path / "base", tmp_path / "new"
    write_case(base, "1n1g", [None])
    write_case(new, "1n1g", [100.0, 101.0, 99.0])
    code, out, _ = run_cli(["compare", str(base), str(new), "--json"], capsys)
    (row,) = json.loads(out)
    assert code == 0 and row["verdict"] == "base-failed" and not row["regressed"]


def test_two_x_slowdown_of_three_repeats_fails_from_their_windows(tmp_path, capsys):
    """3 repeats of 4 timed windows a side, the new side half as fast: slower, exit 1. The windows reach the test
    (each repeat's mean over them), and a repeat's record without windows counts its throughput."""
    rng = np.random.default_rng(11)
    for root, mean in ((tmp_path / "base", 115.0), (tmp_path / "new", 57.5)):
        for i, windows in enumerate(runs(rng, 3, 4, mean, 0.05, 0.10), 1):
            speed = len(windows) / sum(1 / w for w in windows)
            extra = {"window_throughputs": windows} if i < 3 else {}
            path = root / "resnet50" / "1n1g" / f"resnet50_b128_fp32_{i}.json"
            write_json_atomic(path, record("1n1g", i, speed, **extra))
    code, out, _ = run_cli(["compare", str(tmp_path / "base"), str(tmp_path / "new"), "--json"], capsys)
    (row,) = json.loads(out)
    assert code == 1 and row["verdict"] == "slower" and row["regressed"]
    assert (row["windows_base"], row["windows_new"]) == (9, 9) and row["df"] == 4 and row["ci_high"] < 0.95
    code, out, _ = run_cli(["compare", str(tmp_path / "new"), str(tmp_path / "base")], capsys)
    assert code == 0 and "faster" in out


def test_a_change_measured_at_another_machine_load_is_named(tmp_path, capsys):
    """7 % slower, but others kept 0.10 cores busy during BASE's runs and 0.80 during NEW's: the verdict stands
    (the runs cannot tell code from machine) and the line says so; at one load, no note."""
    for root, mean, load in ((tmp_path / "base", 100.0, 0.1), (tmp_path / "new", 93.0, 0.8)):
        for i, speed in enumerate(known_noise(int(mean), 5, mean, 0.005), 1):
            rec = record("1n1g", i, speed, machine_load=[{"other_cores": load}])
            write_json_atomic(root / "resnet50" / "1n1g" / f"resnet50_b128_fp32_{i}.json", rec)
    code, out, _ = run_cli(["compare", str(tmp_path / "base"), str(tmp_path / "new")], capsys)
    assert code == 1 and "other processes kept 0.10 cores busy during BASE's runs and 0.80 during NEW's" in out
    code, out, _ = run_cli(["compare", str(tmp_path / "base"), str(tmp_path / "new"), "--json"], capsys)
    (row,) = json.loads(out)
    assert (row["other_cores_base"], row["other_cores_new"]) == (0.1, 0.8) and "machine's" in row["load_note"]
    code, out, _ = run_cli(["compare", str(tmp_path / "base"), str(tmp_path / "base"), "--json"], capsys)
    assert json.loads(out)[0]["load_note"] is None
