"""Formats that print a step time follow one rule: the kept iterations' samples over their summed time, never a
mean of per-line rates; and a log that prints no step time gets no invented latency.

The same step times written as Paddle, PyTorch-ImageNet, Megatron and HugeCTR lines must give one figure, worked
out here by hand: 2 x 10 iterations of 0.1 s and 10 of 0.4 s at a global batch of 64 are 1,920 samples in 6 s
(320/s), where a mean of the per-line rates would say (640 + 640 + 160) / 3 = 480/s.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import run_cli

from dlperf.errors import DataError
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import LogInfo, parse_log_path

REAL = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "real"
TIMES = {10: 0.1, 20: 0.1, 30: 0.4}  # the iteration each line ends -> seconds per iteration over its 10
LINES = {
    "paddle": "[Pass 0, train batch {i}] \tloss 6.9, acc1 0.0, acc5 0.0, elapse {t:.4f} sec",
    "pytorch-imagenet": "Epoch: [0][{i:3d}/200]\tTime  {t:.3f} ( {t:.3f})\tData  0.001 ( 0.001)\tLoss 6.9e+00",
    "megatron": " iteration {i:8d}/     200 | consumed samples: {s:12d} | elapsed time per iteration (ms): {ms:.1f} | "
    "global batch size:    64 | lm loss: 1.0E+01 |",
    "hugectr": "[HCTR][04:50:22.860][INFO][RK0][main]: Iter: {i} Time(10 iters): {total:.4f}s Loss: 0.13 lr:24.0",
}


def _log(tmp_path: Path, name: str) -> Path:
    rows = [(0, 1.0)] + list(TIMES.items())  # iteration 0: the start-up line, inside the warm-up
    text = "".join(
        LINES[name].format(i=i, t=t, ms=t * 1000, s=i * 64, total=t * 10) + "\n"
        for i, t in rows
        if not (name == "hugectr" and i == 0)  # HugeCTR's first line is its first interval's end
    )
    path = tmp_path / f"{name}.log"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", sorted(LINES))
def test_every_format_with_a_step_time_takes_samples_over_time(tmp_path, name):
    path = _log(tmp_path, name)
    record = read_run(LogInfo(path, "resnet50", 1, 1, 64, "fp32", 1), Options(format=name, warmup=0, window=0))
    assert record["format"] == name
    assert record["throughput"] == pytest.approx(3 * 10 * 64 / (10 * (0.1 + 0.1 + 0.4)))  # 320, not 480
    assert record["latency_ms"]["mean"] == pytest.approx(200.0)  # 6 s over 30 iterations


def test_no_latency_is_invented_where_the_log_prints_no_step_time(tmp_path, capsys):
    """MXNet prints speeds only: the record has no latency, and the report and CSV carry an empty cell."""
    source = REAL / "mxnet" / "1n4g" / "resnet18-tornadomeet-issue5_b128_fp32_1.log"
    record = read_run(parse_log_path(source), Options())
    assert record["status"] == "ok" and "latency_ms" not in record
    logs = tmp_path / "logs" / "1n4g"
    logs.mkdir(parents=True)
    (logs / source.name).write_bytes(source.read_bytes())
    code, _, err = run_cli(["extract", str(tmp_path / "logs"), "--out", str(tmp_path / "out"), "--no-plots"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "out" / "runs.csv").open()))
    assert [row["latency_ms_mean"] for row in rows] == [""]
    assert float(rows[0]["throughput"]) == pytest.approx(record["throughput"])
    assert (tmp_path / "out" / "report.md").is_file()


@pytest.mark.parametrize(("zeros", "refused"), [((3, 4, 5), False), ((25, 26, 27), True)])
def test_a_time_printed_as_zero_past_the_warm_up_refuses_the_reading(tmp_path, zeros, refused):
    """The PyTorch examples print a step's time to 1 ms: a step under 0.5 ms prints `Time  0.000`, which tells
    that the log cannot time it. In the warm-up such lines are skipped; past it the reading is refused, where it
    once kept the one line in between (CI: a tiny model read 4,000 images/s from 1 of 4 window lines)."""
    text = "".join(LINES["pytorch-imagenet"].format(i=i, t=0.0 if i in zeros else 0.010) + "\n" for i in range(1, 31))
    path = tmp_path / "pytorch-imagenet.log"
    path.write_text(text)
    info, options = LogInfo(path, "resnet50", 1, 1, 64, "fp32", 1), Options(format="pytorch-imagenet")
    if refused:
        with pytest.raises(DataError, match="3 pytorch-imagenet line.s. past the 20-iteration warm-up print a time"):
            read_run(info, options)
    else:
        record = read_run(info, options)
        assert record["status"] == "ok" and record["throughput"] == pytest.approx(64 / 0.010)
