"""Declared formats cannot mislead: rates combine as samples over time, the time unit is the line's own, epochs and
it/s lines are scaled as declared, a step that repeats in one process is a new epoch, and a format that cannot
give samples over time is refused when it is loaded. Every expected figure is worked out by hand below."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.errors import ConfigError
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import LogInfo


def read(tmp_path: Path, fmt: str, lines: list[str], batch: int = 8, devices: int = 1) -> dict:
    spec, log = tmp_path / f"f{abs(hash(fmt))}.yaml", tmp_path / "run.log"  # a loaded format is cached by path
    spec.write_text(fmt)
    log.write_text("\n".join(lines) + "\n")
    info = LogInfo(log, "m", 1, devices, batch, "fp32", 1)
    return read_run(info, Options(format=str(spec)))


def test_rates_combine_as_samples_over_time(tmp_path):
    # 4 iterations at 100 samples/s and 4 at 300: 8 x 8 samples in 4 x 0.08 + 4 x 0.08 / 3 s = 150, not 200
    lines = [f"step {i} rate {100 if i <= 4 else 300}" for i in range(1, 9)]
    record = read(tmp_path, "line: 'step (?P<iteration>\\d+) rate (?P<throughput>[\\d.]+)'\n", lines)
    assert record["throughput"] == pytest.approx(150.0)


def test_lines_printed_every_n_iterations_weigh_their_iterations(tmp_path):
    # lines every 10 iterations, the last one after 2: 100/s for 10, 200/s for 10, 50/s for 2 (warm-up 10)
    lines = ["it 10 r 999", "it 20 r 100", "it 30 r 200", "it 32 r 50"]
    fmt = "line: 'it (?P<iteration>\\d+) r (?P<throughput>[\\d.]+)'\nwarmup: 10\n"
    expected = 22 * 8 / (10 * 8 / 100 + 10 * 8 / 200 + 2 * 8 / 50)
    assert read(tmp_path, fmt, lines)["throughput"] == pytest.approx(expected)


def test_the_time_unit_is_the_lines_own(tmp_path):
    lines = ["iter 1: time 2.5s", "iter 2: time 500ms", "iter 3: time 1.5s", "iter 4: time 250000us"]
    fmt = "line: 'iter (?P<iteration>\\d+): time (?P<step_time>[\\d.]+)(?P<step_time_unit>us|ms|s)'\nwarmup: 1\n"
    assert read(tmp_path, fmt, lines)["throughput"] == pytest.approx(3 * 8 / (0.5 + 1.5 + 0.25))


def test_epoch_lines_and_iteration_rates(tmp_path):
    # `per: epoch`: each line is an epoch of 32 steps at its step time; the first epoch is the warm-up
    lines = ["Epoch 1 - 900ms/step", "Epoch 2 - 100ms/step", "Epoch 3 - 300ms/step"]
    fmt = ("line: 'Epoch (?P<iteration>\\d+) - (?P<step_time>\\d+)ms/step'\nstep_time_unit: ms\nper: epoch\n"
           "steps_per_epoch: 32\nwarmup: 32\n")  # fmt: skip
    assert read(tmp_path, fmt, lines)["throughput"] == pytest.approx(8 / 0.2)
    # it/s counts iterations: x the global batch (4 per device x 2 devices)
    fmt = "line: '(?P<iteration>\\d+)/60 .* (?P<throughput>[\\d.]+)it/s'\nthroughput_counts: iterations\n"
    lines = [f"{i}/60 [00:01<00:02, 5.00it/s]" for i in range(1, 7)]
    assert read(tmp_path, fmt, lines, batch=4, devices=2)["throughput"] == pytest.approx(5 * 8)


def test_a_step_repeated_by_one_process_is_a_new_epoch_not_a_rank(tmp_path):
    # Keras-style `32/32 - 616ms/step` per epoch: four epochs, not four ranks of one iteration
    lines = [f"32/32 - {ms}ms/step" for ms in (900, 100, 200, 100)]
    fmt = "line: '(?P<iteration>\\d+)/32 - (?P<step_time>\\d+)ms/step'\nstep_time_unit: ms\nwarmup: 32\n"
    record = read(tmp_path, fmt, lines)
    assert record["kept_steps"] == [64, 128] and record["kept_lines"] == 3
    assert record["throughput"] == pytest.approx(8 / ((0.1 + 0.2 + 0.1) / 3))
    assert "warning" not in record  # one run, not restarts


def test_a_format_that_cannot_give_samples_over_time_is_refused_when_loaded(tmp_path):
    with pytest.raises(ConfigError, match="cannot give samples over time"):
        read(tmp_path, "line: 'step (?P<iteration>\\d+) loss (?P<loss>[\\d.]+)'\n", ["step 1 loss 2"])
    with pytest.raises(ConfigError, match="per: epoch needs steps_per_epoch"):
        read(tmp_path, "line: 'e (?P<iteration>\\d+) (?P<step_time>[\\d.]+)'\nper: epoch\n", ["e 1 2"])
