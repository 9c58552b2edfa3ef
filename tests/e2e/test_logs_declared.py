"""A log format declared in YAML reads a script nobody wrote a reader for, through `dlperf extract FILE` and through
`dlperf run --command ... --log-format PATH.yaml`; the Hugging Face Trainer's whole-run figure is read and named."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_dlperf

from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import LogInfo

# A CLU-style metric writer's line, as a JAX/Flax script prints it (no reader module knows it).
SCRIPT = """
import sys
for step in range(1, 61):
    print(f"I1123 10:00:{step % 60:02d}.000 train.py:88] [step={step:5d}] loss={3 - step / 100:.4f}, "
          f"examples_per_sec={100 + step % 7:.2f}", flush=True)
"""
FORMAT = """
name: clu-writer
line: '\\[step=\\s*(?P<iteration>\\d+)\\] loss=(?P<loss>[\\d.]+), examples_per_sec=(?P<throughput>[\\d.]+)'
unit: sequences/s
printed: per device
warmup: 10
window: 40
"""


def hand(text: str, devices: int) -> float:
    """By hand: samples over time of iterations 11-50 (the 40 after a 10-iteration warm-up), each an iteration at
    its printed per-device rate (so 40 / the sum of 1 / rate), x devices: never a mean of the rates."""
    rows = [(int(s), float(v)) for s, v in re.findall(r"\[step=\s*(\d+)\].*examples_per_sec=([\d.]+)", text)]
    return statistics.harmonic_mean([v for s, v in rows if 10 < s <= 50]) * devices


def write(tmp_path: Path) -> tuple[Path, Path, str]:
    script, fmt = tmp_path / "train.py", tmp_path / "clu.yaml"
    script.write_text(SCRIPT)
    fmt.write_text(FORMAT)
    log = tmp_path / "train-output.txt"
    text = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    log.write_text(text)
    return log, fmt, text


def test_declared_format_reads_an_unknown_script_from_extract(tmp_path):
    log, fmt, text = write(tmp_path)
    done = run_dlperf(["extract", str(log), "--nodes", "1", "--devices-per-node", "2", "--batch-size", "4",
                       "--log-format", str(fmt), "--no-plots", "--out", str(tmp_path / "out")])  # fmt: skip
    assert done.returncode == 0, done.stderr
    (record_file,) = (tmp_path / "out" / "records").rglob("*.json")
    record = json.loads(record_file.read_text())
    assert (record["format"], record["unit"], record["kept_steps"]) == ("clu-writer", "sequences/s", [11, 50])
    assert record["throughput"] == pytest.approx(hand(text, 2), rel=1e-9)
    assert record["peer_metrics"]["loss"] < 3


def test_declared_format_reads_a_command_run(tmp_path):
    _, fmt, _ = write(tmp_path)
    command = f"{sys.executable} {tmp_path / 'train.py'}"
    done = run_dlperf(["run", "--command", command, "--command-per", "node", "--log-format", str(fmt),
                       "--out", str(tmp_path / "run")])  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = next(json.loads(p.read_text()) for p in (tmp_path / "run").rglob("*.json") if p.name != "summary.json")
    log = next((tmp_path / "run").rglob("*.log")).read_text()
    assert record["status"] == "ok" and record["format"] == "clu-writer"
    assert record["throughput"] == pytest.approx(hand(log, record["world_size"]), rel=1e-9)


def test_a_bad_declared_format_is_one_line_exit_2(tmp_path):
    log, fmt, _ = write(tmp_path)
    fmt.write_text("line: '(?P<iteration>\\d+) no figure'\n")
    done = run_dlperf(["extract", str(log), "--nodes", "1", "--devices-per-node", "1", "--batch-size", "4",
                       "--log-format", str(fmt)])  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "needs the named groups" in done.stderr and "Traceback" not in done.stderr


HF = """***** Running training *****
{'loss': 3.4512, 'grad_norm': 2.1, 'learning_rate': 4.5e-05, 'epoch': 0.5}
{'train_runtime': 123.4567, 'train_samples_per_second': 45.678, 'train_steps_per_second': 2.855, 'epoch': 1.0}
***** train metrics *****
  train_samples_per_second =     45.678
  train_steps_per_second   =      2.855
"""


def test_hf_trainer_whole_run_figure_says_what_it_includes(tmp_path):
    log = tmp_path / "run_clm.txt"
    log.write_text(HF)
    record = read_run(LogInfo(log, "gpt2", 1, 2, 8, "fp32", 1), Options())
    assert (record["format"], record["throughput"]) == ("hf-trainer", 45.678)
    assert "evaluation" in record["reading_notes"][0] and record["cross_check"]["agree"] is None
