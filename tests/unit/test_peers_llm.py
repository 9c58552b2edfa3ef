"""The MaxText and NeMo 2 readers on real logs (tests/fixtures/peer-logs/llm/, copied unchanged from the sources in
its SOURCES.md): dlperf's global figure against the one the source publishes, or against a plain reading of the log
under the format's published rule, written apart from the readers; a wrong device count is a contradiction."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from dlperf.errors import DataError
from dlperf.peers.extract import Options, read_run
from dlperf.peers.layout import parse_log_path
from dlperf.peers.registry import detect

LLM = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "llm"
MAXTEXT = "maxtext/1n4g/guide-v5p8-deepseek2-16b_b24_bf16_1.log"
NEMO = "nemo/1n8g/aws-perf-readme_b16_bf16_1.log"


def test_every_llm_log_is_a_case():
    assert {str(p.relative_to(LLM)) for p in LLM.rglob("*.log")} == {MAXTEXT, NEMO}


def test_maxtext_guide_log_gives_the_published_last_step_figure():
    """MaxText's guide reads step 9: Tokens/s/device 8672.758 on 4 devices; TFLOP/s/device 134.924."""
    record = read_run(parse_log_path(LLM / MAXTEXT), Options())
    assert (record["status"], record["format"], record["unit"]) == ("ok", "maxtext", "tokens/s")
    assert record["throughput"] == pytest.approx(8672.758 * 4, rel=1e-9)
    assert record["kept_steps"] == [9, 9]
    # the second reading, total_weights / seconds = 196608 / 5.667, agrees without knowing the device count
    assert record["cross_check"]["agree"] and record["cross_check"]["second"] == pytest.approx(196608 / 5.667)
    assert record["peer_metrics"]["tflops_per_device"] == pytest.approx(134.924)


def test_maxtext_log_read_with_a_wrong_device_count_contradicts_itself(tmp_path):
    """Read as one device, the printed per-device figure gives a quarter of what its own token counts say."""
    wrong = tmp_path / "maxtext" / "1n1g" / "guide_b24_bf16_1.log"
    wrong.parent.mkdir(parents=True)
    shutil.copy(LLM / MAXTEXT, wrong)
    with pytest.raises(DataError, match="the log contradicts itself: the printed rule gives 8672.76 tokens/s"):
        read_run(parse_log_path(wrong), Options())


def test_nemo_log_gives_sequences_over_step_time():
    """A short log (iterations 74-76, the rule's window is 11-44 of a run): its kept iterations, 3 x 128 sequences
    over their summed train_step_timing."""
    record = read_run(parse_log_path(LLM / NEMO), Options())
    assert (record["status"], record["format"], record["unit"]) == ("ok", "nemo", "sequences/s")
    times = [
        float(m[1]) for line in (LLM / NEMO).read_text().splitlines() if (m := re.search(r"timing in s: (\S+)", line))
    ]
    assert record["throughput"] == pytest.approx(128 * len(times) / sum(times), rel=0.005)
    assert record["peer_metrics"]["tflops_per_device"] == pytest.approx(867.0, abs=1.0)


def test_detection_tells_the_formats_apart():
    maxtext = (LLM / MAXTEXT).read_text().splitlines()[5]
    nemo = (LLM / NEMO).read_text().splitlines()[1]
    assert detect(maxtext).name == "maxtext" and detect(nemo).name == "nemo"
    assert detect("completed step: 3, seconds: 0.006, TFLOP/s/device: 21.951, loss: 10.602") is None  # no tokens
