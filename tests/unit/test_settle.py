"""Warm-up found by measurement (issue 53): the window starts where the steady-state test finds the first kept
lines settled, past the format's count; lines that never settle, or too few to test, are said in the record."""

from __future__ import annotations

import re
from pathlib import Path

from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import parse_log_path
from dlperf.framework_logs.settle import Line, settle

PEER = Path(__file__).parents[1] / "fixtures" / "peer-logs"
QWEN = PEER / "real" / "torchtitan" / "1n8g" / "qwen3-14b-run212_b160_bf16_1.log"  # tps 1,245, 5,780, 10,056, ...
LITGPT = PEER / "stacks" / "litgpt" / "1n1g" / "issue689-redpajama-pythia70m_b4_fp16_1.log"
TIMM = PEER / "trainers" / "timm" / "1n1g" / "test-resnet_b8_fp32_1.log"


def _settle(record: dict) -> list[str]:
    return [note for note in record["reading_notes"] if "settle" in note]


def lines(*rates: float) -> list[Line]:
    return [Line(step, 1, rate) for step, rate in enumerate(rates, start=1)]


def test_torchtitans_step_2_still_warming_up_is_left_out_of_the_window():
    """torchtitan's count drops step 1; its step 2 ran 5,780 tps against ~10,300 after: the window starts after it,
    as `--warmup 2` places it, the record saying so; the framework's own practice (step 10's tps) stays beside."""
    record = read_run(parse_log_path(QWEN), Options())
    [note] = _settle(record)
    assert "after the first 1 kept line(s)" in note and "-44%" in note and "starts after iteration 2" in note
    assert record["kept_steps"] == [4, 10] and record["warmup_iterations"] == 2
    assert record["own_reading"]["figure"] == 10490 * 8
    counted = read_run(parse_log_path(QWEN), Options(warmup=2))  # the count that leaves it out: nothing to say
    assert not _settle(counted) and counted["kept_steps"] == [4, 10]
    assert counted["throughput"] == record["throughput"]


def test_an_accumulation_swing_settles_in_windows_of_its_cycle():
    """lit-gpt's iterations alternate a micro-step and an optimizer step (198 and 215 ms: 8 % apart, never three
    within 5 %): in windows of two lines they agree at once, so the count's window stands and nothing is said; the
    same swing after two slow micro-steps leaves those out."""
    times = [float(t) for t in re.findall(r"iter time: ([\d.]+)ms", LITGPT.read_text())]
    assert min(times[1::2]) / max(times[::2]) > 1.05  # the swing, in the log itself
    record = read_run(parse_log_path(LITGPT), Options())
    assert not _settle(record) and record["kept_steps"] == [76, 98]
    warm = settle(lines(50, 60, *[1000 / t for t in times]), 5)
    assert warm.drop == 2 and warm.note is not None and "windows of 2 lines" in warm.note


def test_lines_that_agree_from_the_first_are_kept_as_the_count_places_them():
    assert settle(lines(100, 101, 99, 100), 1) == settle(lines(100, 101, 99), 1)
    assert settle(lines(100, 101, 99), 1).drop == 0 and settle(lines(100, 101, 99), 1).note is None


def test_too_few_or_never_settling_lines_are_flagged_and_the_count_stands():
    """Never averaged over warm-up silently: two lines cannot show a steady state, and lines that never agree may
    hold warm-up; the window stays where the count puts it, the record saying so."""
    few = settle(lines(50, 100), 1)
    assert few.drop == 0 and few.note is not None and "too few" in few.note
    never = settle(lines(50, 100, 70, 130, 60), 1)
    assert never.drop == 0 and never.note is not None and "do not settle" in never.note
    record = read_run(parse_log_path(TIMM), Options())  # a CPU run's 15 updates, 8-30 % apart line to line
    assert record["kept_steps"] == [7, 32] and any("do not settle" in note for note in _settle(record))


def test_a_line_without_a_rate_before_the_first_is_kept_where_the_rest_settle_at_once():
    """The first stamp of an excerpt has no line before it: no rate, and not warm-up for that."""
    assert settle([Line(1, 1, None), *lines(100, 100, 100)], 1).drop == 0
    assert settle([Line(1, 1, None), *lines(40, 100, 100, 100)], 1).drop == 2
