"""The arrival-time second reading of a `--command` log: dlperf stamps each line as it reaches the log, so a
figure printed by a script (here through a declared format, which has no other second reading) is checked against
the samples between its lines over the time between their arrivals; a log whose printed step time is 10x off is
refused as contradicting itself, never recorded as a number."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import run_dlperf

# Sleeps 40 ms per step and prints a step time `scale` times the truth.
SCRIPT = """
import sys, time
scale = float(sys.argv[1])
for step in range(1, 41):
    start = time.perf_counter()
    time.sleep(0.04)
    print(f"step {step} took {(time.perf_counter() - start) * scale:.5f} s", flush=True)
"""
FORMAT = "line: 'step (?P<iteration>\\d+) took (?P<step_time>[\\d.]+) s'\nwarmup: 5\n"


def run(tmp_path: Path, scale: float) -> tuple[int, dict, str]:
    script, fmt = tmp_path / "sleepy.py", tmp_path / "sleepy.yaml"
    script.write_text(SCRIPT)
    fmt.write_text(FORMAT)
    out = tmp_path / f"out{scale:g}"
    done = run_dlperf(["run", "--batch-size", "4", "--command", f"{sys.executable} {script} {scale}",
                       "--log-format", str(fmt), "--out", str(out)])  # fmt: skip
    (record,) = [json.loads(p.read_text()) for p in out.rglob("*.json") if p.parent != out]
    return done.returncode, record, done.stderr


def test_a_true_figure_agrees_with_the_arrival_times(tmp_path):
    code, record, err = run(tmp_path, 1.0)
    assert code == 0, err
    check = record["cross_check"]
    assert check["reading"].startswith("arrival times of its lines") and check["agree"] is True
    assert record["throughput"] == pytest.approx(4 / 0.04, rel=0.1) and check["second"] == pytest.approx(
        record["throughput"], rel=0.1
    )
    assert (tmp_path / "out1" / "resnet50" / "1n1g" / "resnet50_b4_fp32_external_1.arrivals").is_file()


def test_a_figure_the_arrival_times_contradict_is_refused(tmp_path):
    code, record, _ = run(tmp_path, 0.1)  # prints 4 ms for 40 ms steps: 10x the speed
    assert code == 1 and record["status"] == "failed" and record.get("throughput") is None
    assert "the log contradicts itself" in record["error"] and "arrival times" in record["error"]
