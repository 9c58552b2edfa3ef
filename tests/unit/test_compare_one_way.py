"""compare prints beside its ratio the figures the ratio is about, so they never point different ways; history's
change is its verdict's ratio too (issue 53: `new/base 0.960` printed beside medians 6.23 and 6.83)."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from report_records import record

from dlperf.records.store import write_json_atomic
from dlperf.reporting.compare import compare

# Each repeat: (its throughput, its timed windows). NEW's third repeat ran its windows slow (a machine-state change
# mid-run) while its record's throughput (the whole run) stayed high: NEW's median throughput is above BASE's,
# its windows' mean below.
BASE = [(6.23, [6.2, 6.25, 6.24]), (6.1, [6.1, 6.12, 6.08]), (6.4, [6.41, 6.38, 6.4])]
NEW = [(6.83, [6.8, 6.85, 6.84]), (6.9, [6.9, 6.88, 6.92]), (6.5, [3.1, 3.0, 3.2])]


def write(root, repeats) -> None:
    for i, (speed, windows) in enumerate(repeats, 1):
        rec = record("1n2g", i, speed, window_throughputs=windows)
        write_json_atomic(root / "resnet50" / "1n2g" / f"resnet50_b128_fp32_{i}.json", rec)


def test_the_table_prints_the_means_the_ratio_is_about(tmp_path, capsys):
    write(tmp_path / "base", BASE)
    write(tmp_path / "new", NEW)
    [row] = compare(tmp_path / "base", tmp_path / "new")
    assert sorted(row.new_speeds)[1] > sorted(row.base_speeds)[1]  # the medians say NEW is faster ...
    assert row.verdict is not None and row.verdict.ratio < 1  # ... the windows' model says slower
    assert row.new_mean / row.base_mean == pytest.approx(row.verdict.ratio, rel=1e-12)
    code, out, _ = run_cli(["compare", str(tmp_path / "base"), str(tmp_path / "new")], capsys)
    assert "base mean" in out and "median" not in out
    assert f"{row.base_mean:.2f}" in out and f"{row.new_mean:.2f}" in out and f"{row.verdict.ratio:.3f}" in out
    code, out, _ = run_cli(["compare", str(tmp_path / "base"), str(tmp_path / "new"), "--json"], capsys)
    [shown] = json.loads(out)
    assert shown["new_mean"] / shown["base_mean"] == pytest.approx(shown["ratio"], rel=1e-12)


def test_history_change_is_its_verdicts_ratio(tmp_path, capsys):
    from dlperf.reporting.history import history

    db = str(tmp_path / "h.sqlite")
    for label, repeats in (("v1", BASE), ("v2", NEW)):
        write(tmp_path / label, [(speed, []) for speed, _ in repeats])
        code, _, err = run_cli(["history", "add", str(tmp_path / label), "--label", label, "--db", db], capsys)
        assert code == 0, err
    first, second = history(db, model="resnet50", case="1n2g")
    assert second.change == pytest.approx(second.mean / first.mean, rel=1e-12)
    assert (second.change > 1) == (second.mean > first.mean)
    code, out, _ = run_cli(["history", "show", "--db", db], capsys)
    assert f"{second.mean:.2f}" in out and f"{second.change - 1:+.1%}" in out
