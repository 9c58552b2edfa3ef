"""Warm-up found by measurement, as a flag (issue 53): the steady-state test on the window's first kept lines says
where a format's warm-up count leaves warm-up in the window, and which --warmup leaves it out."""

from __future__ import annotations

from pathlib import Path

from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import parse_log_path
from dlperf.framework_logs.settle import settle_note

REAL = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "real"
QWEN = REAL / "torchtitan" / "1n8g" / "qwen3-14b-run212_b160_bf16_1.log"  # tps 1,245, 5,780, 10,056, 10,303, ...


def _settle(record: dict) -> list[str]:
    return [note for note in record["reading_notes"] if "settle" in note]


def test_torchtitans_step_2_still_warming_up_is_said_with_the_warmup_that_leaves_it_out():
    """torchtitan's count drops step 1; its step 2 ran 5,780 tps against ~10,300 after: the record says the lines
    settle only after it, and `--warmup 2` leaves it out (then nothing is said, and the figure rises)."""
    record = read_run(parse_log_path(QWEN), Options())
    [note] = _settle(record)
    assert "after the first 1 kept line(s)" in note and "to iteration 2" in note and "--warmup 2" in note
    assert "-44%" in note
    settled = read_run(parse_log_path(QWEN), Options(warmup=2))
    assert not _settle(settled) and settled["kept_steps"][0] == 4
    assert settled["throughput"] > record["throughput"]


def test_lines_that_agree_from_the_first_or_are_too_few_say_nothing():
    assert settle_note([(1, 100.0), (2, 101.0), (3, 99.0), (4, 100.0)], 1) is None
    assert settle_note([(1, 50.0), (2, 100.0), (3, 100.0)], 1) is None  # three lines: too few to tell
    never = settle_note([(1, 50.0), (2, 100.0), (3, 70.0), (4, 130.0), (5, 60.0)], 1)
    assert never is not None and "do not settle" in never
